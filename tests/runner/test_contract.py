"""Reading enn_executor_runner logs back (hil/runner/contract.py): the stage where a runner
stopped, its reason with the status decoded, and what is the board's fault. The logs are
upstream's format (runtime/platform/default/posix.cpp, enn_executor_runner.cpp); the virtual
runner's real output is covered by tests/virtual/test_runner.py."""

from __future__ import annotations

import pytest

from hil.runner.contract import (
    ERROR_NAMES,
    Stage,
    board_fault,
    log_line,
    parse_log,
    parse_statistics,
    statistics_text,
)


def log(*lines: tuple[str, int, str, str]) -> str:
    return "\n".join(log_line(level, 0.0015 * i, line, message, source)
                     for i, (level, line, source, message) in enumerate(lines)) + "\n"


R = "enn_executor_runner.cpp"
LOADED = ("I", 175, R, "Model file model.pte is loaded.")
METHOD = ("I", 184, R, "Using method forward")
METHOD_LOADED = ("I", 262, R, "Method loaded.")
FIRST = ("I", 324, R, "Start 1st inference.")
INFERENCE = ("I", 334, R, "Start inference.")
TIMING = ("I", 359, R, "1 inference took 0.250000 ms, avg 0.250000 ms")


def test_log_line_is_posix_pal_format() -> None:
    assert log_line("I", 3723.000123, 175, "Model file m.pte is loaded.") == (
        "I 01:02:03.000123 executorch:enn_executor_runner.cpp:175] Model file m.pte is loaded.")


def test_a_finished_run_reads_as_timed_with_its_timing_line() -> None:
    result = parse_log(log(LOADED, METHOD, METHOD_LOADED, FIRST, INFERENCE, TIMING))
    assert (result.stage, result.method, result.timing, result.fatal, result.status) == (
        Stage.TIMED, "forward", (1, 0.25, 0.25), None, None)


@pytest.mark.parametrize(
    ("lines", "stage", "reason"),
    [
        ([("F", 135, R, "In function exynos_npu_init(), assert failed (ret == ENN_RET_SUCCESS): "
                        "Enn initialize failed.")],
         Stage.STARTED, "Enn initialize failed."),
        ([("E", 110, "file_data_loader.cpp", "Failed to open model.pte: No such file or directory (2)"),
          ("F", 163, R, "In function main(), assert failed (loader.ok()): FileDataLoader::from() failed: 0x22")],
         Stage.STARTED,
         "FileDataLoader::from() failed: 0x22 (AccessFailed): Failed to open model.pte: No such file or directory (2)"),
        ([("E", 172, R, "Failed to parse model file model.pte")], Stage.STARTED,
         "Failed to parse model file model.pte"),
        ([LOADED, METHOD, ("E", 822, "method.cpp", "Missing operator: [0] quantized_decomposed::add.out"),
          ("E", 1128, "method.cpp", "There are 1 instructions don't have corresponding operator registered. "
                                    "See logs for details"),
          ("F", 257, R, "In function main(), assert failed (method.ok()): Loading of method forward failed "
                        "with status 0x14")],
         Stage.PROGRAM_LOADED,
         "Loading of method forward failed with status 0x14 (OperatorMissing): "
         "Missing operator: [0] quantized_decomposed::add.out"),
        ([LOADED, METHOD, METHOD_LOADED,
          ("F", 302, R, "In function main(), assert failed (input_data_reader.nbytes(input_index) == "
                        "tensor_meta->nbytes()): Given inputs size is invalid")],
         Stage.METHOD_LOADED, "Given inputs size is invalid"),
        ([LOADED, METHOD, METHOD_LOADED, FIRST, INFERENCE, TIMING,
          ("F", 365, R, "In function main(), assert failed (status == Error::Ok): Execution of method forward "
                        "failed with status 0x12")],
         Stage.TIMED, "Execution of method forward failed with status 0x12 (InvalidArgument)"),
    ],
)
def test_where_a_runner_stopped_and_why(lines: list, stage: Stage, reason: str) -> None:
    result = parse_log(log(*lines))
    assert result.stage is stage
    assert result.reason == reason


def test_gflags_errors_and_foreign_lines_are_read() -> None:
    result = parse_log("enn_executor_runner (hil VIRTUAL board ...)\nERROR: unknown command line flag 'x'\n")
    assert (result.stage, result.errors, result.reason) == (
        Stage.STARTED, ("unknown command line flag 'x'",), "unknown command line flag 'x'")


