"""`hil merge`: shards become one results document whose cases and verdicts are the
unsharded run's; inputs that are not parts of one run are refused with exit code 3."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from junitparser import JUnitXml

from hil.cli import main
from hil.report.results import load_results, save_results

from . import CASES, sample_results

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def _shards(tmp_path: Path) -> list[Path]:
    """The sample run cut into three shard files, each with its own run id and times."""
    paths = []
    for index, cases in enumerate([CASES[0:3], CASES[3:5], CASES[5:]], start=1):
        document = sample_results()
        document["cases"] = copy.deepcopy(cases)
        document["run"].update(
            id=f"run-{index}",
            shard=f"{index}/3",
            started=f"2026-11-30T03:3{index}:00Z",
            finished=f"2026-11-30T03:4{index}:00Z",
            command=["hil", "run", "--suite", "smoke", "--shard", f"{index}/3"],
        )
        path = tmp_path / f"shard{index}.json"
        save_results(document, path)
        paths.append(path)
    return paths


def test_merging_shards_restores_the_whole_run(tmp_path: Path) -> None:
    out, junit = tmp_path / "merged.json", tmp_path / "merged.xml"
    code = main(["merge", *map(str, _shards(tmp_path)), "--out", str(out), "--junit", str(junit)])
    assert code == 1  # the run has failures, as `hil report` would say
    merged = load_results(out)
    whole = sample_results()
    assert [(c["id"], c["verdict"]) for c in merged["cases"]] == [
        (c["id"], c["verdict"]) for c in whole["cases"]
    ]
    assert merged["totals"] == whole["totals"]
    run = merged["run"]
    assert run["shard"] == "1/1" and "missing_shards" not in run
    assert (run["started"], run["finished"]) == ("2026-11-30T03:31:00Z", "2026-11-30T03:43:00Z")
    assert run["status"] == "complete"
    assert run["command"] == ["hil", "run", "--suite", "smoke"]
    assert [m["id"] for m in run["merged_from"]] == ["run-1", "run-2", "run-3"]
    assert [m["cases"] for m in run["merged_from"]] == [3, 2, 2]
    xml = JUnitXml.fromfile(str(junit))
    assert sum(s.tests for s in xml) == 7 and sum(s.errors for s in xml) == 2


def test_usable_boards_of_a_merge_counts_distinct_boards(tmp_path: Path) -> None:
    """One shard per board, one board that never came up: 2 usable, not the first's 1."""
    paths = _shards(tmp_path)
    boards = [[{"name": "a"}], [{"name": "b"}, {"name": "c", "error": "preflight: ..."}],
              [{"name": "a"}]]
    for path, board_list in zip(paths, boards, strict=True):
        document = load_results(path)
        document["run"].update(boards=board_list,
                               usable_boards=sum("error" not in b for b in board_list))
        save_results(document, path)
    out = tmp_path / "merged.json"
    main(["merge", *map(str, paths), "--out", str(out)])
    assert load_results(out)["run"]["usable_boards"] == 2
    main(["merge", *map(str, _shards(tmp_path / "old")), "--out", str(out)])  # older files
    assert load_results(out)["run"]["usable_boards"] is None


def test_the_capacity_lost_of_a_merge_is_its_shards_summed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _shards(tmp_path)
    for path, (out_s, total_s) in zip(paths[:2], [(10.0, 100.0), (30.0, 300.0)], strict=True):
        document = load_results(path)
        document["run"]["capacity_lost"] = {"board_seconds_out": out_s, "board_seconds": total_s,
                                            "fraction": out_s / total_s}
        save_results(document, path)
    out = tmp_path / "merged.json"
    main(["merge", *map(str, paths), "--out", str(out)])  # the third shard is from before it
    assert load_results(out)["run"]["capacity_lost"] == {
        "board_seconds_out": 40.0, "board_seconds": 400.0, "fraction": 0.1}
    main(["merge", str(paths[2]), "--out", str(out)])
    assert "capacity_lost" not in load_results(out)["run"]
    document = load_results(paths[0])  # hand-edited: a string where seconds belong
    document["run"]["capacity_lost"]["board_seconds_out"] = "ten"
    save_results(document, paths[0])
    out.unlink()
    capsys.readouterr()
    assert main(["merge", str(paths[0]), "--out", str(out)]) == 3  # refused, not summed as 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(paths[0]) in err
    assert "'run.capacity_lost.board_seconds_out' is a string, expected a number" in err
    assert not out.exists()


