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
    # NEW (the last file) is 2 ms slower at every sample, but three samples a side cannot make
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


def _twenty_runs(tmp_path: Path) -> list[tuple[Path, dict]]:
    """20 nightly runs of 20 cases, 30 samples each; the last night 40% slower on two cases."""
    runs = []
    for night in range(20):
        document = sample_results()
        document["run"].update(id=f"20261{night:03d}-030000-abcdef", started=f"2026-11-{night + 1:02d}T03:00:00Z")
        document["cases"] = []
        for number in range(20):
            center = (1.0 + number * 0.1) * (1.4 if night == 19 and number in (3, 11) else 1.0)
            samples = [center * (1 + 0.02 * ((i % 7) - 3)) for i in range(30)]
            document["cases"].append(case("ops", "fp32", f"op{number:02d}", "PASS", latency_ms=latency_stats(samples)))
        path = tmp_path / f"night{night:02d}" / "results.json"
        path.parent.mkdir()
        save_results(document, path)
        runs.append((path, load_results(path)))
    return runs


def test_twenty_runs_and_twenty_series_stay_readable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Read from the drawn figure: slanted tick labels that do not overlap, a legend whose 20
    entries differ in colour and in line style or marker, p10-p90 bands as bars beside each
    point (no filled area to blend into a wash), and the new run's two regressions ringed."""
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection

    from hil.report.compare import LATENCY_REGRESSION, compare_results
    from hil.report.plot import trend_figure

    runs = _twenty_runs(tmp_path)
    comparison = compare_results(runs[0][1], runs[-1][1])
    rings = [(19, row.key, row.latency_ms[1]) for row in comparison.regressions
             if LATENCY_REGRESSION in row.statuses]
    assert sorted(key for _, key, _ in rings) == ["ops.fp32.op03", "ops.fp32.op11"]
    figure, drawn = trend_figure(runs, rings=rings)
    assert drawn == 20
    axes = figure.axes[0]
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    shown = [t for t in axes.get_xticklabels() if t.get_text()]
    assert 2 <= len(shown) <= 12 and shown[-1].get_text().startswith("#20 ")
    assert all(t.get_rotation() == 45 for t in shown)
    # slanted labels are parallel: neighbours clear each other when the distance between them
    # across the slant is more than a label's thickness (its height unslanted)
    anchors = [t.get_window_extent(renderer).x1 for t in shown]  # right-aligned at the tick
    thickness = []
    for tick in shown:
        tick.set_rotation(0)
        thickness.append(tick.get_window_extent(renderer).height)
        tick.set_rotation(45)
    for (a, b), height in zip(zip(anchors, anchors[1:], strict=False), thickness, strict=False):
        assert (b - a) * np.sin(np.radians(45)) > height
    legend = axes.get_legend()
    lines = [h for h in legend.legend_handles if h.get_label().startswith("ops.")]
    assert len(lines) == 20
    assert len({tuple(h.get_color()) if not isinstance(h.get_color(), str) else h.get_color()
                for h in lines}) == 20
    looks = {(h.get_linestyle(), h.get_marker()) for h in lines}
    assert len(looks) >= 4 and all(h.get_linestyle() != "None" for h in lines)
    assert legend.handlelength >= 3  # long enough for a dash-dot to show
    assert not [c for c in axes.collections if isinstance(c, PolyCollection)]  # no filled bands
    bars = [c for c in axes.collections if isinstance(c, LineCollection)]
    xs_of_night_0 = {round(float(segment[0][0]), 3) for bar in bars for segment in bar.get_segments()
                     if abs(segment[0][0]) < 0.5}
    assert len(xs_of_night_0) == 20  # each series' bar beside the others, not on top
    (ring,) = [c for c in axes.collections if isinstance(c, PathCollection)]
    assert len(ring.get_offsets()) == 2 and all(ring.get_facecolors()[:, 3] == 0)
    assert all(x > 18.5 for x, _ in ring.get_offsets())  # on the last night
    png = tmp_path / "trend.png"
    assert main(["compare", *(str(path) for path, _ in runs), "--plot", str(png)]) == 1
    assert "## hil compare: 2 regression(s)" in capsys.readouterr().out
    print(f"20-run trend: {png}")
