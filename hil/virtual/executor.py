"""The virtual board's ``enn_executor_runner``: a warm ExecuTorch host runtime behind a socket.

On a real board ``enn_executor_runner`` is a C++ binary. On the virtual board hil pushes the
stdlib-only runner front (``runner_front.py``) under that name; the front forwards its argv
and cwd over a unix socket to the :class:`WarmExecutor` living in the board process, which
imported ``executorch.runtime`` once, so a runner exec costs milliseconds like the real one.

The flags and outcomes follow the runner contract (gflags semantics):

- ``--model`` (``model.pte``), ``--input`` (one space-separated string of raw input files;
  empty or absent: every input is ones), ``--output_path`` (an existing folder; outputs
  written as ``output_<i>.bin``; empty: nothing written), ``--num_executions`` (1, must be
  >= 1), ``--warm_up`` (0, must be >= 0), ``--dump_statistics`` (false). ``--flag=value``,
  ``--flag value`` and a single dash are accepted; bools as ``--dump_statistics``,
  ``--dump_statistics=true|false`` (also 1/0, yes/no, t/f, y/n) and ``--nodump_statistics``;
  ``--`` ends the flags; ``--help`` prints the flags to stdout and exits 1, as gflags does.
- Device paths are relative to the device cwd and map to ``fs_root/<path>``; a path whose
  host location (symlinks resolved) leaves ``fs_root`` is treated as a missing file.
- Exit 0 on success. Exit 1: a gflags error (``ERROR: unknown command line flag 'x'``...),
  extra positional arguments, or a program that cannot be read or parsed (missing or
  corrupt ``.pte``). SIGABRT (shell status 134) on a failed check, reported ET_CHECK_MSG
  style (``F ... In function main(), assert failed (cond): message``): method load failure,
  wrong input count or size, unreadable input file, missing output folder, execution
  failure. SIGSEGV (139) before flags are parsed when the board has no vendor library
  (``vendor_lib=False``), as the real runner crashes initialising ENN.
- stderr starts with one banner line saying this is the VIRTUAL runner. Log lines use
  ExecuTorch's ``ET_LOG`` shape: ``<I|E|F> HH:MM:SS.uuuuuu executorch:virtual_runner] msg``,
  the clock starting when the request arrives.

Timing. ``--warm_up`` runs are untimed; then ``--num_executions`` timed runs, each timed
around one ``Method.execute`` call (inputs are copied in and outputs copied out inside it)
and truncated to whole microseconds like the C++ runner. After the runs stderr gets
``"%d inference took %f ms, avg %f ms"``: the number of timed runs, their total, and the mean
of the runs after the first (the first run is excluded as the one paying for cold caches);
with ``--num_executions=1`` there is nothing after the first, so avg is the first run's time.
Outputs come from the last timed run.

``statistics.txt`` (``--dump_statistics``, written in the CURRENT folder) holds exactly
four lines, each ``<key>: <ms>`` with the value printed as C ``%f`` (6 decimals)::

    init: 0.004000    # getting the runtime (ENN init on a real board)
    load: 0.812000    # reading and parsing the program and loading method "forward"
    1st: 0.051000     # the first timed run
    avg: 0.047000     # mean of the timed runs after the first (1st when there is one run)

Programs are cached by (host path, size, mtime_ns) and loaded from bytes (never mmap'd, so a
file rewritten in place cannot fault the board process); a cache hit still reports its
(tiny) load time. ExecuTorch's own C++ log lines go to the board process's stderr, not the
runner's. The wire protocol is documented in ``runner_front.py``.
"""

from __future__ import annotations

import collections
import errno
import importlib
import json
import logging
import os
import posixpath
import re
import signal
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from hil.virtual.faults import Fault

log = logging.getLogger(__name__)

DEVICE_SOCKET_PATH = "/dev/socket/hil-enn-executor"
"""Where the runner front looks for the executor inside the board's sandbox."""

BANNER = "enn_executor_runner (hil VIRTUAL board: ExecuTorch host runtime, no NPU)"
"""First line of every virtual runner's stderr."""

METHOD_NAME = "forward"

# The wire protocol, documented in runner_front.py (which cannot import this module).
_FRAME = struct.Struct("!I")
_RESPONSE_HEADER = struct.Struct("!iiII")
_MAX_REQUEST_BYTES = 1 << 20
_REQUEST_READ_TIMEOUT_S = 30.0

