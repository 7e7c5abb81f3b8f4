"""Errors a CI user meets with results files and output paths: one line and exit 3, never a
traceback; a run that never finished, lost cases or a lost shard is never green."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from hil.cli import main
from hil.report.results import save_results
from tests.report import sample_results

WRONG = ("x", [1], {"a": 1})


def _mutations():
    """Every run field and every field of every case, set to each wrong-typed value."""
    document = sample_results()
    for key in document["run"]:
        for value in WRONG:
            yield "run", None, key, value
    keys = sorted({k for case in document["cases"] for k in case})
    for key in keys:
        for value in WRONG:
            yield "case", None, key, value
    for value in WRONG:
        yield "top", None, "totals", value


def _mutated(kind: str, key: str, value) -> dict:
    document = sample_results()
    if kind == "run":
        document["run"][key] = copy.deepcopy(value)
    elif kind == "top":
        document[key] = copy.deepcopy(value)
    else:
        for case in document["cases"]:
            if key in case:
                case[key] = copy.deepcopy(value)
    return document


def test_a_wrong_typed_field_is_exit_3_or_rendered_never_a_traceback(tmp_path: Path, capsys) -> None:
    """report and compare on every field of a results document set to each wrong type."""
    base = tmp_path / "base.json"
    save_results(sample_results(), base)
    crashes = []
    for kind, _, key, value in _mutations():
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(_mutated(kind, key, value)))
        for argv in (["report", str(path), "--summary", str(tmp_path / "s.md"),
                      "--junit", str(tmp_path / "j.xml")],
                     ["compare", str(base), str(path)]):
            try:
                code = main(argv)
            except Exception as exc:  # noqa: BLE001 - the finding
                crashes.append(f"{argv[0]} {kind}.{key}={value!r}: {type(exc).__name__}: {exc}")
                continue
            assert code in (0, 1, 2, 3)
    capsys.readouterr()
    print("\n".join(crashes))
    assert crashes == []


@pytest.mark.parametrize("flag, make", [
    ("--out", lambda t: _file(t)),                                             # a file in the way
    ("--junit", lambda t: _file(t) / "j.xml"),                                 # parent is a file
    ("--results", lambda t: t),                                                # a folder
    ("--junit", lambda t: _read_only(t) / "sub" / "j.xml"),                   # cannot write there
])
def test_an_unwritable_output_is_one_line_and_exit_3_before_the_run(tmp_path, capsys, flag, make) -> None:
    target = make(tmp_path)
    argv = ["run", "--suite", "smoke", "--filter", "add", "--board", "no-such-board"]
    argv += ["--out", str(tmp_path / "out")] if flag != "--out" else []
    code = main([*argv, flag, str(target)])
    err = capsys.readouterr().err
    assert code == 3 and err.startswith(f"hil: error: {flag} ") and err.count("\n") == 1, err
    assert not (tmp_path / "out" / "results.json").exists()


def _file(folder: Path) -> Path:
    (folder / "file").write_text("x")
    return folder / "file"


def _read_only(folder: Path) -> Path:
    ro = folder / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.access(ro, os.W_OK):  # root writes anywhere: a path under a file instead
        ro.chmod(0o700)
        (ro / "blocker").write_text("x")
        return ro / "blocker"
    return ro


def test_report_and_merge_check_their_outputs_too(tmp_path, capsys) -> None:
    results = tmp_path / "r.json"
    save_results(sample_results(), results)
    (tmp_path / "f").write_text("x")
    assert main(["report", str(results), "--summary", str(tmp_path / "f" / "s.md")]) == 3
    assert main(["merge", str(results), "--out", str(tmp_path / "f" / "m.json")]) == 3
    assert main(["compare", str(results), str(results), "--plot", str(tmp_path)]) == 3
    assert capsys.readouterr().err.count("hil: error: ") == 3


def test_report_of_a_run_that_never_finished_is_not_green(tmp_path, capsys) -> None:
    document = sample_results()
    document["cases"] = [c for c in document["cases"] if c["verdict"] == "PASS"]
    planned = ["smoke.fp32.conv2d", "smoke.fp32.add", "smoke.fp32.linear"]
    document["run"].update(status="running", planned=planned)
    document["cases"][0].update(suite="smoke", precision="fp32", id="conv2d")
    path = tmp_path / "r.json"
    save_results(document, path)
    summary = tmp_path / "s.md"
    assert main(["report", str(path), "--summary", str(summary)]) == 2
    err = capsys.readouterr().err
    assert "incomplete run (status running" in err
    assert "2 of 3 planned case(s) did not run: smoke.fp32.add, smoke.fp32.linear" in err
    assert "## exynos-hil: incomplete" in summary.read_text()
    assert "**Incomplete**" in summary.read_text()
    document["run"]["planned"] = planned[:1]  # every planned case ran: only the end was lost
    save_results(document, path)
    assert main(["report", str(path)]) == 0


def test_compare_fails_when_the_new_run_lost_cases_unless_allowed(tmp_path, capsys) -> None:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    save_results(sample_results(), base)
    lost = sample_results()
    lost["cases"] = lost["cases"][:-2]
    save_results(lost, new)
    assert main(["compare", str(base), str(base)]) == 0
    assert main(["compare", str(base), str(new)]) == 1
    assert "2 case(s) of the base are missing from the new run" in capsys.readouterr().err
    assert main(["compare", str(base), str(new), "--allow-missing"]) == 0


def test_compare_says_a_threshold_without_percent_is_percent(tmp_path, capsys) -> None:
    base = tmp_path / "base.json"
    save_results(sample_results(), base)
    assert main(["compare", str(base), str(base), "--threshold", "0.1"]) == 0
    captured = capsys.readouterr()
    assert "--threshold 0.1 is read as 0.1%" in captured.err
    assert "+0.1%" in captured.out


def test_merge_with_a_missing_shard_is_not_green(tmp_path, capsys) -> None:
    document = sample_results()
    document["cases"] = [c for c in document["cases"] if c["verdict"] == "PASS"]
    document["run"]["shard"] = "1/2"
    path = tmp_path / "shard1.json"
    save_results(document, path)
    assert main(["merge", str(path), "--out", str(tmp_path / "m.json")]) == 2
    assert "hil: error: shard(s) missing: 2/2" in capsys.readouterr().err
