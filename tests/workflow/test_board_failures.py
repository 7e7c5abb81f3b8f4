"""Board failures as a CI user reads them: a board of another chipset
is left out before it is leased, a case no board ran names why, and the summary has a Boards
section."""

from __future__ import annotations

import json
from pathlib import Path

from hil.cli import main
from hil.pool.pool import board_causes
from hil.report.results import worst_first
from hil.report.summary import render_summary

from .conftest import OTHER_CHIPSET, TINY


def test_a_board_of_another_chipset_is_left_out_without_a_lease(network_run: Path) -> None:
    results = json.loads((network_run / "results.json").read_text())
    boards = {b["name"]: b for b in results["run"]["boards"]}
    other = boards[OTHER_CHIPSET]
    assert other["left_out"] == "chipset" and "lease" not in other
    assert other["error"] == "left out: chipset E9965, the run targets E9955 (not leased, not connected)"
    assert results["run"]["usable_boards"] == 1
    assert {c["verdict"] for c in results["cases"]} == {"PASS"}


def test_the_summary_has_a_boards_section(network_run: Path) -> None:
    summary = (network_run / "summary.md").read_text()
    section = summary.split("### Boards", 1)[1].split("###", 1)[0]
    assert "1 of 2 usable at the start" in section
    assert f"| {OTHER_CHIPSET} | left out | 0 |" in section
    assert "| usable | 3 |" in section


def test_a_case_no_board_ran_names_the_cause(tmp_path: Path, capsys) -> None:
    code = main(["run", "--board", "127.0.0.1:1", "--idle-timeout", "2", "--suite", str(TINY),
                 "--flow", "portable", "--out", str(tmp_path)])
    capsys.readouterr()
    assert code == 2
    results = json.loads((tmp_path / "results.json").read_text())
    for case in results["cases"]:
        assert case["verdict"] == "ERROR_INFRA"
        assert case["message"].startswith("no usable board (every board failed to start or was "
                                          "quarantined): 127.0.0.1:1: "), case["message"]
    assert "127.0.0.1:1: " in (tmp_path / "junit.xml").read_text()


def test_the_root_cause_comes_first_and_a_lost_board_says_its_last_step() -> None:
    cases = [
        {"suite": "s", "precision": "fp32", "id": "later", "verdict": "ERROR_INFRA", "board": None,
         "message": "no usable board left to run it"},
        {"suite": "s", "precision": "fp32", "id": "died", "verdict": "ERROR_INFRA", "board": "b1",
         "message": "b1: Network is unreachable"},
    ]
    assert [c["id"] for c in worst_first(cases)] == ["died", "later"]
    lost = {"name": "b1", "quarantined": "recovery ran out",
            "recovery": [{"step": "reconnect", "recovered": False, "message": "Network is unreachable"},
                         {"step": "reboot", "recovered": False, "message": "no adb after 120 s"}]}
    assert board_causes([lost]) == ("b1: quarantined: recovery ran out (last recovery step: "
                                    "reboot: no adb after 120 s)")
    summary = render_summary({"run": {"status": "complete", "boards": [lost], "usable_boards": 1},
                              "cases": cases})
    assert "| b1 | lost (quarantined) | 1 | reconnect failed, reboot failed |" in summary
