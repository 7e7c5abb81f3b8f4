"""The plan of a bisection: confirm, isolate the factor, search it over the boards, confirm the
culprit. Deterministic given its board runs' outcomes (so a journal replays it).

```
confirm     good, bad, good, bad, good, bad on one board: not reproduced (a good run fails or
            a bad one passes; latency: not significantly slower) → stop; a latency shift under
            the noise → not bisectable, before any candidate runs
isolate     (more than one factor changed) each factor's bad build alone into the good
            builds, cheapest first, up to B at once: the one that reproduces is searched; none
            alone → the pairs (two factors that only fail together are reported as such)
search      over the factor's candidates between the last good and the first bad, B split
            points a round (k-ary: log_(B+1) N rounds); a candidate that cannot be built or
            installed, or whose latency stays UNKNOWN after `attempts`, is skipped
confirm     the first bad fails `confirmations` times and its parent passes as often (latency:
  culprit   interleaved on one board, significantly slower by half the regression); runs made
            already count. Passed: the culprit. Else, or skipped candidates between: a range.
```

Wrong numbers: one run per candidate. Latency: each test of a candidate is a job of a good
run and the candidate's run, interleaved on one board (stats.py judges them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hil.bisect import stats
from hil.bisect.answers import CULPRIT, NO_BOARD, NOT_BISECTABLE, NOT_REPRODUCED, RANGE
from hil.bisect.boards import BoardRun, failed
from hil.bisect.candidates import Builds, Candidate, Factor
from hil.latency_plan import LatencyPlan

Rounds = Callable[[list[list[BoardRun]], int], list[dict[str, Any]]]
"""Runs a round of jobs (`BisectBoards.run_round`)."""
Pairs = list[tuple[list[float], list[float]]]
"""A latency test's attempts so far: (the good run's samples, the candidate's) each."""


@dataclass(frozen=True)
class Settings:
    boards: int
    """B: jobs a round (one per usable board)."""
    metric: str
    """`verdict` or `latency`."""
    primary: str | None
    """The latency case (its samples decide)."""
    samples: int = 10
    warmup: int = 1
    attempts: int = 3
    """Latency tests of a candidate before an UNKNOWN one is skipped."""
    confirmations: int = 3


@dataclass
class Answer:
    kind: str
    message: str
    factor: str | None = None
    culprit: Candidate | None = None
    parent: Candidate | None = None
    range: tuple[Candidate, Candidate] | None = None
    confidence: dict[str, Any] = field(default_factory=dict)
    factors: tuple[str, ...] = ()


@dataclass
class Progress:
    """What the bisection learnt, for its report."""

    rounds: dict[str, int] = field(default_factory=dict)
    """Rounds per phase."""
    runs: list[dict[str, Any]] = field(default_factory=list)
    """Every board run's outcome, in the order of the rounds."""
    regression: stats.Regression | None = None
    isolation: list[dict[str, Any]] = field(default_factory=list)
    states: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    """Per factor, per candidate index: `state` (good, bad, skipped, unknown), `reason`,
    the runs and the latency judgement."""
    notes: list[str] = field(default_factory=list)


