"""The virtual board's `enn_executor_runner`: upstream's `main()`, step by step, on ExecuTorch's
host runtime.

Each step below is the step of `examples/samsung/executor_runner/enn_executor_runner.cpp` with
the same log line (`hil/runner/contract.py` holds the lines and the order of work), the same
exit code and the same files written. What differs, and why:

- There is no NPU: ENN initialisation is getting ExecuTorch's host runtime, and a program with
  an ENN delegate does not load ("Backend EnnBackend is not available.").
- The runner enforces its profile (`hil/runner/profiles.py`): a program with a delegate or a
  kernel the profile's binary does not link fails in `load_method` exactly as the real binary
  does (the runtime's reason, then "Loading of method ... failed with status 0x.."), although
  the host runtime underneath has every kernel.
- stderr starts with one banner line saying this runner is VIRTUAL.
- Programs are cached by (host path, size, mtime_ns) and loaded from bytes (never mmap'd).
- In the off-host measuring mode (`offhost.py`) a program+inputs pair seen before is not run
  again: its outputs are replayed and each execution's device time is slept.
- A `miscompute` fault perturbs the outputs of a program that executes its op (the op names
  are read from the program: `program_ops.py`) before they are written; a `noise` fault adds
  seeded Gaussian noise to them (`noise.py`), as a wrong kernel leaves them. A `slow,on=exec`
  fault lengthens every inference (by `delay`, and by `factor` times its own time), a
  `jitter` fault by a seeded random share of it.

Device paths are relative to the device cwd and map to `fs_root/<path>`; a path whose host
location (symlinks resolved) leaves `fs_root` is a missing file.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from hil.runner import contract
from hil.runner.contract import check_failed_message, log_line, statistics_text, timing_line
from hil.runner.profiles import PROFILES, RunnerProfile, refusal
from hil.runner.pte import PteError
from hil.virtual import gflags
from hil.virtual.noise import add_noise
from hil.virtual.offhost import InputMeta, OffHost, Replay, digest
from hil.virtual.program_cache import LoadedProgram, ProgramCache

log = logging.getLogger(__name__)

BANNER = "enn_executor_runner (hil VIRTUAL board: ExecuTorch host runtime, no NPU)"
"""First line of every virtual runner's stderr."""

# ExecuTorch ScalarType codes (runtime/core/portable_type/scalar_type.h) -> torch dtype names.
_SCALAR_TYPES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
    7: "float64", 11: "bool", 15: "bfloat16", 27: "uint16", 28: "uint32", 29: "uint64",
}
_HEX_STATUS = "0x([0-9a-fA-F]+)"


@dataclass(frozen=True)
class RunnerResult:
    """What one runner exec produced, as the shell on the board would see it."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None = None
    """The exit code, or None when the runner died by a signal."""
    signal: int | None = None
    """The signal that killed the runner, or None when it exited."""
    peak_rss_kib: int | None = None
    """The peak RSS of the exec, when the executor measured it (`executor.py`)."""

    @property
    def shell_status(self) -> int:
        """`$?` in the board's shell: the exit code, or 128 + the signal number."""
        return self.exit_code if self.signal is None else 128 + self.signal


@dataclass(frozen=True)
class RunnerFaults:
    """What the board injects into one runner exec (`hil/virtual/faults.py`)."""

    crash_signal: int | None = None
    """Die by this signal once the 1st inference starts (a crash while executing)."""
    outputs_unwritable: bool = False
    """The output folder's storage is full: writing an output fails."""
    miscompute: tuple[tuple[str, float], ...] = ()
    """(op, rel) per `miscompute` fault: a program executing `op` (any program when empty)
    returns floating outputs + rel x their RMS (`perturb`)."""
    noise: tuple[float, int] | None = None
    """(rel, seed) of a `noise` fault: Gaussian noise of rel x each floating output's
    standard deviation on the outputs (`noise.py`)."""
    slow_s: float = 0.0
    """Added to every timed or untimed inference (a `slow,on=exec` fault): a slower program."""
    slow_factor: float = 1.0
    """Every inference takes this many times its own time (`slow,on=exec,factor=F`)."""
    jitter: Callable[[], float] | None = None
    """Draws the extra time of one inference, relative to its own (a `jitter` fault)."""