def test_every_status_code_of_error_h_has_a_name() -> None:
    assert ERROR_NAMES[0x14] == "OperatorMissing" and ERROR_NAMES[0x20] == "NotFound"
    assert len(ERROR_NAMES) == 21


def test_statistics_round_trip_in_the_runners_format() -> None:
    text = statistics_text(1.5, 2.25, 0.5, 0.375)
    assert text == "init: 1.500000\nload: 2.250000\n1st: 0.500000\navg: 0.375000\n"
    assert parse_statistics(text.encode()) == {"init": 1.5, "load": 2.25, "first": 0.5, "avg": 0.375}
    assert parse_statistics(None) == {} and parse_statistics(b"") == {}


@pytest.mark.parametrize(
    ("lines", "status", "fault"),
    [
        ([("F", 135, R, "In function exynos_npu_init(), assert failed (ret == ENN_RET_SUCCESS): "
                        "Enn initialize failed.")], 134, "ENN did not initialise"),
        ([], 139, "before loading anything"),
        ([LOADED, METHOD, METHOD_LOADED, FIRST, INFERENCE, TIMING,
          ("F", 113, R, "In function saveOutput(), assert failed (fout.is_open()): Directory or have no "
                        "visit permission: out")], 134, "could not write the runner's outputs"),
        # no libenn_public_api_cpp.so (upstream issue 16395): ENN's loader says so, then SIGSEGV
        ([("E", 68, "enn_api_implementation.cpp", "Lib load failed.")], 139, "board is not usable for ENN"),
        # debug build: ENN's line carries [file:line]; the library is there but does not load
        ([("E", 68, "enn_api_implementation.cpp", "Lib load failed.")], 139, "cannot locate symbol"),
        # EnnApiDeinit at exit, after the outputs were written
        ([LOADED, METHOD, METHOD_LOADED, FIRST, INFERENCE, TIMING,
          ("F", 128, R, "In function operator()(), assert failed (ret == ENN_RET_SUCCESS): "
                        "Enn Deinitialize failed.")], 134, "did not deinitialise"),
        ([LOADED, METHOD, METHOD_LOADED, FIRST], 139, None),  # a crash while executing: the program's
        ([("E", 172, R, "Failed to parse model file model.pte")], 1, None),
    ],
)
def test_board_faults_are_told_from_program_failures(lines: list, status: int, fault: str | None) -> None:
    text = log(*lines) if lines else ""
    if fault == "board is not usable for ENN":
        text += ('[ERROR][Exynos ExecuTorch]Failed to load enn api library. dlopen failed: library '
                 '"libenn_public_api_cpp.so" not found\n')
    if fault == "cannot locate symbol":
        text += ('[ERROR][Exynos ExecuTorch][enn_api_implementation.cpp:47]: Failed to load enn api '
                 'library. dlopen failed: cannot locate symbol "x" referenced by "libenn.so"\n')
    found = board_fault(parse_log(text), status)
    assert (found is None) if fault is None else (fault in found)


def test_enns_own_error_and_warn_lines_end_the_failure_reason() -> None:
    # backends/samsung/runtime/logging.cpp writes "[LEVEL][Exynos ExecuTorch]message" to stderr
    text = log(LOADED, METHOD, ("F", 257, R, "In function main(), assert failed (method.ok()): Loading "
                                             "of method forward failed with status 0x1")) + (
        "[WARN][Exynos ExecuTorch]Failed to load function EnnSetFastIpc\n"
        "[INFO][Exynos ExecuTorch]Loading ENN API library Completed.\n"
        "[ERROR][Exynos ExecuTorch][enn_executor.cpp:40]: Failed to open model\n")
    result = parse_log(text)
    assert result.enn == ("WARN: Failed to load function EnnSetFastIpc", "ERROR: Failed to open model")
    assert result.reason == ("Loading of method forward failed with status 0x1 (Internal); ENN: WARN: "
                             "Failed to load function EnnSetFastIpc; ERROR: Failed to open model")


def test_the_input_count_check_is_line_289_and_could_not_prepare_inputs_281() -> None:
    from hil.runner import contract

    assert contract.INPUT_COUNT == (289, "Please check the number of given input binary files")
    assert contract.PREPARE_INPUTS == (281, "Could not prepare inputs: 0x%x")