# ExecuTorch ScalarType codes (runtime/core/portable_type/scalar_type.h) -> torch dtype names.
_SCALAR_TYPES = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    11: "bool",
    15: "bfloat16",
    27: "uint16",
    28: "uint32",
    29: "uint64",
}


@dataclass(frozen=True)
class RunnerResult:
    """What one runner exec produced, as the shell on the board would see it."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None = None
    """The exit code, or None when the runner died by a signal."""
    signal: int | None = None
    """The signal that killed the runner, or None when it exited."""

    @property
    def shell_status(self) -> int:
        """``$?`` in the board's shell: the exit code, or 128 + the signal number."""
        return self.exit_code if self.signal is None else 128 + self.signal


# ----------------------------------------------------------------------------- flags


@dataclass(frozen=True)
class _Flag:
    kind: str  # "string" | "int32" | "bool"
    default: str | int | bool
    help: str


_FLAGS = {
    "model": _Flag("string", "model.pte", "Model serialized in flatbuffer format."),
    "input": _Flag("string", "", "Input file path, support multiple inputs: input_1 input_2 ..."),
    "output_path": _Flag("string", "", "Output Execution results to target directory."),
    "num_executions": _Flag("int32", 1, "Number of inferences to measure."),
    "warm_up": _Flag("int32", 0, "Number of untimed inferences before measuring."),
    "dump_statistics": _Flag("bool", False, "Write statistics.txt in the current folder."),
}
_TRUE = frozenset({"true", "t", "yes", "y", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "0"})
_INT_RE = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|[0-9]+)")


class _FlagError(Exception):
    """A gflags parse error; the message is printed after ``ERROR: ``."""


def _flag_value(name: str, value: str) -> str | int | bool:
    flag = _FLAGS[name]
    if flag.kind == "string":
        return value
    if flag.kind == "bool":
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
    elif _INT_RE.fullmatch(value):
        number = int(value, 16 if "x" in value.lower() else 10)
        if -(2**31) <= number < 2**31:
            return number
    raise _FlagError(f"illegal value '{value}' specified for {flag.kind} flag '{name}'")


def _parse_flags(args: Sequence[str]) -> tuple[dict[str, Any], list[str], bool]:
    """gflags-like parsing: (flag values, positional args, --help seen)."""
    values: dict[str, Any] = {name: flag.default for name, flag in _FLAGS.items()}
    positional: list[str] = []
    want_help = False
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, has_value, value = arg.lstrip("-").partition("=")
        if name == "help":
            want_help = True
        elif name in _FLAGS and _FLAGS[name].kind == "bool":
            values[name] = _flag_value(name, value) if has_value else True
        elif name.startswith("no") and name[2:] in _FLAGS and _FLAGS[name[2:]].kind == "bool":
            if has_value:
                raise _FlagError(f"illegal value '{arg}' specified for bool flag '{name[2:]}'")
            values[name[2:]] = False
        elif name in _FLAGS:
            if not has_value:
                if i == len(args):
                    raise _FlagError(
                        f"flag '{arg}' is missing its argument; flag description: {_FLAGS[name].help}"
                    )
                value = args[i]
                i += 1
            values[name] = _flag_value(name, value)
        else:
            raise _FlagError(f"unknown command line flag '{name}'")
    return values, positional, want_help


def _usage() -> str:
    lines = ["enn_executor_runner: Run an ExecuTorch program (hil VIRTUAL board).", "", "  Flags:"]
    for name, flag in _FLAGS.items():
        default = str(flag.default).lower() if flag.kind == "bool" else flag.default
        lines.append(f'    -{name} ({flag.help}) type: {flag.kind} default: "{default}"')
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------- one runner exec


class _RunnerExit(Exception):
    """Ends the runner: with an exit code, or killed by a signal."""

    def __init__(self, *, exit_code: int | None = None, sig: int | None = None) -> None:
        super().__init__(exit_code, sig)
        self.exit_code = exit_code
        self.sig = sig


