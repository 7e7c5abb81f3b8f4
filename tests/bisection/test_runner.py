"""`hil bisect --runner-repo --runner-build` on virtual boards: throwaway repositories whose
build command writes a virtual runner stand-in carrying the commit's fault settings (the test
rig's runner builds, hil/virtual/runner_build.py). Latency: every build jitters (5 %, seeded);
from commit 27 on every inference is 20 % (or 1 %) slower. Wrong numbers: commit 12 does not
build, 13 computes relu wrong. Two factors changed, only the firmware matters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hil.virtual.launcher import VirtualBoardProcess
from tests.bisection import (
    BUILD_COMMAND,
    CASE,
    SUITE,
    bisect,
    built_runner,
    firmware_builds,
    inventory,
    night,
    runner_repo,
)

pytestmark = pytest.mark.slow

JITTER = "jitter,rel=0.05,seed=7"
LATENCY = {"iterations": 10, "warmup": 1}
"""The nights' latency plan (as `--latency stable` measures, shorter)."""


def _nights(boards: list[VirtualBoardProcess], repo: Path, commits: list[str], root: Path,
            firmware: tuple[Path, Path] | None = None, **options: Any) -> tuple[Path, Path]:
    """GOOD on the first commit's runner, BAD on the last's (and on these firmware builds)."""
    found = []
    for name, commit, build in (("good", commits[0], firmware and firmware[0]),
                                ("bad", commits[-1], firmware and firmware[1])):
        runner = built_runner(repo, commit, root / f"{name}-build")
        found.append(night(boards, build, root / name, runner=runner, **options))
    return found[0], found[1]


def _bisect(boards: list[VirtualBoardProcess], nights: tuple[Path, Path], repo: Path, out: Path,
            *extra: str) -> tuple[int, dict[str, Any]]:
    boards_yaml = inventory(out.parent / "boards.yaml", boards[:1])
    return bisect("--good", str(nights[0]), "--bad", str(nights[1]), "--suite", str(SUITE),
                  "--runner-repo", str(repo), "--runner-build", BUILD_COMMAND, "--inventory", str(boards_yaml),
                  "--out", str(out), "--samples", "8", *extra)


def test_commit_27_slower_by_20_percent_is_named_with_its_confidence(
        boards: list[VirtualBoardProcess], tmp_path: Path, no_firmware_faults: None) -> None:
    repo, commits = runner_repo(tmp_path / "repo", 40,
                                lambda n: [JITTER] + (["slow,on=exec,factor=1.2"] if n >= 27 else []))
    nights = _nights(boards, repo, commits, tmp_path, **LATENCY)
    bad = json.loads(nights[1].read_text())
    assert bad["run"]["boards"][0]["runner"]["commit"] == commits[-1]  # the tuple of the night
    # named with --filter: whether `hil compare` flags the nights depends on how loaded this host
    # is (a run it finds unstable needs its bands apart); what compare flags: test_plan.py
    code, doc = _bisect(boards, nights, repo, tmp_path / "out", "--filter", CASE)
    answer = doc["answer"]
    assert (code, answer["kind"]) == (0, "culprit"), answer["message"]
    assert (answer["culprit"]["key"], answer["parent"]["key"]) == (commits[26], commits[25])
    confidence = answer["confidence"]
    assert confidence["p"] < 0.01 and 0.5 <= confidence["share_of_regression"] <= 1.6
    assert min(confidence["culprit_runs"], confidence["parent_runs"]) >= 3
    regression = doc["regression"]
    assert regression["shift"] == pytest.approx(0.2, abs=0.08) and regression["resolvable"]
    assert doc["cases"] == {**doc["cases"], "metric": "latency", "primary": CASE}
    # each latency test: a good run and the candidate's, one job, one board
    searched = [run for run in doc["board_runs"] if run["phase"] == "search"]
    assert searched and len(searched) % 2 == 0
    for ref, candidate in zip(searched[::2], searched[1::2], strict=True):
        assert (ref["label"], ref["board"], ref["number"] + 1) == ("good", candidate["board"], candidate["number"])
        assert len(candidate["samples"][CASE]) == 8
    assert "SAME" in json.dumps(doc["candidates"]) and "DIFFERENT" in json.dumps(doc["candidates"])