class _RunnerExit(Exception):
    """Ends the runner: with an exit code, or killed by a signal."""

    def __init__(self, *, exit_code: int | None = None, sig: int | None = None) -> None:
        super().__init__(exit_code, sig)
        self.exit_code = exit_code
        self.sig = sig


Emit = Callable[[int, bytes], None]
"""Where the runner's output goes as it is written: (1 stdout | 2 stderr, bytes)."""


@dataclass
class _Console:
    """The runner's stdout and stderr; log lines in ET_LOG's shape. Each write is also handed
    to `emit` at once (the real runner's stderr is unbuffered: a runner killed at its deadline
    has shown its progress)."""

    start: float = field(default_factory=time.perf_counter)
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    emit: Emit | None = None

    def out(self, data: bytes) -> None:
        self.stdout += data
        if self.emit is not None:
            self.emit(1, data)

    def err(self, data: bytes) -> None:
        self.stderr += data
        if self.emit is not None:
            self.emit(2, data)

    def log(self, level: str, where: tuple[int, str], *args: object,
            source: str = contract.RUNNER_SOURCE) -> None:
        line, message = where
        text = message % args if args else message
        elapsed = time.perf_counter() - self.start
        self.err((log_line(level, elapsed, line, text, source) + "\n").encode())

    def check(self, ok: bool, where: tuple[int, str], condition: str, *args: object,
              function: str = "main") -> None:
        """ET_CHECK_MSG: a fatal line and SIGABRT unless `ok`."""
        if not ok:
            self.abort(where, condition, *args, function=function)

    def abort(self, where: tuple[int, str], condition: str, *args: object,
              function: str = "main") -> NoReturn:
        """A failed ET_CHECK_MSG (ET_CHECK when `where` has no message): SIGABRT."""
        line, message = where
        text = check_failed_message(condition, (message % args if args else message) or None, function)
        self.log("F", (line, text))
        raise _RunnerExit(sig=signal.SIGABRT)


class DeviceFs:
    """Maps the runner's device paths into `fs_root`."""

    def __init__(self, fs_root: Path, cwd: str) -> None:
        self._root = fs_root.resolve()
        self._cwd = posixpath.join("/", cwd)

    def host(self, device_path: str) -> Path | None:
        """The host path for `device_path`, or None when it would leave `fs_root`."""
        absolute = posixpath.normpath(posixpath.join(self._cwd, device_path))
        host = (self._root / absolute.lstrip("/")).resolve()
        return host if host.is_relative_to(self._root) else None

    def write(self, device_path: str, data: bytes) -> bool:
        """Write a file; False when it cannot be (missing folder, outside `fs_root`...)."""
        host = self.host(device_path)
        if host is None:
            return False
        try:
            host.write_bytes(data)
        except OSError:
            return False
        return True


def _ms(seconds: float) -> float:
    """Milliseconds from whole microseconds, as the C++ runner computes them."""
    return int(seconds * 1e6) / 1000.0


def perturb(value: Any, rel: float) -> Any:
    """`value` + rel x RMS(value) x (+1, -1, +1, ...) in flat order: an error whose RMS is
    `rel` times the output's (SQNR = -20 log10(rel) dB), deterministic; non-float tensors
    are returned unchanged."""
    import torch

    if not value.is_floating_point() or value.numel() == 0:
        return value
    flat = value.detach().to(torch.float64).reshape(-1)
    rms = float(flat.pow(2).mean().sqrt()) or 1.0
    signs = 1.0 - 2.0 * (torch.arange(flat.numel()) % 2).to(torch.float64)
    return (flat + rel * rms * signs).to(value.dtype).reshape(value.shape)


def _miscomputed(faults: RunnerFaults, ops: frozenset[str]) -> float | None:
    """The relative error a `miscompute` fault adds to this program's outputs, if any."""
    hits = [rel for op, rel in faults.miscompute if not op or op in ops]
    return max(hits) if hits else None


def _dtype(code: int) -> Any:
    import torch

    name = _SCALAR_TYPES.get(code)
    return getattr(torch, name) if name else None