@dataclass
class _Console:
    """The runner's stdout and stderr, with ET_LOG-shaped log lines."""

    start: float = field(default_factory=time.perf_counter)
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)

    def log(self, level: str, message: str) -> None:
        elapsed_us = int((time.perf_counter() - self.start) * 1e6)
        seconds, micros = divmod(elapsed_us, 1_000_000)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        self.stderr += (
            f"{level} {hours:02d}:{minutes:02d}:{seconds:02d}.{micros:06d} "
            f"executorch:virtual_runner] {message}\n"
        ).encode()

    def check(self, ok: bool, condition: str, message: str) -> None:
        """ET_CHECK_MSG: log a fatal line and abort (SIGABRT) unless ``ok``."""
        if not ok:
            self.fail(condition, message)

    def fail(self, condition: str, message: str) -> NoReturn:
        """A failed ET_CHECK_MSG: log a fatal line and abort (SIGABRT)."""
        self.log("F", f"In function main(), assert failed ({condition}): {message}")
        raise _RunnerExit(sig=signal.SIGABRT)


class _DeviceFs:
    """Maps the runner's device paths into ``fs_root``."""

    def __init__(self, fs_root: Path, cwd: str) -> None:
        self._root = fs_root.resolve()
        self._cwd = posixpath.join("/", cwd)

    def host(self, device_path: str) -> Path | None:
        """The host path for ``device_path``, or None when it would leave ``fs_root``."""
        absolute = posixpath.normpath(posixpath.join(self._cwd, device_path))
        host = (self._root / absolute.lstrip("/")).resolve()
        return host if host.is_relative_to(self._root) else None

    def write(self, device_path: str, data: bytes) -> bool:
        """Write a file; False when it cannot be (missing folder, outside ``fs_root``...)."""
        host = self.host(device_path)
        if host is None:
            return False
        try:
            host.write_bytes(data)
        except OSError:
            return False
        return True


def _ms(seconds: float) -> float:
    """Milliseconds truncated to whole microseconds, as the C++ runner computes them."""
    return int(seconds * 1e6) / 1000.0


class ProgramCache:
    """Loaded ExecuTorch programs keyed by (host path, size, mtime_ns), least recent evicted."""

    def __init__(self, max_programs: int = 8) -> None:
        self._max = max_programs
        self._programs: collections.OrderedDict[tuple[str, int, int], Any] = collections.OrderedDict()

    def load(self, path: Path) -> tuple[Any, bool]:
        """The ``executorch.runtime.Program`` for ``path`` and whether it was cached.

        Raises OSError when the file cannot be read, RuntimeError when it does not parse.
        """
        from executorch.runtime import Runtime

        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key in self._programs:
            self._programs.move_to_end(key)
            return self._programs[key], True
        program = Runtime.get().load_program(path.read_bytes())
        for stale in [k for k in self._programs if k[0] == key[0]]:
            del self._programs[stale]
        self._programs[key] = program
        while len(self._programs) > self._max:
            self._programs.popitem(last=False)
        return program, False


def _dtype(code: int) -> Any:
    import torch

    name = _SCALAR_TYPES.get(code)
    return getattr(torch, name) if name else None


def _read_inputs(console: _Console, fs: _DeviceFs, files: list[str], meta: Any) -> list[Any]:
    """Input tensors from raw files, or all ones when ``files`` is empty."""
    import torch

    infos = [meta.input_tensor_meta(i) for i in range(meta.num_inputs())]
    dtypes = [_dtype(info.dtype()) for info in infos]
    for index, (info, dtype) in enumerate(zip(infos, dtypes, strict=True)):
        console.check(
            dtype is not None,
            "dtype is supported",
            f"input {index} has ScalarType {info.dtype()}, unsupported by the virtual runner",
        )
    if not files:
        return [torch.ones(info.sizes(), dtype=dtype) for info, dtype in zip(infos, dtypes, strict=True)]
    console.check(
        len(files) == len(infos),
        "input_files.size() == method->inputs_size()",
        "Please check the number of given input binary files",
    )
    blobs = []
    for name in files:
        host = fs.host(name)
        try:
            blobs.append(host.read_bytes() if host is not None else None)
        except OSError:
            blobs.append(None)
        console.check(blobs[-1] is not None, "input_file.is_open()", f"cannot open {name}")
    tensors = []
    for blob, info, dtype in zip(blobs, infos, dtypes, strict=True):
        console.check(
            len(blob) == info.nbytes(),
            "input_data_reader.nbytes(input_index) == tensor_meta->nbytes()",
            "Given inputs size is invalid",
        )
        raw = (
            torch.frombuffer(bytearray(blob), dtype=torch.uint8)
            if blob
            else torch.empty(0, dtype=torch.uint8)  # frombuffer refuses an empty buffer
        )
        tensors.append(raw.view(dtype).reshape(info.sizes()))
    return tensors


