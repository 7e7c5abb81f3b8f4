"""The virtual board's `enn_executor_runner` service: a warm ExecuTorch host runtime behind a
unix socket.

On a real board `enn_executor_runner` is a C++ binary. On the virtual board hil pushes the
stdlib-only runner front (`runner_front.py`) under that name; the front forwards its argv and
cwd over a unix socket to the `WarmExecutor` living in the board process, which imported
`executorch.runtime` once (without the exporter: `host_runtime.py`), so a runner exec costs
milliseconds like the real one. The runner itself — upstream's `main()` step by step, under
the board's runner profile — is `hil/virtual/runner.py`; this module serves it and applies the
board's runner faults. The wire protocol is documented in `runner_front.py`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import math
import os
import random
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hil.runner.profiles import PROFILES, RunnerProfile
from hil.virtual import gflags
from hil.virtual.device import VENDOR_LIB_PATH
from hil.virtual.host_runtime import import_runtime
from hil.virtual.hostile import flood
from hil.virtual.offhost import OffHost
from hil.virtual.program_cache import ProgramCache
from hil.virtual.runner import (
    DeviceFs,
    Emit,
    RunnerFaults,
    RunnerResult,
    execute_request,
)
from hil.virtual.runner_build import build_faults

if TYPE_CHECKING:
    from hil.virtual.faults import Fault

log = logging.getLogger(__name__)

DEVICE_SOCKET_PATH = "/dev/socket/hil-enn-executor"
"""Where the runner front looks for the executor inside the board's sandbox."""

# The wire protocol, documented in runner_front.py (which cannot import this module).
_FRAME = struct.Struct("!I")
_CHUNK = struct.Struct("!BI")
"""A response frame: kind (1 stdout, 2 stderr, 0 end), length; then the data."""
_END = struct.Struct("!iiQ")
"""The end frame's data: exit code (-1 when killed by a signal), signal (0), peak RSS KiB (0)."""
_MAX_REQUEST_BYTES = 1 << 20
_REQUEST_READ_TIMEOUT_S = 30.0


# ------------------------------------------------------------------------ the server