def _status(error: Exception, default: int) -> int:
    """The ExecuTorch status code in a host-runtime error message (`... error 0x12`)."""
    found = re.search(_HEX_STATUS, str(error))
    return int(found.group(1), 16) if found else default


def _input_metas(meta: Any) -> tuple[InputMeta, ...]:
    """What the runner checks of the method's inputs (its metadata)."""
    infos = [meta.input_tensor_meta(i) for i in range(meta.num_inputs())]
    return tuple(InputMeta(info.nbytes(), tuple(info.sizes()), _dtype(info.dtype())) for info in infos)


def _inputs(
    console: _Console, fs: DeviceFs, flag: str, metas: Sequence[InputMeta]
) -> tuple[list[Any], bytes]:
    """Step 8: input tensors from raw files, or zero-filled without `--input`; and their
    content key (`offhost.digest`)."""
    import torch

    if not flag:
        console.log("I", contract.DEFAULT_INPUTS)
        return [torch.zeros(m.sizes, dtype=m.dtype) for m in metas], b""
    files = flag.split()
    console.check(len(files) == len(metas), contract.INPUT_COUNT,
                  "input_files.size() == method->inputs_size()")
    blobs = []
    for name in files:
        host = fs.host(name)
        try:
            blobs.append(host.read_bytes() if host is not None else None)
        except OSError:
            blobs.append(None)
        if blobs[-1] is None:
            console.abort((contract.INPUT_OPEN[0], ""), contract.INPUT_OPEN[1], function="read")
    tensors = []
    for blob, meta in zip(blobs, metas, strict=True):
        console.check(len(blob) == meta.nbytes, contract.INPUT_SIZE,
                      "input_data_reader.nbytes(input_index) == tensor_meta->nbytes()")
        raw = (torch.frombuffer(bytearray(blob), dtype=torch.uint8) if blob
               else torch.empty(0, dtype=torch.uint8))  # frombuffer refuses an empty buffer
        tensors.append(raw.view(meta.dtype).reshape(meta.sizes))
    return tensors, digest(b"".join(len(blob).to_bytes(8, "little") + blob for blob in blobs))


def _load_method(console: _Console, loaded: LoadedProgram, profile: RunnerProfile) -> Any:
    """Step 7: the runtime's reasons first (method.cpp), then the runner's fatal check."""
    info = loaded.info
    refused = refusal(profile, info, virtual=True)
    status = None
    if refused is not None and refused.backends:
        console.log("E", contract.BACKEND_NOT_REGISTERED, refused.backends[0],
                    source=contract.METHOD_SOURCE)
        status = 0x20  # NotFound
    elif refused is not None and refused.unavailable:
        console.log("E", contract.BACKEND_NOT_AVAILABLE, refused.unavailable[0],
                    source=contract.METHOD_SOURCE)
        status = 0x20  # NotFound
    elif refused is not None:
        for index, name in refused.operators:
            console.log("E", contract.MISSING_OPERATOR, index, name, source=contract.METHOD_SOURCE)
        console.log("E", contract.OPERATORS_MISSING, len(refused.operators),
                    source=contract.METHOD_SOURCE)
        status = 0x14  # OperatorMissing
    else:
        try:
            return loaded.program.load_method(info.method)
        except RuntimeError as error:
            console.log("E", (0, f"host runtime: {error}"), source=contract.METHOD_SOURCE)
            status = _status(error, 0x01)
    console.abort(contract.LOAD_FAILED, "method.ok()", info.method, status)


