"""The `enn_executor_runner` contract, line for line.

Read beside upstream's `examples/samsung/executor_runner/enn_executor_runner.cpp` (ExecuTorch
main 2026-08, unchanged since v1.4.1), `runtime/platform/default/posix.cpp` (log format),
`runtime/platform/assert.h` (ET_CHECK) and `runtime/core/error.h` (status codes). The virtual
runner (`hil/virtual/runner.py`) produces exactly these lines; the host (`hil/judge.py`) reads
them back to tell where a runner stopped. The runner's order of work, with what it prints:

 1. ENN init ............ F "Enn initialize failed." abort (134). No libenn_public_api_cpp.so (or
                          one that does not load): E "Lib load failed." (enn_api_implementation.cpp:68),
                          then ENN's own "[ERROR][Exynos ExecuTorch]Failed to load enn api library.
                          <dlerror>" (:47, logging.cpp's format), then SIGSEGV (139) calling the
                          missing EnnInitialize
 2. flags (gflags) ...... E "Extra commandline args: ..." exit 1; a bad flag: "ERROR: ..." exit 1
 3. FileDataLoader ...... F "FileDataLoader::from() failed: 0x22" abort (a missing model)
 4. Program::load ....... E "Failed to parse model file %s" exit 1; else I "Model file %s is loaded."
 5. method 0 by name .... I "Using method %s"
 6. planned buffers ..... I "Setting up planned buffer %zu, size %zu." per buffer
 7. load_method ......... F "Loading of method %s failed with status 0x%x" abort; else I "Method loaded."
                          (the runtime says why first: E "Backend X is not registered.",
                          E "Missing operator: [i] name"; the method allocator is a 4 MB pool)
 8. inputs .............. --input: F "Please check the number of given input binary files" (289),
                          F "Given inputs size is invalid" (302) abort; without --input zero-filled
                          buffers (F "Could not prepare inputs: 0x%x" (281) when that fails),
                          I "Input list not provided. Inputs prepared with default values set."
 9. warm-ups ............ I "Perform %d inference for warming up" (their status is overwritten)
10. 1st run, timed ...... I "Start 1st inference."
11. N runs, timed ....... I "Start inference."  (--num_executions N, one interval for all N)
12. statistics.txt ...... init, load, 1st, avg = (1st + the N runs) / (N + 1), in the CURRENT folder
13. timing line ......... I "%d inference took %f ms, avg %f ms" (N, the N runs' total, total / N)
14. status .............. of the LAST execution only: F "Execution of method %s failed with status 0x%x"
15. outputs ............. each `toTensor()`, written to --output_path/output_<i>.bin:
                          F "Directory or have no visit permission: %s" abort
16. ENN deinit .......... at exit (EnnApiDeinit, line 128): F "Enn Deinitialize failed." abort,
                          after the outputs are written: the board's, not the program's
Exit codes: 0; 1 (flags, Program::load); 134 for every failed check; 139 without the vendor lib.

ENN's runtime (backends/samsung/runtime/logging.cpp) writes its own lines to stderr beside
ET_LOG's: `[ERROR][Exynos ExecuTorch]message` (`[WARN]`, `[INFO]`, `[DEBUG]` likewise; a debug
build puts `[file.cpp:line]: ` before the message). The ERROR and WARN ones are kept with the
log (`RunnerLog.enn`) and end the failure reason.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

RUNNER_SOURCE = "enn_executor_runner.cpp"
"""The file name ET_LOG prints for the runner's own lines (`executorch:FILE:LINE]`)."""
METHOD_SOURCE = "method.cpp"
"""ExecuTorch's runtime file that explains a failed `load_method`."""

METHOD_ALLOCATOR_BYTES = 4 * 1024 * 1024
"""`static uint8_t method_allocator_pool[4 * 1024U * 1024U]`: everything `load_method` needs
for the method's metadata (values, tensor descriptions, instruction arguments, kernels,
delegate handles) comes from this pool; more fails the load."""

