"""How renderings read a case's latency record back (the statistics themselves are
`hil/latency.py`)."""

from __future__ import annotations

import math
from typing import Any

from hil.latency import LATENCY_KEYS


def latency_of(case: dict[str, Any], key: str) -> float | None:
    """`case.latency_ms[key]` as a float, or None when the case has no such number (older
    records carry only `init`/`load`/`first`/`avg`)."""
    value = (case.get("latency_ms") or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def format_latency(case: dict[str, Any]) -> str:
    """The case's latency numbers as `avg 0.412 p50 0.405 ... n 10` (the keys it has, in a
    fixed order); empty when it has none."""
    latency = case.get("latency_ms") or {}
    parts = [
        f"{key} {value:.3f}"
        for key in ("init", "load", "first", *LATENCY_KEYS)
        if (value := latency_of(case, key)) is not None
    ]
    if isinstance(latency.get("n"), int) and not isinstance(latency.get("n"), bool):
        parts.append(f"n {latency['n']}")
    return " ".join(parts)
