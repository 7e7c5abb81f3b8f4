"""Latency statistics of a case: what the runner's steady-state samples sum up to in
results.json `latency_ms`. Pure functions, used by the boards that measure (`hil/board/`)
and by the renderings that read them back (`hil/report/stats.py`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

LATENCY_KEYS = ("p50", "p90", "p99", "mean", "trimmed", "std", "min", "max")
"""Summary keys of `latency_ms` computed from the samples, in display order (plus `cv`, `n`
and `avg`, the same number as `mean` under the name records of schema 1 used)."""
SUMMARY_KEYS = (*LATENCY_KEYS, "avg")
"""Every statistic `latency_stats` computes in milliseconds."""
TRIM_FRACTION = 0.10
"""Share of samples dropped at each end for the trimmed mean (the middle 80% is kept)."""


def percentile(ordered: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) of sorted `ordered`, linearly interpolated between
    closest ranks (numpy's default method)."""
    if not ordered:
        raise ValueError("percentile of no samples")
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def trimmed_mean(ordered: Sequence[float], fraction: float = TRIM_FRACTION) -> float:
    """Mean of sorted `ordered` without its lowest and highest `fraction` (rounded down, so
    fewer than 10 samples keep them all)."""
    cut = int(len(ordered) * fraction)
    kept = ordered[cut : len(ordered) - cut]
    return sum(kept) / len(kept)


def std_dev(values: Sequence[float]) -> float:
    """Sample standard deviation (n - 1 in the denominator) of at least two values."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def latency_stats(samples_ms: Sequence[float]) -> dict[str, Any]:
    """The statistics of the per-iteration latencies (ms, rounded to ns): `p50`, `p90`,
    `p99` (interpolated percentiles), `mean` (and `avg`, the same), `trimmed` (mean of the
    middle 80%), `std` (sample standard deviation), `min`, `max`; `cv` = std / mean
    (unitless, 4 digits); `n`; and the `samples` themselves. Non-finite or negative samples
    are dropped; `std` and `cv` need two samples; with none left every statistic is None
    and `n` is 0."""
    kept = [float(s) for s in samples_ms if isinstance(s, (int, float)) and math.isfinite(s) and s >= 0]
    if not kept:
        return {**dict.fromkeys(SUMMARY_KEYS), "cv": None, "n": 0, "samples": []}
    ordered = sorted(kept)
    mean = sum(ordered) / len(ordered)
    std = std_dev(ordered) if len(ordered) > 1 else None
    stats = {
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "mean": mean,
        "trimmed": trimmed_mean(ordered),
        "std": std,
        "min": ordered[0],
        "max": ordered[-1],
        "avg": mean,
    }
    cv = round(std / mean, 4) if std is not None and mean > 0 else None
    return {**{k: (round(v, 6) if v is not None else None) for k, v in stats.items()},
            "cv": cv, "n": len(ordered), "samples": kept}


def stability(stats: dict[str, Any], cv_limit: float, hot: str | None = None) -> dict[str, Any]:
    """Whether the numbers can be trusted: `unstable` True with the `unstable_reasons`
    (CV above `cv_limit`, a board still hot, `hot` saying how), False when there are two or
    more samples and no reason, None when one sample cannot say (and nothing else does);
    plus the `cv_limit` applied."""
    reasons = []
    cv = stats.get("cv")
    if isinstance(cv, (int, float)) and cv > cv_limit:
        reasons.append(f"cv {cv:.3f} above the limit {cv_limit:g}")
    if hot:
        reasons.append(hot)
    if reasons:
        unstable: bool | None = True
    else:
        unstable = False if (stats.get("n") or 0) >= 2 else None
    return {"unstable": unstable, "unstable_reasons": reasons, "cv_limit": cv_limit}


EXACT_MAX_SIZE = 8
"""The Mann-Whitney p-value is exact when a sample has at most this many values and there
are no ties, else the normal approximation (scipy.stats.mannwhitneyu's `method="auto"`)."""


def mann_whitney_p(first: Sequence[float], second: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (Wilcoxon rank-sum) that two samples
    come from one distribution: small enough, and one of them is stochastically larger.
    It assumes nothing of the shape of the distributions (latencies are skewed, with
    outliers). Exact for small samples without ties, else the normal approximation with
    the tie and continuity corrections. ValueError when a sample is empty."""
    m, n = len(first), len(second)
    if not m or not n:
        raise ValueError("Mann-Whitney U of an empty sample")
    pooled = sorted([(value, 0) for value in first] + [(value, 1) for value in second])
    ranks_first = 0.0
    tie_term = 0.0
    index = 0
    while index < len(pooled):
        end = index
        while end + 1 < len(pooled) and pooled[end + 1][0] == pooled[index][0]:
            end += 1
        rank = (index + end) / 2 + 1  # average rank of the tied run
        ranks_first += rank * sum(1 for _, side in pooled[index : end + 1] if side == 0)
        size = end - index + 1
        tie_term += size**3 - size
        index = end + 1
    u = ranks_first - m * (m + 1) / 2
    if min(m, n) <= EXACT_MAX_SIZE and tie_term == 0:
        counts = _u_counts(m, n)
        total = sum(counts)
        at_most = sum(counts[: int(u) + 1]) / total
        at_least = sum(counts[int(u) :]) / total
        return min(1.0, 2 * min(at_most, at_least))
    size = m + n
    variance = m * n / 12 * ((size + 1) - tie_term / (size * (size - 1)))
    if variance <= 0:
        return 1.0  # every value equal
    z = max(abs(u - m * n / 2) - 0.5, 0.0) / math.sqrt(variance)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def _u_counts(m: int, n: int) -> list[int]:
    """How many of the C(m+n, m) orderings give U = 0..m*n (no ties)."""
    table: dict[tuple[int, int], list[int]] = {}
    for i in range(m + 1):
        for j in range(n + 1):
            if i == 0 or j == 0:
                table[i, j] = [1]
                continue
            # the largest value is from the first sample (it beats all j of the second) or not
            with_first = [0] * j + table[i - 1, j]
            without = table[i, j - 1]
            size = max(len(with_first), len(without))
            table[i, j] = [(with_first[k] if k < len(with_first) else 0)
                           + (without[k] if k < len(without) else 0) for k in range(size)]
    return table[m, n]
