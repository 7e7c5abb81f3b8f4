"""How renderings read a case's measurements back: `latency_ms` (statistics from
`hil/latency.py`), `memory` and `board_state` (hil/report/results.schema.json)."""

from __future__ import annotations

import math
from typing import Any

from hil.latency import LATENCY_KEYS

PREFIX_KEYS = ("init", "load", "first")
"""The runner's one-off times, shown before the sample statistics."""


def latency_of(case: dict[str, Any], key: str) -> float | None:
    """`case.latency_ms[key]` as a float, or None when the case has no such number (older
    records carry only `init`/`load`/`first`/`avg`). `mean` falls back on `avg` (schema 1)."""
    latency = case.get("latency_ms") or {}
    value = latency.get(key)
    if value is None and key == "mean":
        value = latency.get("avg")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def samples_of(case: dict[str, Any]) -> list[float]:
    """The case's steady-state samples (ms): finite, non-negative numbers only."""
    samples = (case.get("latency_ms") or {}).get("samples") or []
    return [float(s) for s in samples
            if isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and s >= 0]


def sample_count(case: dict[str, Any]) -> int | None:
    """`latency_ms.n`, None when absent."""
    count = (case.get("latency_ms") or {}).get("n")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def is_unstable(case: dict[str, Any]) -> bool:
    """The record says its latency is not to be trusted (`latency_ms.unstable`)."""
    return (case.get("latency_ms") or {}).get("unstable") is True


def unstable_reasons(case: dict[str, Any]) -> list[str]:
    """Why the case's latency is unstable (CV above the limit, a hot board)."""
    reasons = (case.get("latency_ms") or {}).get("unstable_reasons") or []
    return [str(reason) for reason in reasons]


def format_latency(case: dict[str, Any]) -> str:
    """The case's latency numbers as `init 0.100 ... p50 0.405 ... cv 0.021 n 30` (the keys
    it has, in a fixed order), then `UNSTABLE (why)` when it is; empty when it has none."""
    latency = case.get("latency_ms") or {}
    keys = [*PREFIX_KEYS, *LATENCY_KEYS]
    if "mean" not in latency:
        keys[keys.index("mean")] = "avg"  # schema 1 records
    parts = [f"{key} {value:.3f}" for key in keys if (value := latency_of(case, key)) is not None]
    cv = latency_of(case, "cv")
    if cv is not None:
        parts.append(f"cv {cv:.3f}")
    count = sample_count(case)
    if count is not None:
        parts.append(f"n {count}")
    if is_unstable(case):
        parts.append(f"UNSTABLE ({'; '.join(unstable_reasons(case)) or 'see results.json'})")
    return " ".join(parts)


def _kib(size: Any) -> str:
    return f"{size / 1024:.1f} KiB" if isinstance(size, int) and not isinstance(size, bool) else "-"


def format_memory(case: dict[str, Any]) -> str:
    """`planned 11.1 KiB constants 0.9 KiB delegates 1.1 KiB peak RSS 743.3 MiB`; empty
    when the record has no memory block."""
    memory = case.get("memory") or {}
    if not memory:
        return ""
    parts = [
        f"planned {_kib(memory.get('planned_bytes'))}",
        f"constants {_kib(memory.get('constant_bytes'))}",
        f"delegates {_kib(memory.get('delegate_bytes'))}",
    ]
    peak = memory.get("peak_rss_kib")
    parts.append(f"peak RSS {peak / 1024:.1f} MiB" if isinstance(peak, int) else "peak RSS not measured")
    return " ".join(parts)


def format_board_state(case: dict[str, Any]) -> str:
    """`hottest 38.0 °C (BIG), waited 0 s; policy0 schedutil 1950 MHz ...`; empty when the
    board's state was not read."""
    state = case.get("board_state") or {}
    if not state:
        return ""
    parts = []
    if isinstance(state.get("hottest_c"), (int, float)):
        parts.append(f"hottest {state['hottest_c']:.1f} °C ({state.get('hottest_zone')})")
    cooldown = state.get("cooldown") or {}
    if cooldown:
        note = "" if cooldown.get("cooled") is not False else " STILL HOT"
        parts.append(f"cool-down waited {cooldown.get('waited_s')} s (threshold "
                     f"{cooldown.get('threshold_c')} °C){note}")
    for name, policy in (state.get("cpufreq") or {}).items():
        cur = policy.get("cur_khz")
        clock = f"{cur / 1000:.0f} MHz" if isinstance(cur, int) else "?"
        parts.append(f"{name} {policy.get('governor') or '?'} {clock}")
    return "; ".join(parts)


SUMMARY_COLUMNS = ("init", "load", "first", "p50", "p90", "p99", "mean", "trimmed", "std", "cv",
                   "n", "program KiB", "peak RSS MiB", "stable")
"""Columns of the step summary's latency table (ms unless named), after case and board."""


def summary_cells(case: dict[str, Any]) -> list[str]:
    """The case's cells under SUMMARY_COLUMNS (`-` where not measured); `stable` is `yes`,
    `UNSTABLE: why`, or `-` when one sample cannot tell."""
    cells = [_number(latency_of(case, key), ".3f") for key in SUMMARY_COLUMNS[:9]]
    cells.append(_number(latency_of(case, "cv"), ".3f"))
    count = sample_count(case)
    cells.append(str(count) if count is not None else "-")
    memory = case.get("memory") or {}
    program = memory.get("program_bytes")
    peak = memory.get("peak_rss_kib")
    cells.append(_number(program / 1024 if isinstance(program, int) else None, ".1f"))
    cells.append(_number(peak / 1024 if isinstance(peak, int) else None, ".1f"))
    unstable = (case.get("latency_ms") or {}).get("unstable")
    if unstable is True:
        cells.append("UNSTABLE: " + "; ".join(unstable_reasons(case)))
    else:
        cells.append("yes" if unstable is False else "-")
    return cells


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