# Upstream's log statements: (line in enn_executor_runner.cpp of ExecuTorch main, format).
ENN_INIT_FAILED = (135, "Enn initialize failed.")
EXTRA_ARGS = (154, "Extra commandline args:")
LOADER_FAILED = (163, "FileDataLoader::from() failed: 0x%x")
PARSE_FAILED = (172, "Failed to parse model file %s")
MODEL_LOADED = (175, "Model file %s is loaded.")
NO_METHODS = (181, "Program has no methods")
USING_METHOD = (184, "Using method %s")
PLANNED_BUFFER = (231, "Setting up planned buffer %d, size %d.")
LOAD_FAILED = (257, "Loading of method %s failed with status 0x%x")
METHOD_LOADED = (262, "Method loaded.")
PREPARE_INPUTS = (281, "Could not prepare inputs: 0x%x")
INPUT_COUNT = (289, "Please check the number of given input binary files")
DEFAULT_INPUTS = (285, "Input list not provided. Inputs prepared with default values set.")
INPUT_SIZE = (302, "Given inputs size is invalid")
WARM_UP = (317, "Perform %d inference for warming up")
START_FIRST = (324, "Start 1st inference.")
START_INFERENCE = (334, "Start inference.")
TIMING = (359, "%d inference took %f ms, avg %f ms")
EXECUTION_FAILED = (365, "Execution of method %s failed with status 0x%x")
OUTPUT_FOLDER = (113, "Directory or have no visit permission: %s")
ENN_DEINIT_FAILED = (128, "Enn Deinitialize failed.")
INPUT_OPEN = (73, "input_file.is_open()")

# ENN's loader (backends/samsung/runtime/enn_api_implementation.cpp): its ET_LOG line, then its
# own ENN_LOG_ERROR line (logging.cpp), when libenn_public_api_cpp.so does not load.
ENN_API_SOURCE = "enn_api_implementation.cpp"
LIB_LOAD_FAILED = (68, "Lib load failed.")
ENN_LIB_NOT_LOADED = "Failed to load enn api library."
ENN_LOG_TAG = "[Exynos ExecuTorch]"

# What the runtime logs before `load_method` returns an error (runtime/executor/method.cpp).
BACKEND_NOT_REGISTERED = (85, "Backend %s is not registered.")
BACKEND_NOT_AVAILABLE = (90, "Backend %s is not available.")
MISSING_OPERATOR = (822, "Missing operator: [%d] %s")
OPERATORS_MISSING = (
    1128,
    "There are %d instructions don't have corresponding operator registered. See logs for details",
)

ERROR_NAMES = {
    0x00: "Ok",
    0x01: "Internal",
    0x02: "InvalidState",
    0x03: "EndOfMethod",
    0x04: "AlreadyLoaded",
    0x10: "NotSupported",
    0x11: "NotImplemented",
    0x12: "InvalidArgument",
    0x13: "InvalidType",
    0x14: "OperatorMissing",
    0x15: "RegistrationExceedingMaxKernels",
    0x16: "RegistrationAlreadyRegistered",
    0x20: "NotFound",
    0x21: "MemoryAllocationFailed",
    0x22: "AccessFailed",
    0x23: "InvalidProgram",
    0x24: "InvalidExternalData",
    0x25: "OutOfResources",
    0x30: "DelegateInvalidCompatibility",
    0x31: "DelegateMemoryAllocationFailed",
    0x32: "DelegateInvalidHandle",
}
"""`executorch::runtime::Error` codes (runtime/core/error.h)."""

STATISTICS_FILE = "statistics.txt"
STATISTICS_KEYS = ("init", "load", "1st", "avg")


class Stage(enum.IntEnum):
    """How far a runner got, by the last marker line it printed."""

    STARTED = 0
    """Nothing of the program yet: ENN init, flags or the file loader."""
    PROGRAM_LOADED = 1
    """"Model file ... is loaded.": loading the method (delegates, kernels)."""
    METHOD_LOADED = 2
    """"Method loaded.": preparing inputs and warming up."""
    FIRST_INFERENCE = 3
    """"Start 1st inference.": executing."""
    INFERENCE = 4
    """"Start inference.": the N timed runs."""
    TIMED = 5
    """The timing line: status check and outputs."""


