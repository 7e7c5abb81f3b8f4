"""Latency statistics of a case: what the runner's steady-state samples sum up to in
results.json `latency_ms`. Pure functions, used by the boards that measure (`hil/board/`)
and by the renderings that read them back (`hil/report/stats.py`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

LATENCY_KEYS = ("avg", "trimmed", "p50", "p90", "min", "max")
"""Summary keys of `latency_ms` computed from the samples, in display order (plus `n`)."""
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


def latency_stats(samples_ms: Sequence[float]) -> dict[str, Any]:
    """`avg`, `trimmed` (mean of the middle 80%), `p50`, `p90`, `min`, `max` (ms, rounded to
    µs) and `n` of the per-iteration latencies, plus the `samples` themselves. Non-finite or
    negative samples are dropped; with none left every statistic is None and `n` is 0."""
    kept = [float(s) for s in samples_ms if isinstance(s, (int, float)) and math.isfinite(s) and s >= 0]
    if not kept:
        return {**dict.fromkeys(LATENCY_KEYS), "n": 0, "samples": []}
    ordered = sorted(kept)
    stats = {
        "avg": sum(ordered) / len(ordered),
        "trimmed": trimmed_mean(ordered),
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "min": ordered[0],
        "max": ordered[-1],
    }
    return {**{k: round(v, 6) for k, v in stats.items()}, "n": len(ordered), "samples": kept}
