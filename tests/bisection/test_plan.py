"""The bisection's plan and statistics without boards: its rounds over B boards, skipped
candidates, the latency judgement, the journal after a torn write, the tuple's diff. The board
runs' outcomes here are computed from a known culprit (what a board run would say of it); the
same plan on virtual boards: test_firmware.py, test_runner.py, test_python.py."""

from __future__ import annotations

import json
import math
import random
import zlib
from pathlib import Path
from typing import Any

import pytest

from hil.bisect import stats
from hil.bisect.answers import CULPRIT, NOT_BISECTABLE, NOT_REPRODUCED, RANGE
from hil.bisect.boards import BoardRun
from hil.bisect.candidates import Candidate
from hil.bisect.journal import Journal
from hil.bisect.search import Bisection, Settings
from hil.bisect.tuple import changes, read_tuple
from hil.errors import UsageError


class Builds:
    """A factor of `count` candidates; `unbuildable` cannot be prepared."""

    def __init__(self, name: str, count: int, unbuildable: tuple[int, ...] = ()) -> None:
        self.name = name
        self.source = f"--{name}"
        self.candidates = [Candidate(name, i, f"{name}-{i:03d}", f"{name} {i}") for i in range(count)]
        self.unbuildable = unbuildable
        self.prepared: list[int] = []

    def prepare(self, candidate: Candidate) -> str | None:
        self.prepared.append(candidate.index)
        return "exit 125" if candidate.index in self.unbuildable else None


class Verdicts:
    """Board runs whose verdict follows `bad(builds)`; counts rounds and the jobs' sizes."""

    def __init__(self, bad: Any, flaky: random.Random | None = None) -> None:
        self.bad = bad
        self.flaky = flaky
        self.rounds: list[list[int]] = []
        self.number = 0

    def __call__(self, jobs: list[list[BoardRun]], round_number: int) -> list[dict[str, Any]]:
        self.rounds.append([len(job) for job in jobs])
        outcomes = []
        for job in jobs:
            for run in job:
                self.number += 1
                failing = self.bad(run.builds) if self.flaky is None else self.flaky.random() < 0.3
                outcomes.append({"key": run.key, "number": self.number, "phase": run.phase,
                                 "label": run.label, "builds": run.builds.record(),
                                 "verdicts": {"s.fp32.c": "FAIL_MISMATCH" if failing else "PASS"}})
        return outcomes


def _culprit_at(name: str, index: int) -> Any:
    return lambda builds: (c := builds.of(name)) is not None and c.index >= index


@pytest.mark.parametrize(("boards", "search_rounds"), [(1, 5), (3, 3)])
def test_32_builds_take_log_base_b_plus_1_rounds_and_at_most_17_runs_on_one_board(
        boards: int, search_rounds: int) -> None:
    firmware = Builds("firmware", 32)
    runs = Verdicts(_culprit_at("firmware", 18))
    bisection = Bisection([firmware], Settings(boards=boards, metric="verdict", primary=None), runs)
    answer = bisection.run()
    assert (answer.kind, answer.culprit.label, answer.parent.label) == (CULPRIT, "firmware 18", "firmware 17")
    assert bisection.progress.rounds["search"] <= search_rounds
    assert max(map(len, runs.rounds[1:-1])) <= boards  # B candidates a round
    if boards == 1:
        assert runs.number <= 6 + 5 + 6
    assert answer.confidence == {"culprit_failed": 3, "culprit_runs": 3, "parent_passed": 3, "parent_runs": 3}


def test_a_thousand_candidates_on_seven_boards_take_log8_rounds() -> None:
    factor = Builds("runner", 1001)
    for culprit in (1, 500, 999, 1000):
        runs = Verdicts(_culprit_at("runner", culprit))
        bisection = Bisection([factor], Settings(boards=7, metric="verdict", primary=None), runs)
        answer = bisection.run()
        assert answer.culprit is not None and answer.culprit.index == culprit
        assert bisection.progress.rounds["search"] <= math.ceil(math.log(1000, 8)) + 1


