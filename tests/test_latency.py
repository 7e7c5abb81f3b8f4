"""hil/latency.py: the statistics of a case's samples, the stability verdict and the rank
test `hil compare` decides with (checked against numpy and scipy)."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from hil.latency import latency_stats, mann_whitney_p, stability


def test_p99_std_and_cv_match_numpy() -> None:
    rng = random.Random(3)
    samples = [rng.lognormvariate(0.0, 0.2) for _ in range(30)]
    stats = latency_stats(samples)
    array = np.array(samples)
    assert stats["p99"] == pytest.approx(float(np.percentile(array, 99)), abs=1e-6)
    assert stats["mean"] == stats["avg"] == pytest.approx(float(array.mean()), abs=1e-6)
    assert stats["std"] == pytest.approx(float(array.std(ddof=1)), abs=1e-6)
    assert stats["cv"] == pytest.approx(float(array.std(ddof=1) / array.mean()), abs=1e-4)


def test_one_sample_has_no_spread_and_cannot_be_judged() -> None:
    stats = latency_stats([0.5])
    assert stats["std"] is None and stats["cv"] is None and stats["p99"] == 0.5
    assert stability(stats, 0.10) == {"unstable": None, "unstable_reasons": [], "cv_limit": 0.10}
    hot = stability(stats, 0.10, "board still at 80 °C after waiting 30 s")
    assert hot["unstable"] is True and hot["unstable_reasons"] == ["board still at 80 °C after waiting 30 s"]


def test_a_cv_above_the_limit_is_unstable_and_below_it_stable() -> None:
    noisy = latency_stats([1.0, 1.5, 0.7, 1.2])
    assert stability(noisy, 0.10)["unstable"] is True
    assert stability(noisy, 0.10)["unstable_reasons"] == [f"cv {noisy['cv']:.3f} above the limit 0.1"]
    assert stability(latency_stats([1.0, 1.01, 0.99, 1.0]), 0.10)["unstable"] is False


def test_mann_whitney_p_values_match_scipy_exact_and_approximate() -> None:
    if os.environ.get("CI"):  # a dev dependency (pyproject.toml): in CI its absence fails
        import scipy.stats as scipy_stats
    else:
        scipy_stats = pytest.importorskip("scipy.stats")
    rng = random.Random(11)
    for _ in range(200):
        m, n = rng.randint(1, 12), rng.randint(1, 35)
        digits = rng.choice([1, 6])  # 1 digit: ties, the normal approximation's tie correction
        first = [round(rng.lognormvariate(0.0, 0.3), digits) for _ in range(m)]
        second = [round(rng.lognormvariate(0.1, 0.3), digits) for _ in range(n)]
        expected = scipy_stats.mannwhitneyu(first, second, alternative="two-sided").pvalue
        assert mann_whitney_p(first, second) == pytest.approx(expected, abs=1e-12)


def test_mann_whitney_of_identical_or_empty_samples() -> None:
    assert mann_whitney_p([1.0] * 5, [1.0] * 7) == 1.0
    with pytest.raises(ValueError):
        mann_whitney_p([], [1.0])