def _output_bytes(console: _Console, index: int, value: Any) -> bytes:
    import torch

    console.check(
        isinstance(value, torch.Tensor),
        "outputs[output_index].isTensor()",
        f"output {index} is a {type(value).__name__}, not a tensor",
    )
    return value.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _run(
    console: _Console,
    fs: _DeviceFs,
    args: Sequence[str],
    vendor_lib: bool,
    programs: ProgramCache,
    cancelled: Callable[[], bool],
    noise: Fault | None = None,
) -> None:
    """The runner's main(); returns on success, raises _RunnerExit otherwise."""
    if not vendor_lib:
        log.info("virtual runner: no libenn_public_api_cpp.so on this board, SIGSEGV")
        raise _RunnerExit(sig=signal.SIGSEGV)
    init_start = time.perf_counter()
    try:
        from executorch.runtime import Runtime

        Runtime.get()
    except ImportError as error:
        console.log("E", f"ExecuTorch host runtime unavailable: {error}")
        raise _RunnerExit(exit_code=1) from error
    init_ms = _ms(time.perf_counter() - init_start)

    try:
        flags, extra, want_help = _parse_flags(args)
    except _FlagError as error:
        console.stderr += f"ERROR: {error}\n".encode()
        raise _RunnerExit(exit_code=1) from error
    if want_help:
        console.stdout += _usage().encode()
        raise _RunnerExit(exit_code=1)
    if extra:
        console.log("E", "Extra commandline args: " + " ".join(extra))
        raise _RunnerExit(exit_code=1)
    console.check(flags["num_executions"] >= 1, "FLAGS_num_executions >= 1", "nothing to run")
    console.check(flags["warm_up"] >= 0, "FLAGS_warm_up >= 0", "negative warm-up count")

    load_start = time.perf_counter()
    model = flags["model"]
    model_host = fs.host(model)
    try:
        if model_host is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
        program, cached = programs.load(model_host)
    except (OSError, RuntimeError) as error:
        # strerror, not str(): the message must not reveal the host path.
        reason = error.strerror if isinstance(error, OSError) else str(error)
        console.log("E", f"Failed to parse model file {model}: {reason}")
        raise _RunnerExit(exit_code=1) from error
    console.log("I", f"Model file {model} is loaded." + (" (virtual: cached)" if cached else ""))
    console.check(
        METHOD_NAME in program.method_names,
        "method_name_result.ok()",
        f"Program has no method {METHOD_NAME}",
    )
    try:
        method = program.load_method(METHOD_NAME)
    except RuntimeError as error:
        console.fail("method.ok()", f"Loading of method {METHOD_NAME} failed: {error}")
    load_ms = _ms(time.perf_counter() - load_start)
    console.log("I", f"Using method {METHOD_NAME}")

    inputs = _read_inputs(console, fs, flags["input"].split(), method.metadata)

    def execute() -> tuple[float, Sequence[Any]]:
        if cancelled():
            console.log("E", "virtual runner: the client went away, stopping")
            raise _RunnerExit(sig=signal.SIGTERM)
        start = time.perf_counter()
        try:
            outputs = method.execute(inputs)
        except RuntimeError as error:
            console.fail(
                "status == Error::Ok",
                f"Execution of method {METHOD_NAME} failed: {error}",
            )
        return _ms(time.perf_counter() - start), outputs

    console.log("I", f"Perform {flags['warm_up']} inference for warming up")
    for _ in range(flags["warm_up"]):
        execute()
    console.log("I", "Start inference.")
    times = []
    for _ in range(flags["num_executions"]):
        elapsed, outputs = execute()
        times.append(elapsed)
    first = times[0]
    avg = sum(times[1:]) / (len(times) - 1) if len(times) > 1 else first
    console.stderr += b"%d inference took %f ms, avg %f ms\n" % (len(times), sum(times), avg)

    if noise is not None:  # hil fault injection (`noise`): outputs as a wrong kernel leaves them
        from hil.virtual.noise import add_noise

        outputs = add_noise(outputs, noise)
    if flags["output_path"]:
        out_dir = fs.host(flags["output_path"])
        no_folder = f"Directory or have no visit permission: {flags['output_path']}"
        console.check(out_dir is not None and out_dir.is_dir(), "fout.is_open()", no_folder)
        for index, value in enumerate(outputs):
            data = _output_bytes(console, index, value)
            target = posixpath.join(flags["output_path"], f"output_{index}.bin")
            console.check(fs.write(target, data), "fout.is_open()", no_folder)

    if flags["dump_statistics"]:
        stats = {"init": init_ms, "load": load_ms, "1st": first, "avg": avg}
        text = "".join(f"{key}: {value:f}\n" for key, value in stats.items())
        console.check(
            fs.write("statistics.txt", text.encode()),
            "stats.is_open()",
            "cannot write statistics.txt in the current folder",
        )


