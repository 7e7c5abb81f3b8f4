"""How a case's latency is measured: warm-ups, samples, cool-down and the noise limit.

A plan comes from, first match wins: `--iterations` / `--warmup` given on the command line
(for every case); the suite's own declaration (a manifest's top-level
`latency: {warmup: 3, iterations: 20}`); the profile named by `--latency` (default `quick`).
Keys a declaration leaves out come from the `--latency` profile.

| profile | warm-ups | samples | cool-down wait | for |
|---|---|---|---|---|
| `quick` | 0 | 1 | up to 30 s at >= 50 °C | pull-request checks at today's speed: no spread |
| `stable` | 3 | 30 | up to 120 s at >= 45 °C | nightly runs and `hil compare`: a CV, p90/p99 |

Every sample is one runner invocation (`hil/board/adb.py`), so samples cost a process start
each on the board: 30 keeps a whole nightly suite within minutes while giving a CV, a p90
between samples and a p99 (with 30 samples it lies between the two largest: the tail, not a
precise quantile) and enough samples for `hil compare`'s rank test to find a shift of a few
percent (TFLite's `benchmark_model` defaults to 50 runs in one process).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from hil.document import load_document
from hil.errors import UsageError, Where, unknown_name

CV_LIMIT = 0.10
"""A case whose samples' coefficient of variation is above this is `unstable`."""


@dataclass(frozen=True)
class NoiseControl:
    """What the board is checked for before a case, and when its numbers are not trusted."""

    cooldown_c: float = 50.0
    """Wait before the case while the hottest thermal zone is at or above this (°C)."""
    cooldown_max_s: int = 30
    """...but no longer than this (seconds); 0 reads and records without waiting."""
    cv_limit: float = CV_LIMIT
    """Samples whose CV (std / mean) is above this make the case `unstable`."""


@dataclass(frozen=True)
class LatencyPlan:
    """The runner invocations of one case and the noise control around them."""

    warmup: int = 0
    """`--warm_up` of every invocation: untimed runs before its timed 1st run."""
    iterations: int = 1
    """Runner invocations, one steady-state sample each."""
    noise: NoiseControl = NoiseControl()


PROFILES: dict[str, LatencyPlan] = {
    "quick": LatencyPlan(0, 1, NoiseControl(cooldown_c=50.0, cooldown_max_s=30)),
    "stable": LatencyPlan(3, 30, NoiseControl(cooldown_c=45.0, cooldown_max_s=120)),
}
DEFAULT_PROFILE = "quick"
_DECLARED_KEYS = {"warmup": int, "iterations": int, "cooldown_c": float, "cooldown_max_s": int,
                  "cv_limit": float}
_MINIMUM = {"warmup": 0, "iterations": 1, "cooldown_c": 0, "cooldown_max_s": 0, "cv_limit": 0}


def profile_named(name: str) -> LatencyPlan:
    """The plan of `--latency NAME`; UsageError for an unknown name."""
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(f"--latency: unknown profile {name!r} (one of {', '.join(PROFILES)})") from None


def apply_declaration(base: LatencyPlan, declared: dict[str, Any]) -> LatencyPlan:
    """`base` with the keys a (validated) declaration sets."""
    noise = {k: v for k, v in declared.items() if k in ("cooldown_c", "cooldown_max_s", "cv_limit")}
    plan = replace(base, noise=replace(base.noise, **noise))
    return replace(plan, **{k: v for k, v in declared.items() if k in ("warmup", "iterations")})


def parse_declaration(where: Where, raw: Any) -> dict[str, Any]:
    """A `latency:` block as keys and numbers; UsageError naming the file and the field."""
    if not isinstance(raw, dict):
        raise where.error("latency", "expected a mapping like {warmup: 3, iterations: 20}")
    parsed: dict[str, Any] = {}
    for key, value in raw.items():
        kind = _DECLARED_KEYS.get(key)
        if kind is None:
            raise where.error(f"latency.{key}", unknown_name(str(key), _DECLARED_KEYS))
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (kind is int and not isinstance(value, int)) or value < _MINIMUM[key]:
            wanted = "an integer" if kind is int else "a number"
            raise where.error(f"latency.{key}", f"expected {wanted} >= {_MINIMUM[key]}, got {value!r}")
        parsed[key] = kind(value)
    return parsed


def manifest_declaration(path: Path) -> tuple[str, dict[str, Any]] | None:
    """(suite name, declared keys) of a manifest's top-level `latency:` block; None when it
    has none. The manifest itself is validated by `hil.cases.manifest.load_manifest`."""
    try:
        data = load_document(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # load_manifest reports it
    if not isinstance(data, dict) or "latency" not in data:
        return None
    suite = data.get("suite", path.stem)
    return str(suite), parse_declaration(Where(path), data["latency"])


def resolve_plans(
    profile: str,
    declarations: dict[str, dict[str, Any]],
    iterations: int | None,
    warmup: int | None,
) -> tuple[LatencyPlan, dict[str, LatencyPlan]]:
    """The default plan and the plan of each suite that declares one: the `--latency`
    profile, then each suite's declaration, then `--iterations` / `--warmup` over all."""
    base = profile_named(profile)

    def command_line(plan: LatencyPlan) -> LatencyPlan:
        if iterations is not None:
            plan = replace(plan, iterations=iterations)
        if warmup is not None:
            plan = replace(plan, warmup=warmup)
        return plan

    suites = {name: command_line(apply_declaration(base, keys)) for name, keys in declarations.items()}
    return command_line(base), suites