def _run(
    console: _Console,
    fs: DeviceFs,
    args: Sequence[str],
    profile: RunnerProfile,
    vendor_lib: bool,
    programs: ProgramCache,
    cancelled: Callable[[], bool],
    faults: RunnerFaults,
    offhost: OffHost | None = None,
) -> None:
    """The runner's main(); returns on success, raises _RunnerExit otherwise."""
    # 1. ENN init (here: the host runtime). No vendor library: ENN's loader says so twice
    # (its ET_LOG line, then its own log line with dlerror()), then the real runner
    # segfaults calling the EnnInitialize it did not find.
    if not vendor_lib:
        log.info("virtual runner: no libenn_public_api_cpp.so on this board, SIGSEGV")
        console.log("E", contract.LIB_LOAD_FAILED, source=contract.ENN_API_SOURCE)
        console.err((contract.enn_log_line(
            "ERROR", f"{contract.ENN_LIB_NOT_LOADED} dlopen failed: library "
            '"libenn_public_api_cpp.so" not found') + "\n").encode())
        raise _RunnerExit(sig=signal.SIGSEGV)
    init_start = time.perf_counter()
    try:
        from executorch.runtime import Runtime

        Runtime.get()
    except ImportError as error:
        console.log("E", (0, f"ExecuTorch host runtime unavailable: {error}"))
        console.abort(contract.ENN_INIT_FAILED, "ret == ENN_RET_SUCCESS", function="exynos_npu_init")
    init_ms = _ms(time.perf_counter() - init_start)

    # 2. flags
    try:
        parsed = gflags.parse(args)
    except gflags.FlagError as error:
        console.err(f"ERROR: {error}\n".encode())
        raise _RunnerExit(exit_code=1) from error
    if parsed.want_help:
        console.out(gflags.usage().encode())
        raise _RunnerExit(exit_code=1)
    if parsed.extra:
        console.log("E", (contract.EXTRA_ARGS[0], contract.EXTRA_ARGS[1] + " " + " ".join(parsed.extra)))
        raise _RunnerExit(exit_code=1)
    flags = parsed.values

    # 3. FileDataLoader::from(--model); 4. Program::load
    model = flags["model"]
    model_host = fs.host(model)
    if model_host is None or not model_host.is_file():
        console.log("E", (110, f"Failed to open {model}: {os.strerror(errno.ENOENT)} ({errno.ENOENT})"),
                    source="file_data_loader.cpp")
        console.abort(contract.LOADER_FAILED, "loader.ok()", 0x22)
    try:
        loaded, cached = programs.load(model_host)
    except OSError as error:
        console.log("E", (110, f"Failed to open {model}: {error.strerror} ({error.errno})"),
                    source="file_data_loader.cpp")
        console.abort(contract.LOADER_FAILED, "loader.ok()", 0x22)
    except (PteError, RuntimeError) as error:
        log.info("virtual runner: %s does not parse: %s", model, error)
        console.log("E", contract.PARSE_FAILED, model)
        raise _RunnerExit(exit_code=1) from error
    console.log("I", contract.MODEL_LOADED, model)
    if cached:
        log.debug("virtual runner: %s from the program cache", model)

    # 5. method 0; 6. planned buffers; 7. load_method
    info = loaded.info
    console.log("I", contract.USING_METHOD, info.method)
    for index, size in enumerate(info.planned_buffers):
        console.log("I", contract.PLANNED_BUFFER, index, size)
    load_start = time.perf_counter()
    known = offhost.program(loaded.digest) if offhost is not None else None
    method = None
    if known is None:
        method = _load_method(console, loaded, profile)
        metas = _input_metas(method.metadata)
    else:  # the off-host mode, a program loaded before: its load time, slept
        metas = known.inputs
        time.sleep(known.load_ms / 1000)
    load_ms = _ms(time.perf_counter() - load_start)
    if offhost is not None and known is None:
        offhost.learn_program(loaded.digest, metas, load_ms)
    console.log("I", contract.METHOD_LOADED)

    # 8. inputs
    inputs, inputs_key = _inputs(console, fs, flags["input"], metas)
    replay: Replay | None = offhost.replay(loaded.digest, inputs_key) if offhost is not None else None
    if replay is None and method is None:  # a known program, new inputs: for real
        method = _load_method(console, loaded, profile)
    executions_ms: list[float] = []

    status = 0
    outputs: Sequence[Any] = ()

    def execute() -> float:
        nonlocal status, outputs
        if cancelled():
            console.log("E", (0, "virtual runner: the client went away, stopping"))
            raise _RunnerExit(sig=signal.SIGTERM)
        start = time.perf_counter()
        if replay is not None:  # the off-host mode's modelled device time: a sleep, no CPU
            time.sleep(offhost.execution_ms(replay) / 1000)
            outputs, status = replay.outputs, replay.status
        else:
            try:
                outputs = method.execute(inputs)
                status = 0
            except RuntimeError as error:
                status = _status(error, 0x01)
            executions_ms.append(_ms(time.perf_counter() - start))
            if offhost is not None:  # a fixed device time holds for a real execution too
                time.sleep(max(0.0, offhost.fixed_ms() - executions_ms[-1]) / 1000)
        own = time.perf_counter() - start
        extra = own * (faults.slow_factor - 1.0) + (own * faults.jitter() if faults.jitter else 0.0)
        if faults.slow_s or extra > 0:
            time.sleep(faults.slow_s + extra)
        return _ms(time.perf_counter() - start)

    # 9. warm-ups (their status is overwritten by the next run)
    console.log("I", contract.WARM_UP, flags["warm_up"])
    for _ in range(flags["warm_up"]):
        execute()
    # 10. the 1st run; 11. the N timed runs, one interval
    console.log("I", contract.START_FIRST)
    if faults.crash_signal is not None:
        raise _RunnerExit(sig=faults.crash_signal)
    first_ms = execute()
    console.log("I", contract.START_INFERENCE)
    runs = flags["num_executions"]
    total_ms = sum(execute() for _ in range(runs))
    if offhost is not None and replay is None:
        offhost.learn(loaded.digest, inputs_key, status, tuple(outputs), executions_ms)
    # 12. statistics.txt (written without a check: an ofstream that failed stays silent)
    if flags["dump_statistics"]:
        fs.write(contract.STATISTICS_FILE,
                 statistics_text(init_ms, load_ms, first_ms, (total_ms + first_ms) / (runs + 1)).encode())
    # 13. the timing line; 14. the last run's status
    console.log("I", (contract.TIMING[0], timing_line(runs, total_ms, total_ms / runs if runs else 0.0)))
    console.check(status == 0, contract.EXECUTION_FAILED, "status == Error::Ok", info.method, status)

    # 15. outputs: toTensor() each, written when --output_path is set
    import torch

    rel = _miscomputed(faults, loaded.ops)
    if rel is not None:
        log.info("virtual runner: miscompute fault: %s outputs perturbed by %g", model, rel)
    for index, value in enumerate(outputs):
        console.check(isinstance(value, torch.Tensor), (348, "EValue is not a Tensor."), "isTensor()",
                      function="toTensor")
        if not flags["output_path"]:
            continue
        if rel is not None:
            value = perturb(value, rel)
        if faults.noise is not None:
            value = add_noise(value, index, *faults.noise)
        data = value.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        target = posixpath.join(flags["output_path"], f"output_{index}.bin")
        written = not faults.outputs_unwritable and fs.write(target, data)
        console.check(written, contract.OUTPUT_FOLDER, "fout.is_open()", flags["output_path"],
                      function="saveOutput")