def test_an_unbuildable_candidate_before_the_culprit_makes_the_answer_a_range() -> None:
    factor = Builds("runner", 20, unbuildable=(11,))
    answer = Bisection([factor], Settings(boards=1, metric="verdict", primary=None),
                       Verdicts(_culprit_at("runner", 12))).run()
    assert answer.kind == RANGE and answer.culprit is None
    assert [c.label for c in answer.range] == ["runner 11", "runner 12"]
    assert "could not be tested" in answer.message


def test_a_flaky_case_is_not_reproduced_and_nothing_else_runs() -> None:
    factor = Builds("firmware", 8)
    runs = Verdicts(None, flaky=random.Random(4))
    answer = Bisection([factor], Settings(boards=1, metric="verdict", primary=None), runs).run()
    assert answer.kind == NOT_REPRODUCED and answer.culprit is None
    assert runs.rounds == [[6]] and factor.prepared == []


def test_two_factors_that_fail_only_together_are_reported_as_such() -> None:
    firmware, runner = Builds("firmware", 4), Builds("runner", 4)
    both = lambda b: b.of("firmware").index == 3 and b.of("runner").index == 3  # noqa: E731
    answer = Bisection([firmware, runner], Settings(boards=1, metric="verdict", primary=None),
                       Verdicts(both)).run()
    assert answer.kind == RANGE and answer.factors == ("firmware", "runner")
    assert "fail only together" in answer.message


def _latency(center: float, count: int, seed: int, rel: float = 0.05) -> list[float]:
    draw = random.Random(seed)
    return [center * (1 + rel * abs(draw.gauss(0, 1))) for _ in range(count)]


def test_latency_judgement_same_different_unknown() -> None:
    good, bad = _latency(2.0, 30, 1), _latency(2.4, 30, 2)
    target = stats.regression([good[:10], good[10:20], good[20:]], [bad[:10], bad[10:20], bad[20:]])
    assert target.reproduced and target.resolvable
    assert stats.judge(_latency(2.0, 10, 3), _latency(2.0, 10, 4), bad, target).state == "good"
    judged = stats.judge(_latency(2.0, 10, 5), _latency(2.4, 10, 6), bad, target)
    assert (judged.state, judged.vs_good) == ("bad", stats.DIFFERENT) and judged.p_good < 0.01
    assert stats.judge(_latency(2.0, 3, 7), _latency(2.2, 3, 8), bad, target).state == "unknown"
    small = stats.regression([_latency(2.0, 10, 9 + i) for i in range(3)], [_latency(2.02, 10, 19 + i) for i in range(3)])
    assert not small.resolvable and small.noise > small.shift  # a 1 % shift under a 5 % jitter
    disturbed = stats.regression([good[:10], good[10:20], [s * 1.6 for s in good[20:]]], [bad[:10], bad[10:20], bad[20:]])
    assert disturbed.resolvable  # a run the host's load slowed does not pass for the noise


def test_a_latency_shift_under_the_noise_is_not_bisectable_before_any_candidate() -> None:
    factor = Builds("runner", 40)

    def run_round(jobs: list[list[BoardRun]], number: int) -> list[dict[str, Any]]:
        return [{"key": run.key, "number": 0, "phase": run.phase, "label": run.label,
                 "builds": run.builds.record(), "verdicts": {"s.fp32.c": "PASS"},
                 "samples": {"s.fp32.c": _latency(2.0 * (1.01 if run.label == "bad" else 1.0), 10, zlib.crc32(run.key.encode()))}}
                for job in jobs for run in job]

    bisection = Bisection([factor], Settings(boards=1, metric="latency", primary="s.fp32.c"), run_round)
    answer = bisection.run()
    assert answer.kind == NOT_BISECTABLE and "smaller than the noise" in answer.message
    assert factor.prepared == [] and list(bisection.progress.rounds) == ["confirm"]


