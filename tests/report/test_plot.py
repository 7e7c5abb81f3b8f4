"""`hil compare --plot`: p10-p90 bands from the samples and a distinct label per run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hil.cli import main
from hil.latency import latency_stats
from hil.report.plot import run_labels, trend_bands
from hil.report.results import load_results, save_results

from . import case, sample_results


def _results(folder: Path, run_id: str, samples: list[float]) -> Path:
    document = sample_results()
    document["run"].update(id=run_id, started="2026-11-30T16:58:03Z")  # the same second
    document["cases"] = [case("smoke", "fp32", "conv2d_3x3", "PASS", latency_ms=latency_stats(samples))]
    folder.mkdir(parents=True)
    save_results(document, folder / "results.json")
    return folder / "results.json"


def test_three_runs_of_one_minute_with_one_file_name_get_three_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [_results(tmp_path / f"run{i}", f"20261130-165803-00000{i}", [1.0 + i, 1.5 + i, 2.0 + i])
             for i in range(3)]
    labels = run_labels([(path, load_results(path)) for path in paths])
    assert len(set(labels)) == 3
    assert labels[0] == "#1 11-30 16:58:03\n000000 run0/results"
    png = tmp_path / "trend.png"
    # NEW (the 2nd file) is 1 ms slower at every sample, but three samples a side cannot make
    # that significant (Mann-Whitney p = 0.1): no regression, exit 0, whatever the plot
    assert main(["compare", *map(str, paths), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "(1 case(s), 3 runs)" in out and "## hil compare: no regression" in out
    assert "not significant" in out
    with Image.open(png) as image:
        assert image.format == "PNG"


def test_bands_are_the_p10_to_p90_of_each_runs_samples(tmp_path: Path) -> None:
    samples = [float(v) for v in range(1, 21)]
    many = _results(tmp_path / "many", "a", samples)
    one = _results(tmp_path / "one", "b", [3.0])
    (bands,) = trend_bands([(many, load_results(many)), (one, load_results(one))]).values()
    low, high = bands[0]
    assert (low, high) == (pytest.approx(np.percentile(samples, 10)), pytest.approx(np.percentile(samples, 90)))
    assert bands[1] is None  # one sample has no spread to draw