class Bisection:
    """One bisection's plan over `factors` (the changed ones with candidates, cheapest first)."""

    def __init__(self, factors: list[Factor], settings: Settings, run_round: Rounds) -> None:
        self.factors = {factor.name: factor for factor in factors}
        self.order = [factor.name for factor in factors]
        self.settings = settings
        self._run_round = run_round
        self.progress = Progress()
        self.good = Builds(**{f.name: f.candidates[0] for f in factors})
        self.bad = Builds(**{f.name: f.candidates[-1] for f in factors})
        self._round = 0

    # -- plumbing -------------------------------------------------------------------------------
    @property
    def plan(self) -> LatencyPlan:
        if self.settings.metric == "latency":
            return LatencyPlan(self.settings.warmup, self.settings.samples)
        return LatencyPlan(0, 1)

    def _run(self, key: str, phase: str, builds: Builds, label: str) -> BoardRun:
        return BoardRun(key, phase, builds, label, self.plan)

    def _round_of(self, phase: str, jobs: list[list[BoardRun]]) -> list[dict[str, Any]]:
        self._round += 1
        self.progress.rounds[phase] = self.progress.rounds.get(phase, 0) + 1
        outcomes = self._run_round(jobs, self._round)
        self.progress.runs += [o for o in outcomes if "error" not in o]
        return outcomes

    def _runs_of(self, builds: Builds) -> list[dict[str, Any]]:
        key = builds.record()
        return [o for o in self.progress.runs if o.get("builds") == key]

    def _samples(self, outcomes: list[dict[str, Any]]) -> list[float]:
        return [s for o in outcomes for s in (o.get("samples") or {}).get(self.settings.primary or "", [])]

    # -- the phases -----------------------------------------------------------------------------
    def run(self) -> Answer:
        """The whole bisection: its answer."""
        answer = self._confirm()
        if answer is not None:
            return answer
        if not self.order:
            return Answer(RANGE, "reproduced, but no changed element has candidates to bisect")
        factor = self.order[0]
        if len(self.order) > 1:
            found = self._isolate()
            if isinstance(found, Answer):
                return found
            factor = found
        return self._search(factor)

    def _confirm(self) -> Answer | None:
        """Good and bad, interleaved on one board; an answer when it ends here."""
        count = self.settings.confirmations
        job = []
        for number in range(1, count + 1):
            job += [self._run(f"confirm/good/{number}", "confirm", self.good, "good"),
                    self._run(f"confirm/bad/{number}", "confirm", self.bad, "bad")]
        outcomes = self._round_of("confirm", [job])
        errors = [o["error"] for o in outcomes if "error" in o]
        if errors:
            return Answer(NO_BOARD, f"the confirmation could not run: {errors[0]}")
        good = [o for o in outcomes if o["label"] == "good"]
        bad = [o for o in outcomes if o["label"] == "bad"]
        if self.settings.metric == "verdict":
            good_failed, bad_passed = sum(map(failed, good)), sum(not failed(o) for o in bad)
            if good_failed or bad_passed:
                return Answer(NOT_REPRODUCED, f"not reproduced: the good builds failed {good_failed} of "
                              f"{count} runs and the bad builds passed {bad_passed} of {count}: a flaky "
                              "case is not bisected")
            return None
        regression = stats.regression([self._samples([o]) for o in good], [self._samples([o]) for o in bad])
        self.progress.regression = regression
        figures = (f"{regression.good_median:.3f} ms -> {regression.bad_median:.3f} ms "
                   f"({regression.shift:+.3f} ms), noise {regression.noise:.3f} ms (half a good "
                   f"run's IQR), p = {regression.p:.2g}")
        if not regression.resolvable:
            return Answer(NOT_BISECTABLE, f"not bisectable: the regression is smaller than the noise "
                          f"can resolve: {figures}")
        if not regression.reproduced:
            return Answer(NOT_REPRODUCED, f"not reproduced: the bad builds are not significantly slower: "
                          f"{figures}")
        return None

    def _reproduces(self, builds: Builds, key: str, phase: str, label: str) -> list[BoardRun]:
        """The job that tests `builds`: one run (numbers), or a good run and its run (latency)."""
        runs = [self._run(key, phase, builds, label)]
        if self.settings.metric == "latency":
            runs.insert(0, self._run(key + "/ref", phase, self.good, "good"))
        return runs

    def _state(self, job: list[BoardRun], outcomes: dict[str, dict[str, Any]],
               earlier: Pairs) -> tuple[str, dict[str, Any]]:
        """`good`, `bad`, `unknown` or `error` of a tested job, and the latency judgement."""
        runs = [outcomes[run.key] for run in job]
        errors = [o["error"] for o in runs if "error" in o]
        if errors:
            return "error", {"reason": errors[0]}
        if self.settings.metric == "verdict":
            return ("bad" if failed(runs[-1]) else "good"), {}
        assert self.progress.regression is not None
        earlier.append((self._samples(runs[:1]), self._samples(runs[1:])))
        ref = [s for pair in earlier for s in pair[0]]
        mine = [s for pair in earlier for s in pair[1]]
        bad = self._samples(self._runs_of(self.bad))
        judged = stats.judge(ref, mine, bad, self.progress.regression)
        return judged.state, {"judgement": judged.record()}

    def _test(self, phase: str, tests: list[tuple[str, Builds, str]],
              earlier: dict[str, Pairs]) -> dict[str, tuple[str, dict[str, Any]]]:
        """One round testing `tests` (name, builds, key prefix): each one's state."""
        jobs, names = [], []
        for name, builds, prefix in tests:
            attempt = len(earlier.setdefault(name, [])) + 1
            jobs.append(self._reproduces(builds, f"{prefix}/{attempt}", phase, builds.label()))
            names.append(name)
        outcomes = {o["key"]: o for o in self._round_of(phase, jobs)}
        return {name: self._state(job, outcomes, earlier[name])
                for name, job in zip(names, jobs, strict=True)}

    def _isolate(self) -> str | Answer:
        """The factor whose bad build alone reproduces the regression (cheapest first)."""
        def last(name: str) -> Candidate:
            return self.factors[name].candidates[-1]

        singles = [((name,), self.good.swap(name, last(name))) for name in self.order]
        pairs = [((a, b), self.good.swap(a, last(a)).swap(b, last(b)))
                 for i, a in enumerate(self.order) for b in self.order[i + 1:]]
        for group in (singles, pairs if len(self.order) > 2 else []):
            found = self._first_reproducing(group)
            if found is not None:
                if len(found) == 1:
                    return found[0]
                return Answer(RANGE, f"{' and '.join(found)} fail only together: not bisected",
                              factors=found)
        together = tuple(self.order)
        return Answer(RANGE, f"{' and '.join(together)} fail only together (no one or two alone "
                      "reproduce): not bisected", factors=together)

    def _first_reproducing(self, group: list[tuple[tuple[str, ...], Builds]]) -> tuple[str, ...] | None:
        earlier: dict[str, Pairs] = {}
        left = list(group)
        while left:
            batch, left = left[:self.settings.boards], left[self.settings.boards:]
            pending = batch
            for _ in range(self.settings.attempts):
                states = self._test("isolate", [("+".join(names), builds, f"isolate/{'+'.join(names)}")
                                                for names, builds in pending], earlier)
                for names, _builds in pending:
                    state, detail = states["+".join(names)]
                    self.progress.isolation.append({"factors": list(names), "state": state, **detail})
                reproducing = [names for names, _ in batch if states.get("+".join(names), ("",))[0] == "bad"]
                if reproducing:
                    return reproducing[0]
                pending = [(names, builds) for names, builds in pending
                           if states["+".join(names)][0] == "unknown"]
                if not pending:
                    break
        return None

    # -- the search ---------------------------------------------------------------------------
    def _search(self, name: str) -> Answer:
        factor = self.factors[name]
        candidates = factor.candidates
        states = self.progress.states.setdefault(name, {})
        states[0] = {"state": "good", "reason": "the good end"}
        states[len(candidates) - 1] = {"state": "bad", "reason": "the bad end"}
        earlier: dict[str, Pairs] = {}
        while True:
            lo, hi = self._bounds(states)
            pending = [i for i, s in states.items() if s["state"] == "unknown" and lo < i < hi]
            picks = self._split_points(factor, states, lo, hi, self.settings.boards - len(pending))
            tests = pending + picks
            if not tests:
                break
            results = self._test("search", [(str(i), self.good.swap(name, candidates[i]),
                                             f"search/{name}/{candidates[i].key}") for i in tests], earlier)
            for index in tests:
                state, detail = results[str(index)]
                attempts = len(earlier.get(str(index), []))
                if state == "unknown" and attempts >= self.settings.attempts:
                    state, detail = "skipped", {**detail, "reason": f"UNKNOWN after {attempts} attempt(s)"}
                if state == "error":
                    state = "skipped"
                states[index] = {"state": state, **detail}
        lo, hi = self._bounds(states)
        if any(s["state"] == "good" for i, s in states.items() if i > hi):
            self.progress.notes.append(f"{name}: a candidate after the first bad one passed: the "
                                       "regression may come and go (more than one culprit, or flaky)")
        if hi - lo > 1:
            first, last = candidates[lo + 1], candidates[hi]
            return Answer(RANGE, f"{name}: the first bad build is one of {first.label} .. {last.label}: "
                          f"{hi - lo - 1} candidate(s) between could not be tested", factor=name,
                          range=(first, last), parent=candidates[lo])
        return self._confirm_culprit(name, candidates[lo], candidates[hi])

    @staticmethod
    def _bounds(states: dict[int, dict[str, Any]]) -> tuple[int, int]:
        """The last good before the first bad, and the first bad."""
        hi = min(i for i, s in states.items() if s["state"] == "bad")
        lo = max(i for i, s in states.items() if s["state"] == "good" and i < hi)
        return lo, hi

    def _split_points(self, factor: Factor, states: dict[int, dict[str, Any]], lo: int, hi: int,
                      count: int) -> list[int]:
        """Up to `count` untested candidates between lo and hi, evenly spread (k-ary search);
        one that cannot be prepared is skipped and another taken."""
        picks: list[int] = []
        while len(picks) < count:
            free = [i for i in range(lo + 1, hi) if i not in states and i not in picks]
            if not free:
                break
            slot = len(picks) + 1
            target = lo + (hi - lo) * slot / (count + 1)
            index = min(free, key=lambda i: (abs(i - target), i))
            reason = factor.prepare(factor.candidates[index])
            if reason is not None:
                states[index] = {"state": "skipped", "reason": reason}
                continue
            picks.append(index)
        return sorted(picks)

    def _confirm_culprit(self, name: str, parent: Candidate, culprit: Candidate) -> Answer:
        """The culprit fails `confirmations` times and its parent passes as often (latency:
        significantly slower by half the regression), interleaved on one board."""
        count = self.settings.confirmations
        parent_builds, culprit_builds = self.good.swap(name, parent), self.good.swap(name, culprit)
        have_parent, have_culprit = len(self._runs_of(parent_builds)), len(self._runs_of(culprit_builds))
        job = []
        for number in range(max(count - have_parent, count - have_culprit, 0)):
            if have_parent + number < count:
                job.append(self._run(f"culprit/{parent_builds.key}/{number + 1}", "culprit", parent_builds,
                                     f"parent {parent.label}"))
            if have_culprit + number < count:
                job.append(self._run(f"culprit/{culprit_builds.key}/{number + 1}", "culprit", culprit_builds,
                                     f"culprit {culprit.label}"))
        if job:
            outcomes = self._round_of("culprit", [job])
            errors = [o["error"] for o in outcomes if "error" in o]
            if errors:
                return Answer(RANGE, f"{name}: the first bad build is {culprit.label}, but its confirmation "
                              f"could not run ({errors[0]}): not named", factor=name,
                              range=(culprit, culprit), parent=parent)
        parents, culprits = self._runs_of(parent_builds), self._runs_of(culprit_builds)
        if self.settings.metric == "verdict":
            failing, passing = sum(map(failed, culprits)), sum(not failed(o) for o in parents)
            confidence = {"culprit_failed": failing, "culprit_runs": len(culprits),
                          "parent_passed": passing, "parent_runs": len(parents)}
            confirmed = failing == len(culprits) >= count and passing == len(parents) >= count
            said = (f"{culprit.label} failed {failing} of {len(culprits)} runs, its parent "
                    f"{parent.label} passed {passing} of {len(parents)}")
        else:
            assert self.progress.regression is not None
            judged = stats.judge(self._samples(parents), self._samples(culprits),
                                 self._samples(self._runs_of(self.bad)), self.progress.regression)
            confidence = {"p": judged.p_good, "shift_ms": judged.shift, "share_of_regression": judged.share,
                          "culprit_runs": len(culprits), "parent_runs": len(parents)}
            confirmed = judged.state == "bad" and min(len(culprits), len(parents)) >= count
            said = (f"{culprit.label} is {judged.shift:+.3f} ms ({judged.share:.0%} of the regression) "
                    f"slower than its parent {parent.label}, p = {judged.p_good:.2g} "
                    f"({len(culprits)} and {len(parents)} runs interleaved)")
        if not confirmed:
            return Answer(RANGE, f"{name}: {culprit.label} looked like the first bad build but did not pass "
                          f"its confirmation ({said}): not named", factor=name,
                          range=(culprit, culprit), parent=parent, confidence=confidence)
        return Answer(CULPRIT, f"{name}: the culprit is {culprit.label}: {said}", factor=name,
                      culprit=culprit, parent=parent, confidence=confidence)