def test_a_missing_or_unfinished_shard_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second, _ = _shards(tmp_path)
    document = load_results(second)
    document["run"].update(status="running", finished=None)
    save_results(document, second)
    out = tmp_path / "merged.json"
    main(["merge", str(first), str(second), "--out", str(out)])
    run = load_results(out)["run"]
    assert run["missing_shards"] == ["3/3"]
    assert run["shard"] == "1/3,2/3"
    assert run["status"] == "interrupted" and run["finished"] is None
    assert "shard(s) missing: 3/3" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: None, "cases[0]"),  # the same file twice: every case is duplicated
        (lambda d: d["run"].update(chipset="E9965"), "run.chipset"),
        (lambda d: d["run"].update(flow="enn"), "run.flow"),
        (lambda d: d["run"].update(git_sha="feedbeef"), "run.git_sha"),
    ],
    ids=["duplicate", "chipset", "flow", "git_sha"],
)
def test_inputs_that_are_not_parts_of_one_run_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change, field: str
) -> None:
    first = _shards(tmp_path)[0]
    other = tmp_path / "other.json"
    document = load_results(first)
    change(document)
    save_results(document, other)
    assert main(["merge", str(first), str(other), "--out", str(tmp_path / "m.json")]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(other) in err and f"'{field}'" in err
    assert not (tmp_path / "m.json").exists()


def test_a_broken_input_exits_3_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "exynos-hil/results", "version": 1}))
    first = _shards(tmp_path)[0]
    assert main(["merge", str(first), str(bad), "--out", str(tmp_path / "m.json")]) == 3
    assert f"{bad}: field 'run' is missing" in capsys.readouterr().err


def _hil_run(out: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "hil",
            "run",
            "--board",
            "virtual",
            "--out",
            str(out),
            "--suite",
            str(FIXTURES / "shards.yaml"),
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )


@pytest.mark.slow
def test_three_real_shards_merge_into_the_unsharded_run(tmp_path: Path) -> None:
    """Four real `hil run`s on virtual boards: the whole (as in GitHub Actions), then shards
    1/3, 2/3 and 3/3 at once, from the artifact cache the whole filled (as a sharded CI job
    restores it); then `hil merge` of the shards."""
    summary = tmp_path / "step_summary.md"
    github = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    done = {"whole": _hil_run(tmp_path / "whole", env=github)}
    shards = {f"shard{i}": ("--shard", f"{i}/3") for i in (1, 2, 3)}
    with ThreadPoolExecutor(len(shards)) as pool:
        futures = {name: pool.submit(_hil_run, tmp_path / name, *args) for name, args in shards.items()}
        done |= {name: future.result() for name, future in futures.items()}
    expected = {"whole": 1, "shard1": 1, "shard2": 0, "shard3": 0}  # export_differs is in shard 1
    for name, result in done.items():
        assert "Traceback" not in result.stderr, f"{name} crashed: {result.stderr}"
        assert result.returncode == expected[name], f"{name}: {result.stdout}{result.stderr}"
    shards = [tmp_path / f"shard{i}" / "results.json" for i in (1, 2, 3)]
    assert all(load_results(p)["cases"] for p in shards)  # the fixture fills every shard
    merged, junit = tmp_path / "merged.json", tmp_path / "merged.xml"
    assert main(["merge", *map(str, shards), "--out", str(merged), "--junit", str(junit)]) == 1

    def verdicts(path: Path) -> dict[str, str]:
        return {f"{c['suite']}.{c['precision']}.{c['id']}": c["verdict"] for c in load_results(path)["cases"]}

    whole = verdicts(tmp_path / "whole" / "results.json")
    assert verdicts(merged) == whole
    assert len(whole) == 6 and whole["shards.fp32.export_differs"] == "FAIL_MISMATCH"
    assert load_results(merged)["run"]["shard"] == "1/1"
    log = done["whole"].stdout
    assert "[6/6] " in log and "::group::shards.fp32: 5 PASS, 1 FAIL_MISMATCH" in log
    assert log.count("::error ") == 1 and "title=FAIL_MISMATCH shards.fp32.export_differs" in log
    assert "## exynos-hil: failed" in summary.read_text()
    assert sorted(tc.name for suite in JUnitXml.fromfile(str(junit)) for tc in suite) == sorted(
        key.rsplit(".", 1)[1] for key in whole
    )
