#!/system/bin/hil-python
"""The virtual board's ``enn_executor_runner``: a thin client of hil's warm executor.

hil pushes this file under the real runner's name; the board runs it as ``python -I -S``. It
sends its argv, device cwd and pid to the executor in the virtual board process, relays the
runner's stdout and stderr as the runner writes them (a runner killed at its deadline has
shown its progress, as the real one's unbuffered stderr does), then exits with the runner's
code, or kills itself with the runner's signal so the shell sees 128+N exactly as with the
real binary.

Startup is the whole cost of an exec, so this file imports only C modules that are already
loaded or cheap (``_socket``, ``_signal``): ``json``, ``socket`` and ``signal`` pull in
``re`` and ``enum`` and would triple the startup time (about 15 ms instead of 45 ms here).

Wire protocol (unix stream socket, one request per connection, integers big-endian):

- request: a u32 length, then that many bytes of UTF-8 JSON
  ``{"argv": [...without argv[0]], "cwd": str, "pid": int, "build": [str, ...]}`` (non-ASCII
  characters are ``\\u`` escaped, so undecodable argv bytes travel as surrogate escapes);
  ``build`` holds the fault SPECs of this file's own ``# hil-virtual-runner-build: SPEC``
  lines (a test rig's runner build, ``runner_build.py``), read from the file when it runs;
- response: frames of ``kind: u8``, ``length: u32``, then that many bytes: kind 1 is stdout,
  kind 2 stderr, in the order the runner wrote them; kind 0 ends the response with 16 bytes
  ``exit_code: i32`` (-1 when killed by a signal), ``signal: i32`` (0 when it exited),
  ``peak RSS: u64`` (KiB, 0 when not measured).

Environment (for tests on the host): ``HIL_EXECUTOR_SOCKET`` overrides the socket path
(default ``/dev/socket/hil-enn-executor``), ``HIL_DEVICE_CWD`` the device cwd sent (default
the real cwd). ``HIL_TIME_V=1`` (set by the virtual board's ``time -v``, which stands for
toybox's): after the runner's output, ``Max RSS (KiB): N`` goes to stderr with the peak the
executor measured, as toybox ``time -v`` prints it after its child (this front's own RSS is
not the runner's: the program runs in the executor).

If the executor cannot be reached the front prints one line naming the socket and exits 1.
SIGINT, SIGTERM and SIGPIPE keep their default action (death), as for a C program.
"""

import _signal
import _socket
import os
import sys

SOCKET_PATH = "/dev/socket/hil-enn-executor"
FRAME_HEADER_BYTES = 5
END_BYTES = 16
BUILD_MARKER = b"# hil-virtual-runner-build: "
"""A line of a runner stand-in naming one fault SPEC of its build (runner_build.py, which
cannot be imported here: this front imports nothing of hil)."""


def json_string(text: str) -> str:
    """``text`` as a JSON string literal, ASCII only."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    out.append('"')
    return "".join(out)


def encode_request(argv: list[str], cwd: str, pid: int, build: tuple[str, ...] = ()) -> bytes:
    """The length-prefixed JSON request."""
    args = ", ".join(json_string(arg) for arg in argv)
    settings = ", ".join(json_string(spec) for spec in build)
    body = (f'{{"argv": [{args}], "cwd": {json_string(cwd)}, "pid": {pid:d}, '
            f'"build": [{settings}]}}')
    return len(body).to_bytes(4, "big") + body.encode("ascii")


def build_settings(path: str) -> tuple[str, ...]:
    """The fault SPECs of the `BUILD_MARKER` lines of the runner file at `path` (none when it
    cannot be read: hil's own front carries none)."""
    try:
        with open(path, "rb") as runner:
            data = runner.read()
    except OSError:
        return ()
    return tuple(line[len(BUILD_MARKER):].strip().decode("ascii", "replace")
                 for line in data.split(b"\n") if line.startswith(BUILD_MARKER))


def _recv_exact(conn: _socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("the executor closed the connection")
        data += chunk
    return bytes(data)


def _die(sig: int) -> None:
    """Die by ``sig`` like a crashed binary (no core file); exit 128+sig if it is blocked."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _signal.signal(sig, _signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    sys.exit(128 + sig)


def main() -> None:
    """Forward this exec to the warm executor and mirror its outcome."""
    for sig in (_signal.SIGINT, _signal.SIGPIPE):
        _signal.signal(sig, _signal.SIG_DFL)
    path = os.environ.get("HIL_EXECUTOR_SOCKET", SOCKET_PATH)
    cwd = os.environ.get("HIL_DEVICE_CWD") or os.getcwd()
    request = encode_request(sys.argv[1:], cwd, os.getpid(), build_settings(__file__))
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    streams = {1: sys.stdout.buffer, 2: sys.stderr.buffer}
    try:
        conn.connect(path)
        conn.sendall(request)
        while True:
            header = _recv_exact(conn, FRAME_HEADER_BYTES)
            data = _recv_exact(conn, int.from_bytes(header[1:5], "big"))
            if header[0] == 0:
                break
            streams[header[0]].write(data)
            streams[header[0]].flush()
        exit_code = int.from_bytes(data[0:4], "big", signed=True)
        sig = int.from_bytes(data[4:8], "big", signed=True)
        peak_rss_kib = int.from_bytes(data[8:16], "big")
    except OSError as error:
        sys.stderr.write(f"enn_executor_runner: hil virtual executor unreachable at {path}: {error}\n")
        sys.exit(1)
    finally:
        conn.close()
    if os.environ.get("HIL_TIME_V") == "1" and peak_rss_kib:
        sys.stderr.buffer.write(f"Max RSS (KiB): {peak_rss_kib}\n".encode())
        sys.stderr.buffer.flush()
    if sig:
        _die(sig)
    sys.exit(exit_code)


if __name__ == "__main__":
    main()