def execute_request(
    argv: Sequence[str],
    cwd: str,
    *,
    fs_root: Path,
    vendor_lib: bool = True,
    programs: ProgramCache | None = None,
    cancelled: Callable[[], bool] | None = None,
    noise: Fault | None = None,
) -> RunnerResult:
    """Run ``enn_executor_runner`` once, as the virtual board does.

    ``argv`` excludes argv[0]; ``cwd`` is the device folder the runner was started in.
    ``cancelled`` is polled before each execution: once it says True the run stops and
    the result reports SIGTERM (the client is gone, nobody reads it).
    """
    console = _Console()
    console.stderr += BANNER.encode() + b"\n"
    exit_code: int | None = 0
    sig: int | None = None
    try:
        _run(
            console,
            _DeviceFs(fs_root, cwd),
            argv,
            vendor_lib,
            programs if programs is not None else ProgramCache(),
            cancelled or (lambda: False),
            noise,
        )
    except _RunnerExit as stop:
        exit_code, sig = stop.exit_code, stop.sig
    return RunnerResult(bytes(console.stdout), bytes(console.stderr), exit_code, sig)


# ------------------------------------------------------------------------ the server


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed mid-message")
        data += chunk
    return bytes(data)


def _peer_closed(conn: socket.socket) -> bool:
    """True once the runner front has hung up (killed, or gave up)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class WarmExecutor:
    """Serves runner-front requests on a unix socket with a pre-imported ExecuTorch runtime.

    ``fs_root`` is the host folder the board's sandbox sees as ``/``; ``socket_path`` the host
    path of the socket (bound into the sandbox at :data:`DEVICE_SOCKET_PATH`);
    ``vendor_lib=False`` simulates a board without ``libenn_public_api_cpp.so``. Runs are
    serialised (one runner at a time, like one NPU).
    """

    def __init__(
        self,
        fs_root: Path,
        socket_path: Path,
        vendor_lib: bool = True,
        hooks: ExecutorHooks | None = None,
    ) -> None:
        self.fs_root = Path(fs_root)
        self.socket_path = Path(socket_path)
        self.vendor_lib = vendor_lib
        self.hooks = hooks
        self._warm = threading.Event()
        self._run_lock = threading.Lock()
        self._programs = ProgramCache()
        self._server: socketserver.ThreadingUnixStreamServer | None = None

    def start(self) -> None:
        """Bind the socket and return; the runtime warms up and requests are served in
        background threads (requests arriving during warm-up wait for it)."""
        if self._server is not None:
            return
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        self._server = _Server(str(self.socket_path), self)
        threading.Thread(target=self._warm_up, name="hil-executor-warm", daemon=True).start()
        threading.Thread(target=self._server.serve_forever, name="hil-executor-serve", daemon=True).start()
        log.info("virtual executor listening on %s (fs_root %s)", self.socket_path, self.fs_root)

    def stop(self) -> None:
        """Stop serving and remove the socket. A run in progress finishes unobserved."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        self.socket_path.unlink(missing_ok=True)
        log.info("virtual executor on %s stopped", self.socket_path)

    def wait_warm(self, timeout: float | None = None) -> bool:
        """Wait until warm-up finished (successfully or not); False on timeout."""
        return self._warm.wait(timeout)

    def execute(
        self, argv: Sequence[str], cwd: str, cancelled: Callable[[], bool] | None = None,
        noise: Fault | None = None,
    ) -> RunnerResult:
        """One runner exec (argv without argv[0]), after warm-up, one at a time."""
        self._warm.wait()
        with self._run_lock:
            return execute_request(
                argv,
                cwd,
                fs_root=self.fs_root,
                vendor_lib=self.vendor_lib,
                programs=self._programs,
                cancelled=cancelled,
                noise=noise,
            )

    def __enter__(self) -> WarmExecutor:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _warm_up(self) -> None:
        start = time.perf_counter()
        try:
            from executorch.runtime import Runtime

            Runtime.get()
            try:
                importlib.import_module("executorch.kernels.quantized")
            except ImportError:
                log.info("executorch.kernels.quantized not available; quantized ops may fail")
            log.info("virtual executor warm in %.1f s", time.perf_counter() - start)
        except ImportError:
            log.exception("virtual executor: executorch.runtime does not import")
        finally:
            self._warm.set()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(_REQUEST_READ_TIMEOUT_S)
        try:
            (size,) = _FRAME.unpack(_recv_exact(conn, _FRAME.size))
            if size > _MAX_REQUEST_BYTES:
                raise ValueError(f"request of {size} bytes")
            request = json.loads(_recv_exact(conn, size))
            argv, cwd, pid = request["argv"], request["cwd"], request.get("pid")
            if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
                raise ValueError("argv is not a list of strings")
            if not isinstance(cwd, str):
                raise ValueError("cwd is not a string")
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.warning("virtual executor: bad request: %s", error)
            return
        conn.settimeout(None)
        log.debug("runner pid %s in %s: %s", pid, cwd, argv)
        faults = self.hooks.runner_started(pid, cwd) if self.hooks is not None else []
        kinds = {fault.kind: fault for fault in faults}
        if kinds.keys() & _STALLING_FAULTS:
            _wait_for_hangup(conn)
            return
        if "crash" in kinds:
            result = _crashed(kinds["crash"].signal)
        else:
            result = self.execute(argv, cwd, cancelled=lambda: _peer_closed(conn),
                                  noise=kinds.get("noise"))
            if kinds.keys() & {"truncate-output", "missing-output"}:
                _damage_outputs(self.fs_root, cwd, argv, truncate="truncate-output" in kinds)
        if self.hooks is not None:
            self.hooks.runner_finished(pid, result.shell_status)
        header = _RESPONSE_HEADER.pack(
            -1 if result.exit_code is None else result.exit_code,
            result.signal or 0,
            len(result.stdout),
            len(result.stderr),
        )
        try:
            conn.sendall(header + result.stdout + result.stderr)
        except OSError as error:
            log.info("runner pid %s went away before its result (%s)", pid, error)
            return
        log.debug("runner pid %s: status %d", pid, result.shell_status)