def test_the_journal_replays_completed_runs_and_drops_a_torn_last_line(tmp_path: Path) -> None:
    identity = {"good": "a", "bad": "b"}
    journal = Journal(tmp_path, identity)
    journal.add({"key": "confirm/good/1", "number": 1})
    journal.add({"key": "confirm/bad/1", "number": 2})
    journal.close()
    with (tmp_path / "bisect.journal").open("ab") as stream:
        stream.write(b'{"run": {"key": "confirm/good/2", "num')  # killed in the middle of a write
    again = Journal(tmp_path, identity)
    assert list(again.runs) == ["confirm/good/1", "confirm/bad/1"] and again.resumed
    again.add({"key": "confirm/good/2", "number": 3})
    again.close()
    lines = (tmp_path / "bisect.journal").read_text().splitlines()
    assert [json.loads(line).get("run", {}).get("key") for line in lines[1:]] == [
        "confirm/good/1", "confirm/bad/1", "confirm/good/2"]
    with pytest.raises(UsageError, match="holds another bisection"):
        Journal(tmp_path, {"good": "a", "bad": "c"})


def test_the_tuple_and_what_changed_with_its_sources() -> None:
    def document(build: str, commit: str, executorch: str, version: int = 5) -> dict[str, Any]:
        return {"version": version, "run": {
            "hil": "0.1.0", "sdk": None, "executorch_git": "abc", "suites": {"s": {"digest": "d1", "cases": 3}},
            "packages": {"torch": "2.14.1", "executorch": executorch},
            "boards": [{"name": "a", "build": {"after": build}, "runner": {"commit": commit, "sha256": "f" * 64}},
                       {"name": "x", "error": "not usable"}]}, "cases": []}

    good = read_tuple(document("B1", "c1", "1.5.1"))
    bad = read_tuple(document("B2", "c1", "1.6.0.dev20261101"))
    found = changes(good, bad, {"firmware": "--firmware-builds"})
    assert [(c.element, c.source) for c in found] == [("firmware", "--firmware-builds"), ("python", None)]
    assert found[0].record()["bisected"] and not found[1].record()["bisected"]
    older = read_tuple(document("B1", "c1", "1.5.1", version=4))
    assert older.notes and "schema 4" in older.notes[0]


def test_what_is_bisected_is_what_hil_compare_calls_a_regression() -> None:
    """Wrong numbers first (every such case together); else the latency case that grew most,
    the others listed; a case missing from BAD is listed, never bisected."""
    from hil.bisect.selection import select
    from hil.latency import latency_stats
    from tests.report import case, sample_results

    def night(verdicts: dict[str, str], scale: dict[str, float]) -> dict[str, Any]:
        document = sample_results()
        document["cases"] = [case("ops", "fp32", name, verdict, latency_ms=latency_stats(
            _latency(2.0 * scale.get(name, 1.0), 20, zlib.crc32(name.encode()), rel=0.01))) for name, verdict in verdicts.items()]
        return document

    good = night({"a": "PASS", "b": "PASS", "c": "PASS", "gone": "PASS"}, {})
    bad = night({"a": "FAIL_MISMATCH", "b": "PASS", "c": "PASS"}, {"b": 1.3, "c": 1.5})
    numbers = select(good, bad, [], 0.10, 0.02)
    assert (numbers.metric, numbers.keys) == ("verdict", ["ops.fp32.a"])
    assert set(numbers.listed) == {"ops.fp32.b", "ops.fp32.c"} and numbers.missing == ["ops.fp32.gone"]
    latency = select(good, bad, ["b", "c"], 0.10, 0.02)
    assert (latency.metric, latency.primary) == ("latency", "ops.fp32.c") and list(latency.listed) == ["ops.fp32.b"]
    with pytest.raises(UsageError, match="nothing to bisect"):
        select(good, good, [], 0.10, 0.02)
