"""Localization in whole runs: a virtual board with a `miscompute` fault on one op, reached
through the real adb server, the probes lowered with ExecuTorch and judged by hil's own
verdict code; the finding in results.json, JUnit, the GitHub annotation, the step summary
and the plot; and `hil localize`'s answers to bad input."""

from __future__ import annotations

import json
import signal
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hil.board.spec import parse_boards
from hil.cli import main
from hil.lower.cache import default_cache_dir
from hil.report.github import annotations
from hil.report.localization import plot_localizations
from hil.report.summary import render_summary
from hil.run import Run, RunOptions
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.results_schema import assert_valid_results

from . import SUITE, fixture_cases, forward_line

pytestmark = pytest.mark.slow  # a board, and a few probes lowered for XNNPACK (seconds each)

HEAD_LINE = f"tests/fixtures/localize_models.py:{forward_line('x = self.head(x)')}"
RESIDUAL_LINE = f"tests/fixtures/localize_models.py:{forward_line('self.block(x) + x')}"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualBoardProcess]:
    with start_virtual_board(tmp_path_factory.mktemp("localize-board"), "E9955", "hil-localize") as started:
        yield started


@pytest.fixture(autouse=True)
def keep_sigterm() -> Iterator[None]:
    """`hil.cli.main` installs its SIGTERM handler: give pytest its own back."""
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


def with_fault(board: VirtualBoardProcess, spec: str | None) -> None:
    board.control("fault clear")
    if spec:
        board.control(f"fault {spec}")


def localize(board: VirtualBoardProcess, out: Path, fault: str | None, precision: str = "fp32",
             flow: str = "auto") -> dict[str, Any]:
    """`hil run --localize` over the fixture case on `board`, in this process; the case record."""
    with_fault(board, fault)
    options = RunOptions(
        cases=tuple(fixture_cases(precision)), boards=tuple(parse_boards([board.address])), flow=flow,
        chipset="E9955", out_dir=out, results_path=out / "results.json", junit_path=out / "junit.xml",
        cache_dir=default_cache_dir(), jobs=1, localize=True,
    )
    Run(options).execute()
    assert_valid_results(out / "results.json")
    (record,) = json.loads((out / "results.json").read_text())["cases"]
    return record