def test_a_1_percent_slowdown_is_not_bisectable_and_names_no_culprit(
        boards: list[VirtualBoardProcess], tmp_path: Path, no_firmware_faults: None) -> None:
    repo, commits = runner_repo(tmp_path / "repo", 40,
                                lambda n: [JITTER] + (["slow,on=exec,factor=1.01"] if n >= 27 else []))
    nights = _nights(boards, repo, commits, tmp_path, **LATENCY)
    code, doc = _bisect(boards, nights, repo, tmp_path / "out", "--filter", CASE)
    answer = doc["answer"]
    assert (code, answer["kind"], answer["culprit"]) == (6, "not_bisectable", None)
    regression = doc["regression"]
    assert abs(regression["shift_ms"]) < regression["noise_ms"]  # the figures, in bisect.json and the message
    assert f"{regression['noise_ms']:.3f} ms" in answer["message"]
    assert list(doc["runs"]["by_phase"]) == ["confirm"]  # before any candidate ran
    built = sorted(p.name for p in (tmp_path / "out" / "builds" / "runner").iterdir() if not p.name.startswith("."))
    assert len(built) == 2  # only the ends were built


def test_commit_12_does_not_build_and_13_is_the_culprit_the_answer_is_the_range_12_13(
        boards: list[VirtualBoardProcess], tmp_path: Path, no_firmware_faults: None) -> None:
    repo, commits = runner_repo(tmp_path / "repo", 20, lambda n: ["miscompute,op=relu"] if n >= 13 else [],
                                broken=(12,))
    nights = _nights(boards, repo, commits, tmp_path)
    code, doc = _bisect(boards, nights, repo, tmp_path / "out")
    answer = doc["answer"]
    assert (code, answer["kind"], answer["culprit"]) == (4, "range", None)
    assert [c["key"] for c in answer["range"]] == [commits[11], commits[12]]
    assert "could not be tested" in answer["message"]
    rows = doc["candidates"]["runner"]
    assert rows[11]["state"] == "skipped" and "failed with exit 1" in rows[11]["reason"]
    assert (rows[10]["state"], rows[12]["state"]) == ("good", "bad")


def test_two_factors_changed_only_the_firmware_matters_isolation_names_it_and_bisects_only_it(
        boards: list[VirtualBoardProcess], tmp_path: Path) -> None:
    builds = firmware_builds(tmp_path / "fw", 8, {n: ["miscompute,op=relu"] for n in range(5, 9)})
    repo, commits = runner_repo(tmp_path / "repo", 6, lambda n: [])
    nights = _nights(boards, repo, commits, tmp_path, firmware=(builds / "build-01", builds / "build-08"))
    boards_yaml = inventory(tmp_path / "boards.yaml", boards[:1], builds / "build-01")
    code, doc = bisect("--good", str(nights[0]), "--bad", str(nights[1]), "--suite", str(SUITE),
                       "--runner-repo", str(repo), "--runner-build", BUILD_COMMAND, "--firmware-builds",
                       str(builds), "--inventory", str(boards_yaml), "--out", str(tmp_path / "out"))
    assert [c["element"] for c in doc["changed"]] == ["firmware", "runner"]
    assert [entry["factors"] for entry in doc["isolation"]] == [["firmware"]]  # cheapest first: enough
    assert doc["isolation"][0]["state"] == "bad"
    assert (code, doc["factor"], doc["answer"]["culprit"]["label"]) == (0, "firmware", "build-05")
    assert list(doc["candidates"]) == ["firmware"]  # only it was searched
    runner_builds = {run["builds"].get("runner", {}).get("key") for run in doc["board_runs"]}
    assert runner_builds == {commits[0], commits[-1]}  # the runner never left its ends