def _peer_pid(conn: socket.socket) -> int:
    """The connected runner front's pid as this process's namespace numbers it (SO_PEERCRED):
    the pid the front sends is the board's own, inside the board's pid namespace."""
    pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                         struct.calcsize("3i")))
    return pid


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

    `fs_root` is the host folder the board's sandbox sees as `/`; `socket_path` the host
    path of the socket (bound into the sandbox at `DEVICE_SOCKET_PATH`); `profile` the runner
    binary imitated (what it refuses to load); `vendor_lib=False` simulates a board without
    `libenn_public_api_cpp.so`; `device_time` (`measured` or ms) turns the off-host
    measuring mode on (`offhost.py`). Runs are serialised (one runner at a time, like one NPU).
    """

    def __init__(
        self,
        fs_root: Path,
        socket_path: Path,
        vendor_lib: bool = True,
        hooks: ExecutorHooks | None = None,
        profile: RunnerProfile = PROFILES["hil"],
        device_time: str | None = None,
    ) -> None:
        self.fs_root = Path(fs_root)
        self.socket_path = Path(socket_path)
        self.vendor_lib = vendor_lib
        self.profile = profile
        self.hooks = hooks
        self._warm = threading.Event()
        self._run_lock = threading.Lock()
        self.offhost = OffHost(device_time) if device_time else None
        self._programs = ProgramCache(by_content=self.offhost is not None)
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._generators: dict[tuple[str, int], random.Random] = {}
        """The seeded draws of `jitter` and of `miscompute` with `p`, one generator per kind
        and seed for the board's life (across reboots: the executor lives with the board)."""
        self._draws = threading.Lock()

    def _vendor_lib_present(self) -> bool:
        """The board's filesystem still has ENN's library (a vendor partition can lose it);
        asked only of a board's executor (with hooks), whose filesystem the board laid out."""
        return (self.fs_root / VENDOR_LIB_PATH.lstrip("/")).exists()

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
        self,
        argv: Sequence[str],
        cwd: str,
        cancelled: Callable[[], bool] | None = None,
        faults: RunnerFaults | None = None,
        emit: Emit | None = None,
    ) -> RunnerResult:
        """One runner exec (argv without argv[0]), after warm-up, one at a time, with its
        peak RSS (`_peak_rss`); `emit` gets its output as it is written."""
        self._warm.wait()
        with self._run_lock:
            _reset_peak_rss()
            result = execute_request(
                argv,
                cwd,
                fs_root=self.fs_root,
                profile=self.profile,
                vendor_lib=self.vendor_lib and (self.hooks is None or self._vendor_lib_present()),
                programs=self._programs,
                cancelled=cancelled,
                faults=faults,
                emit=emit,
                offhost=self.offhost,
            )
            return dataclasses.replace(result, peak_rss_kib=_peak_rss())

    def __enter__(self) -> WarmExecutor:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _warm_up(self) -> None:
        start = time.perf_counter()
        try:
            import_runtime().get()
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
            build = request.get("build") or []
            if not (isinstance(build, list) and all(isinstance(b, str) for b in build)):
                raise ValueError("build is not a list of strings")
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.warning("virtual executor: bad request: %s", error)
            return
        conn.settimeout(None)
        log.debug("runner pid %s in %s: %s", pid, cwd, argv)
        log.info("runner pid %s is host pid %d", pid, _peer_pid(conn))
        faults = self.hooks.runner_started(pid, cwd) if self.hooks is not None else []
        faults += build_faults(build)  # the runner build's own (runner_build.py)
        faults = [f for f in faults if f.kind != "miscompute" or self._fires(f)]
        kinds = {fault.kind: fault for fault in faults}
        if kinds.keys() & _STALLING_FAULTS:
            _wait_for_hangup(conn)
            return
        slows = [f for f in faults if f.kind == "slow"]
        runner_faults = RunnerFaults(
            crash_signal=kinds["crash"].signal if "crash" in kinds else None,
            outputs_unwritable="storage-full" in kinds,
            miscompute=tuple((f.op, f.rel) for f in faults if f.kind == "miscompute"),
            noise=(kinds["noise"].rel, kinds["noise"].seed) if "noise" in kinds else None,
            slow_s=sum(f.delay for f in slows),
            slow_factor=math.prod(f.factor for f in slows),
            jitter=self._jitter(kinds["jitter"]) if "jitter" in kinds else None,
        )
        gone: list[OSError] = []

        def emit(kind: int, data: bytes) -> None:
            """The output as the runner writes it (a killed front has shown its progress)."""
            if not gone:
                try:
                    conn.sendall(_CHUNK.pack(kind, len(data)) + data)
                except OSError as error:
                    gone.append(error)

        if "flood" in kinds:  # a hostile runner: output until nobody takes it (hostile.py)
            sent = flood(emit, kinds["flood"].size, lambda: bool(gone) or _peer_closed(conn))
            log.info("runner pid %s: flood of %d bytes", pid, sent)
        result = self.execute(argv, cwd, cancelled=lambda: bool(gone) or _peer_closed(conn),
                              faults=runner_faults, emit=emit)
        if kinds.keys() & {"truncate-output", "missing-output"}:
            _damage_outputs(self.fs_root, cwd, argv, truncate="truncate-output" in kinds)
        if self.hooks is not None:
            self.hooks.runner_finished(pid, result.shell_status)
        end = _END.pack(-1 if result.exit_code is None else result.exit_code, result.signal or 0,
                        result.peak_rss_kib or 0)
        try:
            if gone:
                raise gone[0]
            conn.sendall(_CHUNK.pack(0, len(end)) + end)
        except OSError as error:
            log.info("runner pid %s went away before its result (%s)", pid, error)
            return
        log.debug("runner pid %s: status %d", pid, result.shell_status)


    def _generator(self, kind: str, seed: int) -> random.Random:
        """The board's generator of `kind` seeded with `seed` (made at its first use)."""
        return self._generators.setdefault((kind, seed), random.Random(f"{kind}:{seed}"))

    def _fires(self, fault: Fault) -> bool:
        """Whether a `miscompute` fault with a share `p` fires on this exec (seeded draw)."""
        if fault.p >= 1.0:
            return True
        with self._draws:
            return self._generator(fault.kind, fault.seed).random() < fault.p

    def _jitter(self, fault: Fault) -> Callable[[], float]:
        """The draw of one inference's extra time, relative to its own (`jitter`)."""
        generator = self._generator(fault.kind, fault.seed)

        def draw() -> float:
            with self._draws:
                return fault.rel * abs(generator.gauss(0.0, 1.0))

        return draw


def _reset_peak_rss() -> None:
    """Start a new peak: writing 5 to clear_refs resets the process's VmHWM to its current
    RSS (Linux >= 4.0, proc(5))."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError as error:
        log.debug("peak RSS not reset: %s", error)


def _peak_rss() -> int | None:
    """The board process's peak RSS (KiB) since `_reset_peak_rss`: the virtual runner runs
    the program here, on the host runtime that the board imported once, so this is the
    runner's peak as a process would have it (the runtime included), not the front's."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


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


def _damage_outputs(fs_root: Path, cwd: str, argv: Sequence[str], truncate: bool) -> None:
    """Cut the written `output_<i>.bin` files to half (`truncate`) or remove them."""
    try:
        flags = gflags.parse(argv).values
    except gflags.FlagError:
        return
    folder = DeviceFs(fs_root, cwd).host(flags["output_path"]) if flags["output_path"] else None
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
