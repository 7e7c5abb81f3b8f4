"""`hil bisect`'s command line without boards: its help, and bad usage as one line and exit 3
before any board is reached."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.cli import build_parser, main
from hil.report.results import save_results
from tests.report import case, sample_results


def _night(tmp_path: Path, name: str, verdict: str) -> Path:
    document = sample_results()
    document["cases"] = [case("smoke", "fp32", "add", verdict), case("smoke", "fp32", "conv2d", "PASS")]
    path = tmp_path / name / "results.json"
    save_results(document, path)
    return path


def test_help_has_a_description_examples_and_every_exit_code() -> None:
    parser = build_parser()
    bisect = parser._subparsers._group_actions[0].choices["bisect"]  # noqa: SLF001
    text = bisect.format_help()
    assert "examples:\n  hil bisect --good" in text
    for code in ("0", "2", "3", "4", "5", "6", "130"):
        assert f"\n  {code} " in text.split("exit codes:")[1]
    assert all(action.help for action in bisect._actions)  # noqa: SLF001


@pytest.mark.parametrize(("extra", "says"), [
    (["--runner-repo", "."], "--runner-repo and --runner-build go together"),
    (["--samples", "2"], "--samples: 2 is out of range"),
    (["--firmware-builds", "/nowhere"], "--firmware-builds /nowhere: not a folder"),
    (["--filter", "no_such_case"], "nothing to bisect"),
])
def test_bad_usage_is_one_line_and_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          extra: list[str], says: str) -> None:
    good, bad = _night(tmp_path, "good", "PASS"), _night(tmp_path, "bad", "FAIL_MISMATCH")
    code = main(["bisect", "--good", str(good), "--bad", str(bad), "--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and says in err and "Traceback" not in err


def test_nothing_regressed_is_exit_3_and_a_missing_case_is_named(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    good, same = _night(tmp_path, "good", "PASS"), _night(tmp_path, "same", "PASS")
    assert main(["bisect", "--good", str(good), "--bad", str(same), "--out", str(tmp_path / "out")]) == 3
    assert "no case regressed between GOOD and BAD: nothing to bisect" in capsys.readouterr().err
    assert main(["bisect", "--good", str(good), "--bad", str(tmp_path / "nowhere.json")]) == 3
    assert "--bad" in capsys.readouterr().err


def test_an_out_folder_of_another_bisection_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from hil.bisect.journal import Journal

    Journal(tmp_path / "out", {"good": "another", "bad": "one"}).close()
    good, bad = _night(tmp_path, "good", "PASS"), _night(tmp_path, "bad", "FAIL_MISMATCH")
    for path, build in ((good, "B1"), (bad, "B2")):
        document = json.loads(path.read_text())
        document["run"]["boards"][0]["build"] = {"after": build}
        save_results(document, path)
        (tmp_path / "fw" / build).mkdir(parents=True)
        (tmp_path / "fw" / build / "system.img").write_bytes(b"x")
    code = main(["bisect", "--good", str(good), "--bad", str(bad), "--out", str(tmp_path / "out"),
                 "--firmware-builds", str(tmp_path / "fw")])
    assert code == 3 and "holds another bisection" in capsys.readouterr().err


def test_changed_suite_definitions_are_named_with_whose_this_hil_runs(tmp_path: Path) -> None:
    """GOOD and BAD record different digests of the smoke suite; this hil's definitions are
    BAD's: the answer says the definitions changed and that every run uses BAD's."""
    import json

    from hil.cases import load_suite
    from hil.run.records import suite_digests

    mine = suite_digests([c for c in load_suite("smoke") if c.key == "smoke.fp32.add"])["smoke"]["digest"]
    good, bad = _night(tmp_path, "good", "PASS"), _night(tmp_path, "bad", "FAIL_MISMATCH")
    for path, digest in ((good, "0" * 64), (bad, mine)):
        document = json.loads(path.read_text())
        document["run"]["suites"] = {"smoke": {"digest": digest, "cases": 1}}
        save_results(document, path)
    assert main(["bisect", "--good", str(good), "--bad", str(bad), "--out", str(tmp_path / "out")]) == 4
    doc = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert [(c["element"], c["bisected"]) for c in doc["changed"]] == [("suites", False)]
    assert any("smoke's case definitions changed" in note and "are BAD's" in note for note in doc["notes"])