_MARKERS = (
    (Stage.PROGRAM_LOADED, MODEL_LOADED),
    (Stage.METHOD_LOADED, METHOD_LOADED),
    (Stage.FIRST_INFERENCE, START_FIRST),
    (Stage.INFERENCE, START_INFERENCE),
)
_LOG_LINE = re.compile(
    r"^(?P<level>[DIEF]) \d{2}:\d{2}:\d{2}\.\d{6} executorch:(?P<file>[^:\]]+):(?P<line>\d+)\] "
    r"(?P<message>.*)$"
)
_TIMING_LINE = re.compile(r"(\d+) inference took ([0-9.]+) ms, avg ([0-9.]+) ms")
_STATUS = re.compile(r"\b(0x[0-9a-fA-F]+)$")
"""The status code a failed check ends with (`... failed with status 0x14`, `... failed: 0x22`)."""
_ENN_LINE = re.compile(
    r"^\[(?P<level>ERROR|WARN)\]\[Exynos ExecuTorch\](?:\[[^\]]+:\d+\]: )?(?P<message>.*)$"
)
"""ENN's own ERROR and WARN lines (logging.cpp), with a debug build's `[file:line]: ` dropped."""
_STATISTICS_LINE = re.compile(r"^\s*(init|load|1st|avg)\s*:\s*(-?[0-9.]+)\s*$", re.MULTILINE)


def enn_log_line(level: str, message: str) -> str:
    """One line of ENN's own log as logging.cpp writes it to stderr (a release build):
    `[ERROR][Exynos ExecuTorch]message`."""
    return f"[{level}]{ENN_LOG_TAG}{message}"


def log_line(level: str, seconds: float, line: int, message: str, source: str = RUNNER_SOURCE) -> str:
    """One ET_LOG line as `et_pal_emit_log_message` prints it (posix.cpp):
    `I 00:00:01.000123 executorch:enn_executor_runner.cpp:175] message`. `seconds` is the
    time since the runtime started."""
    micros = int(seconds * 1e6)
    seconds_total, us = divmod(micros, 1_000_000)
    minutes_total, sec = divmod(seconds_total, 60)
    hours, minutes = divmod(minutes_total, 60)
    return f"{level} {hours:02d}:{minutes:02d}:{sec:02d}.{us:06d} executorch:{source}:{line}] {message}"


def check_failed_message(condition: str, message: str | None = None, function: str = "main") -> str:
    """What ET_CHECK_MSG (or, without a message, ET_CHECK) prints at level F before it
    aborts (runtime/platform/assert.h)."""
    if message is None:
        return f"In function {function}(), assert failed: {condition}"
    return f"In function {function}(), assert failed ({condition}): {message}"


def error_name(code: int) -> str:
    """`0x14` → `OperatorMissing`; unknown codes stay numbers."""
    return ERROR_NAMES.get(code, f"0x{code:x}")


def timing_line(runs: int, total_ms: float, avg_ms: float) -> str:
    """The runner's timing message (%d / %f / %f)."""
    return f"{runs:d} inference took {total_ms:f} ms, avg {avg_ms:f} ms"


def statistics_text(init_ms: float, load_ms: float, first_ms: float, avg_ms: float) -> str:
    """`statistics.txt` as the runner writes it: `std::to_string(double)` is `%f`, lines
    joined by newlines and ended by `std::endl`."""
    return f"init: {init_ms:f}\nload: {load_ms:f}\n1st: {first_ms:f}\navg: {avg_ms:f}\n"


def parse_statistics(data: bytes | None) -> dict[str, float]:
    """`init`, `load`, `first`, `avg` (ms) of a `statistics.txt`; empty when absent."""
    if not data:
        return {}
    found = _STATISTICS_LINE.findall(data.decode("utf-8", errors="replace"))
    return {("first" if key == "1st" else key): float(value) for key, value in found}