@pytest.fixture(scope="module")
def hardswish(board: VirtualBoardProcess, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("hardswish")
    return localize(board, out, "miscompute,op=hardswish"), out


def test_the_first_hardswish_is_named_with_its_module_path_and_source_line(hardswish) -> None:
    record, _ = hardswish
    assert record["verdict"] == "FAIL_MISMATCH"
    block = record["localization"]
    assert block["status"] == "found", block
    first, before = block["first_diverging"], block["last_good"]
    assert (first["name"], first["op_name"], first["module"], first["source"]) == (
        "hardswish", "hardswish", "head.1", HEAD_LINE)
    assert (before["op_name"], before["module"]) == ("conv2d", "head.0")  # the node just before it
    assert first["sqnr_db"] == pytest.approx(6.02, abs=0.05) and before["verdict"] == "PASS"
    assert block["message"] == f"first diverging op: hardswish at head.1 ({HEAD_LINE})"
    assert block["board_runs"] == len(block["probes"]) <= block["max_board_runs"]
    assert block["whole_graph"]["from"] == "the case's own run"  # the last cut point costs no board run
    assert block["nodes"] == 19 and block["max_board_runs"] == 7  # ceil(log2 19) + 2
    assert all(p["delegation"]["delegated_calls"] >= 1 for p in block["probes"])  # each probe's own
    assert {u["op_name"] for u in block["unclean"]} == {"_native_batch_norm_legit_no_training"}


def test_reports_lead_with_the_first_diverging_op(hardswish, tmp_path: Path) -> None:
    record, out = hardswish
    lead = f"first diverging op: hardswish at head.1 ({HEAD_LINE})"
    failure = ET.parse(out / "junit.xml").getroot().find(".//testcase/failure")
    assert failure is not None and failure.get("message").startswith(lead + "; output 0: max abs error")
    document = json.loads((out / "results.json").read_text())
    (annotation,) = annotations(document)
    assert annotation.startswith("::error ") and f"::{lead}" in annotation
    summary = render_summary(document)
    assert "### Localization (first diverging op)" in summary and f"**{lead}**" in summary
    section = summary.split("### Localization (first diverging op)")[1].split("###")[0]
    assert section.count("| `localize.fp32.residual_hardswish` |") == len(record["localization"]["probes"])
    png = tmp_path / "probes.png"
    assert plot_localizations([record], png) == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_first_residual_add_is_named(board: VirtualBoardProcess, tmp_path: Path) -> None:
    block = localize(board, tmp_path, "miscompute,op=add")["localization"]
    first = block["first_diverging"]
    assert (block["status"], first["name"], first["module"], first["source"]) == (
        "found", "add", "", RESIDUAL_LINE)
    assert block["message"] == f"first diverging op: add at (top level) ({RESIDUAL_LINE})"
    assert block["last_good"]["module"] == "block.4"  # the block's last BatchNorm, just before


def test_a_fault_on_every_program_diverges_from_the_first_probe(board: VirtualBoardProcess, tmp_path: Path) -> None:
    block = localize(board, tmp_path, "miscompute")["localization"]
    assert block["status"] == "diverges_from_first_probe"
    assert block["message"].startswith("diverges from the first probe: conv2d at stem.0")
    assert block["board_runs"] == 1 and block["last_good"] is None  # the whole graph: the case's own run


def test_a_passing_case_is_never_localized(board: VirtualBoardProcess, tmp_path: Path) -> None:
    record = localize(board, tmp_path, None)
    assert record["verdict"] == "PASS" and "localization" not in record


def test_a8w8_probes_are_judged_with_the_step_at_the_probed_node(board: VirtualBoardProcess, tmp_path: Path) -> None:
    # flow portable: the add is a kernel of the program's operator list, not a delegate's node
    block = localize(board, tmp_path, "miscompute,op=add", "a8w8", flow="portable")["localization"]
    first = block["first_diverging"]
    assert (block["status"], first["name"], first["source"]) == ("found", "add", RESIDUAL_LINE)
    assert block["flow"] == "portable" and all(p["delegation"]["delegated_calls"] == 0 for p in block["probes"])
    assert all("quantization step" in p["atol_rule"] for p in block["probes"])
    steps = {p["atol_rule"] for p in block["probes"]}
    assert len(steps) > 1  # each probed node's own step


def test_hil_localize_warm_takes_every_probe_from_the_cache(hardswish, board: VirtualBoardProcess, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    cold, _ = hardswish
    with_fault(board, "miscompute,op=hardswish")
    png = tmp_path / "probes.png"
    code = main(["localize", "--suite", str(SUITE), "--filter", "residual_hardswish", "--board", board.address,
                 "--out", str(tmp_path / "out"), "--plot", str(png)])
    assert code == 1  # the case failed; the localization is in its record
    block = json.loads((tmp_path / "out" / "results.json").read_text())["cases"][0]["localization"]
    assert block["cache_hits"] == block["board_runs"] == cold["localization"]["board_runs"]
    assert block["first_diverging"] == cold["localization"]["first_diverging"]
    assert "localization localize.fp32.residual_hardswish: first diverging op: hardswish" in capsys.readouterr().out
    assert png.is_file()


@pytest.mark.parametrize(("args", "expected"), [
    (["--filter", "no_such_case"], "no case matches"),
    (["--filter", "*", "--precision", "all"], "hil localize takes one precision"),
    (["--filter", "residual_hardswish", "--runner-profile", "upstream", "--flow", "xnnpack"],
     "--flow xnnpack: "),
    (["--filter", "residual_hardswish"], "localize.fp32.residual_hardswish ended PASS on "),
    (["--filter", "residual_hardswish", "--against", "fp32", "--precision", "fp32"],
     "--against fp32 compares an A8W8 graph with fp32"),
])
def test_bad_input_is_one_line_and_exit_3(board: VirtualBoardProcess, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str], args: list[str], expected: str) -> None:
    with_fault(board, None)
    board_args = [] if "--against" in args else ["--board", board.address]
    code = main(["localize", "--suite", str(SUITE), "--out", str(tmp_path), *board_args, *args])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 3 and len(lines) == 1, lines
    assert lines[0].startswith("hil: error: ") and expected in lines[0]