class ExecutorHooks(Protocol):
    """What the board process learns of runner execs, and the faults it injects into them."""

    def runner_started(self, pid: int | None, cwd: str) -> list[Fault]:
        """A runner exec arrives; returns the faults that fire on it."""
        ...

    def runner_finished(self, pid: int | None, status: int) -> None:
        """The runner ended with shell status `status`."""
        ...


_STALLING_FAULTS = {"hang", "drop", "reboot"}
"""Faults after which the runner never answers: it hangs until killed (a drop or a
reboot kills it from the board's side)."""
_HANG_LIMIT_S = 3600.0


def _wait_for_hangup(conn: socket.socket) -> None:
    """A hung runner: nothing until the front is killed (or an hour passed)."""
    deadline = time.monotonic() + _HANG_LIMIT_S
    while not _peer_closed(conn) and time.monotonic() < deadline:
        time.sleep(0.05)


def _crashed(sig: int) -> RunnerResult:
    """A runner that died by `sig` right after starting."""
    console = _Console()
    console.stderr += BANNER.encode() + b"\n"
    console.log("F", f"hil fault injection: runner killed by signal {sig}")
    return RunnerResult(bytes(console.stdout), bytes(console.stderr), None, sig)


def _damage_outputs(fs_root: Path, cwd: str, argv: Sequence[str], truncate: bool) -> None:
    """Cut the written `output_<i>.bin` files to half (`truncate`) or remove them."""
    try:
        flags, _extra, _help = _parse_flags(argv)
    except _FlagError:
        return
    folder = _DeviceFs(fs_root, cwd).host(flags["output_path"]) if flags["output_path"] else None
    if folder is None or not folder.is_dir():
        return
    for path in folder.glob("output_*.bin"):
        if truncate:
            os.truncate(path, path.stat().st_size // 2)
        else:
            path.unlink()


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, executor: WarmExecutor) -> None:
        self.executor = executor
        super().__init__(path, _Handler)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.server.executor._serve(self.request)
