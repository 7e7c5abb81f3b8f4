"""Latency statistics: the numbers results.json stores per case, checked against numpy."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from hil.latency import latency_stats, stability
from hil.report.stats import format_latency, latency_of

from . import case


def test_statistics_match_numpy_on_random_samples() -> None:
    rng = random.Random(7)
    samples = [rng.lognormvariate(0.0, 0.5) for _ in range(101)]
    stats = latency_stats(samples)
    ordered = np.sort(np.array(samples))
    assert stats["n"] == 101
    assert stats["samples"] == samples
    assert stats["avg"] == pytest.approx(float(ordered.mean()), abs=1e-6)
    assert stats["p50"] == pytest.approx(float(np.percentile(ordered, 50)), abs=1e-6)
    assert stats["p90"] == pytest.approx(float(np.percentile(ordered, 90)), abs=1e-6)
    assert stats["trimmed"] == pytest.approx(float(ordered[10:91].mean()), abs=1e-6)
    assert (stats["min"], stats["max"]) == (
        pytest.approx(float(ordered[0]), abs=1e-6),
        pytest.approx(float(ordered[-1]), abs=1e-6),
    )


def test_trimmed_mean_drops_the_outliers_at_both_ends() -> None:
    samples = [1.0] * 8 + [0.01, 500.0]  # one fast glitch and one preemption spike
    stats = latency_stats(samples)
    assert stats["trimmed"] == 1.0
    assert stats["avg"] == pytest.approx(50.801)
    assert stats["p50"] == 1.0
    assert stats["max"] == 500.0


def test_few_samples_keep_them_all_and_bad_ones_are_dropped() -> None:
    stats = latency_stats([2.0, math.nan, 4.0, -1.0, math.inf])
    assert stats["n"] == 2 and stats["samples"] == [2.0, 4.0]
    assert stats["trimmed"] == stats["avg"] == 3.0
    assert stats["p90"] == pytest.approx(3.8)
    empty = latency_stats([])
    assert empty["n"] == 0 and empty["avg"] is None and empty["p50"] is None


def test_old_and_new_latency_records_read_back() -> None:
    old = case("s", "fp32", "a", "PASS")  # init/load/first/avg from the runner statistics
    assert latency_of(old, "avg") == 0.4 and latency_of(old, "p50") is None
    assert latency_of(old, "mean") == 0.4  # schema 1's avg is the mean
    assert format_latency(old) == "init 0.100 load 2.000 first 0.500 avg 0.400"
    new = case("s", "fp32", "b", "PASS", latency_ms=latency_stats([1.0, 2.0, 3.0]))
    assert format_latency(new) == (
        "p50 2.000 p90 2.800 p99 2.980 mean 2.000 trimmed 2.000 std 1.000 min 1.000 max 3.000 "
        "cv 0.500 n 3")
    new["latency_ms"].update(stability(new["latency_ms"], 0.10, "board still at 70 °C"))
    assert format_latency(new).endswith("n 3 UNSTABLE (cv 0.500 above the limit 0.1; board still at 70 °C)")
    assert format_latency(case("s", "fp32", "c", "SKIP", latency_ms=None)) == ""
    assert latency_of(case("s", "fp32", "d", "PASS", latency_ms={"avg": True}), "avg") is None