@dataclass(frozen=True)
class RunnerLog:
    """One runner invocation's log, read back."""

    stage: Stage
    """The last marker the runner printed."""
    method: str | None
    """The method it ran ("Using method X")."""
    fatal: str | None
    """The failed check's message (ET_CHECK's F line, without its prefix), if any."""
    errors: tuple[str, ...]
    """Messages of E lines (the runtime's reasons, "Extra commandline args", gflags errors)."""
    status: int | None
    """The status code of the fatal line ("... with status 0x14"), if it has one."""
    timing: tuple[int, float, float] | None
    """(N, total ms, avg ms) of the timing line."""
    enn: tuple[str, ...] = ()
    """ENN's own ERROR and WARN lines (`[ERROR][Exynos ExecuTorch]...`), as `ERROR: message`."""

    @property
    def reason(self) -> str:
        """One line: the failed check (with its status decoded) and the runtime's first
        explanation, e.g. `Loading of method forward failed with status 0x20 (NotFound):
        Backend XnnpackBackend is not registered.`"""
        parts = []
        if self.fatal:
            text = self.fatal
            if self.status is not None:
                text = text.replace(f"0x{self.status:x}", f"0x{self.status:x} ({error_name(self.status)})", 1)
            parts.append(text)
        explanations = [e for e in self.errors if e != self.fatal]
        if explanations:
            parts.append(explanations[0])
        text = ": ".join(parts)
        if self.enn:
            text += ("; " if text else "") + "ENN: " + "; ".join(dict.fromkeys(self.enn))
        return text


def parse_log(text: str) -> RunnerLog:
    """Read one runner invocation's stdout + stderr."""
    stage = Stage.STARTED
    method = None
    fatal = None
    errors: list[str] = []
    enn: list[str] = []
    timing = None
    for line in text.splitlines():
        match = _LOG_LINE.match(line)
        enn_line = _ENN_LINE.match(line) if match is None else None
        if enn_line is not None:
            enn.append(f"{enn_line.group('level')}: {enn_line.group('message').strip()}")
            continue
        if match is None:
            if line.startswith("ERROR: "):  # gflags
                errors.append(line.removeprefix("ERROR: "))
            continue
        level, message = match.group("level"), match.group("message")
        for marker_stage, (_line, marker) in _MARKERS:
            if message.startswith(marker.split("%")[0]):
                stage = max(stage, marker_stage)
        if message.startswith("Using method "):
            method = message.removeprefix("Using method ")
        timed = _TIMING_LINE.fullmatch(message)
        if timed:
            timing = (int(timed.group(1)), float(timed.group(2)), float(timed.group(3)))
            stage = max(stage, Stage.TIMED)
        if level == "F":
            fatal = re.sub(r"^In function .+?\(\), assert failed(?: \(.*?\))?: ", "", message)
        elif level == "E":
            errors.append(message)
    status = None
    if fatal:
        found = _STATUS.search(fatal)
        status = int(found.group(1), 16) if found else None
    return RunnerLog(stage, method, fatal, tuple(errors), status, timing, tuple(enn))


ENN_NOT_USABLE = "the board is not usable for ENN"
"""How `board_fault` begins when ENN's library does not load: only a person (a vendor image
with the library) fixes that, so the board is taken out at once (hil.attention.NeedsPerson)."""


def board_fault(log: RunnerLog, status: int) -> str | None:
    """Why a failed invocation is the board's fault rather than the program's (an
    infrastructure error, retried elsewhere), or None. ENN's library that does not load
    (`Lib load failed.`, ENN's `Failed to load enn api library...`, then a segfault), ENN
    that does not initialise or deinitialise, a runner that dies before printing anything,
    and an output folder it cannot write (storage full, `/data` read-only) say nothing
    about the program."""
    lib = next((line for line in log.enn if ENN_LIB_NOT_LOADED in line), None)
    if lib is not None or LIB_LOAD_FAILED[1] in log.errors:
        why = lib.removeprefix("ERROR: ") if lib else LIB_LOAD_FAILED[1]
        return (f"{ENN_NOT_USABLE}: libenn_public_api_cpp.so did not load ({why}); "
                f"the runner then died (exit {status})")
    if log.fatal and log.fatal.startswith(ENN_INIT_FAILED[1]):
        return f"ENN did not initialise on the board: {log.fatal}"
    if log.fatal and log.fatal.startswith(ENN_DEINIT_FAILED[1]):
        return f"ENN did not deinitialise on the board (after the outputs were written): {log.fatal}"
    if log.fatal and log.fatal.startswith(OUTPUT_FOLDER[1].split("%")[0]):
        return f"the board could not write the runner's outputs (storage full or read-only?): {log.fatal}"
    if status > 128 and log.stage is Stage.STARTED and not log.fatal and not log.errors:
        return (f"the runner died (exit {status}) before loading anything: ENN initialisation "
                "crashed (is libenn_public_api_cpp.so on the board?)")
    return None
