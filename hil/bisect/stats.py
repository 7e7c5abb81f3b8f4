"""The statistics of a bisection: is a candidate the good tuple's, the bad one's, or unknown.

Wrong numbers are deterministic: a run's verdicts say it. Latency is noisy: each sample is a
fresh runner launch's time, and a candidate is judged by its samples against the good
tuple's and the bad tuple's, as Pinpoint (Chromium) judges changes: the lower p-value of a
two-sided Mann-Whitney U test (`hil.latency.mann_whitney_p`, the one `hil compare` uses) and
a two-sample Kolmogorov-Smirnov test (scipy) answers

- DIFFERENT when it is below ALPHA (`hil compare`'s significance level),
- SAME when it is not, and the samples differ significantly from the other end,
- UNKNOWN otherwise (more attempts, up to a cap; then the candidate is skipped).

A candidate is bad when it differs from the good tuple and its shift (median against the
good tuple's) is at least half the good->bad shift; good when its shift is smaller and it
differs from the bad tuple. Before any candidate runs, a regression smaller than the noise
can resolve is not bisectable: the confirmation's shift, whichever its sign (a 1 % slowdown
under a 4 % noise may measure as a small speed-up), below half the interquartile range of a
good run's samples (NOISE_SHARE; the median over the confirmation's good runs, so that a run
a burst of the host's load disturbed does not pass for the measurement's own noise).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from hil.latency import mann_whitney_p, percentile
from hil.report.compare import ALPHA

DIFFERENT, SAME, UNKNOWN = "DIFFERENT", "SAME", "UNKNOWN"
BAD_SHARE = 0.5
"""A candidate whose shift is at least this share of the good->bad shift is bad."""
NOISE_SHARE = 0.5
"""A good->bad shift below this share of a good run's interquartile range is noise."""
MIN_SAMPLES = 3
"""Fewer samples than this on a side test nothing (UNKNOWN)."""


def ks_p(first: Sequence[float], second: Sequence[float]) -> float:
    """Two-sided p-value of the two-sample Kolmogorov-Smirnov test (scipy)."""
    from scipy.stats import ks_2samp

    return float(ks_2samp(list(first), list(second)).pvalue)


def p_value(first: Sequence[float], second: Sequence[float]) -> float:
    """The lower of the Mann-Whitney and Kolmogorov-Smirnov p-values (1.0 with too few)."""
    if min(len(first), len(second)) < MIN_SAMPLES:
        return 1.0
    return min(mann_whitney_p(first, second), ks_p(first, second))


def compare(first: Sequence[float], second: Sequence[float]) -> str:
    """DIFFERENT when the samples differ significantly, else SAME (UNKNOWN with too few)."""
    if min(len(first), len(second)) < MIN_SAMPLES:
        return UNKNOWN
    return DIFFERENT if p_value(first, second) < ALPHA else SAME


def iqr(samples: Sequence[float]) -> float:
    """Interquartile range (p75 - p25)."""
    ordered = sorted(samples)
    return percentile(ordered, 75) - percentile(ordered, 25)


@dataclass(frozen=True)
class Regression:
    """The good->bad latency shift the confirmation measured, and whether it can be bisected."""

    good_median: float
    bad_median: float
    noise: float
    """Half a good run's samples' interquartile range (the median over the good runs): the
    smallest shift that can be resolved."""
    p: float
    """Good against bad (the lower of the two tests' p-values)."""
    good_samples: int
    bad_samples: int

    @property
    def shift(self) -> float:
        return self.bad_median - self.good_median

    @property
    def reproduced(self) -> bool:
        """Bad is slower, significantly."""
        return self.shift > 0 and self.p < ALPHA

    @property
    def resolvable(self) -> bool:
        """The shift, whichever its sign, is at least the noise: below it, the confirmation
        cannot tell a small regression from none."""
        return abs(self.shift) >= self.noise

    def record(self) -> dict[str, float | int | bool]:
        return {"good_median_ms": self.good_median, "bad_median_ms": self.bad_median,
                "shift_ms": self.shift, "shift": self.shift / self.good_median if self.good_median else None,
                "noise_ms": self.noise, "run_iqr_ms": 2 * self.noise, "p": self.p,
                "good_samples": self.good_samples, "bad_samples": self.bad_samples,
                "reproduced": self.reproduced, "resolvable": self.resolvable}


def regression(good_runs: Sequence[Sequence[float]], bad_runs: Sequence[Sequence[float]]) -> Regression:
    """The shift between the confirmation's good and bad samples (each a list per run), and
    the noise."""
    good = [s for run in good_runs for s in run]
    bad = [s for run in bad_runs for s in run]
    noise = NOISE_SHARE * statistics.median(iqr(run) for run in good_runs if run)
    return Regression(statistics.median(good), statistics.median(bad), noise, p_value(good, bad),
                      len(good), len(bad))


@dataclass(frozen=True)
class Judgement:
    """A candidate's latency against the good and bad tuples."""

    state: str
    """`good`, `bad` or `unknown`."""
    vs_good: str
    """SAME / DIFFERENT / UNKNOWN against the good tuple's samples."""
    p_good: float
    p_bad: float
    shift: float
    """The candidate's median minus the good tuple's (ms)."""
    share: float
    """`shift` as a share of the good->bad shift."""

    def record(self) -> dict[str, float | str]:
        return {"state": self.state, "vs_good": self.vs_good, "p_good": self.p_good,
                "p_bad": self.p_bad, "shift_ms": self.shift, "share_of_regression": self.share}


def judge(good: Sequence[float], candidate: Sequence[float], bad: Sequence[float],
          target: Regression) -> Judgement:
    """A candidate's samples against the good tuple's (run beside it on its board) and the
    bad tuple's (module docstring)."""
    p_good, p_bad = p_value(good, candidate), p_value(candidate, bad)
    shift = statistics.median(candidate) - statistics.median(good)
    share = shift / target.shift if target.shift else 0.0
    vs_good = UNKNOWN if min(len(good), len(candidate)) < MIN_SAMPLES else (
        DIFFERENT if p_good < ALPHA else SAME)
    if share >= BAD_SHARE and p_good < ALPHA:
        state = "bad"
    elif share < BAD_SHARE and p_bad < ALPHA:
        state, vs_good = "good", (vs_good if vs_good == DIFFERENT else SAME)
    else:
        state, vs_good = "unknown", UNKNOWN
    return Judgement(state, vs_good, p_good, p_bad, shift, share)