def execute_request(
    argv: Sequence[str],
    cwd: str,
    *,
    fs_root: Path,
    profile: RunnerProfile = PROFILES["hil"],
    vendor_lib: bool = True,
    programs: ProgramCache | None = None,
    cancelled: Callable[[], bool] | None = None,
    faults: RunnerFaults | None = None,
    emit: Emit | None = None,
    offhost: OffHost | None = None,
) -> RunnerResult:
    """Run `enn_executor_runner` once, as the virtual board does.

    `argv` excludes argv[0]; `cwd` is the device folder the runner was started in;
    `profile` is the runner binary being imitated. `cancelled` is polled before each
    execution: once it says True the run stops and reports SIGTERM (nobody reads it).
    `emit` gets the output as it is written (the result holds all of it as well).
    `offhost`: the off-host measuring mode's replay store (`offhost.py`), or None.
    """
    console = _Console(emit=emit)
    console.err(BANNER.encode() + b"\n")
    exit_code: int | None = 0
    sig: int | None = None
    try:
        _run(console, DeviceFs(fs_root, cwd), argv, profile, vendor_lib,
             programs if programs is not None else ProgramCache(), cancelled or (lambda: False),
             faults or RunnerFaults(), offhost)
    except _RunnerExit as stop:
        exit_code, sig = stop.exit_code, stop.sig
    return RunnerResult(bytes(console.stdout), bytes(console.stderr), exit_code, sig)
