"""Latency trend plot over several results files (`hil compare --plot PNG`): one line per
case (its p50, else avg), runs in the order they started, and a shaded p10-p90 band where a
run has samples; matplotlib is imported here only, with the Agg backend (no display needed).

Every run gets its own tick label (`#1 11-30 16:58:03` and what tells it apart: the run id,
then the file), so two runs are never drawn under one name; the labels are slanted, and over
more than MAX_LABELS runs only every n-th (and the last, and every failing run) is written.
Each series has its own colour (matplotlib's tab20: 20 colours) *and* its own line style and
marker, both shown in the legend. With more than FILLED_BANDS series the bands are drawn as
short vertical bars beside each point (the series spread a little along x) instead of filled
areas, which would blend into one wash. A ring marks each latency regression (`rings`), as the
dashboard rings its flagged nights.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.latency import percentile
from hil.report.results import case_key
from hil.report.stats import latency_of, samples_of

MAX_SERIES = 20
"""Cases drawn at most: those whose latency changed most between their first and last run."""
STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v")
"""Line styles and markers, cycled with the colours so that no two series look alike."""
FILLED_BANDS = 5
"""Series whose p10-p90 bands are drawn as filled areas; above it, as bars beside the points."""
MAX_LABELS = 12
"""Tick labels written at most (the others' ticks stay, unlabelled)."""
SPREAD = 0.4
"""The width along x over which the series' points and bars are spread when bands are bars."""
RING = {"s": 220, "facecolors": "none", "edgecolors": "red", "linewidths": 2, "zorder": 5}
"""How a regression is ringed (here and in the dashboard's trend)."""


def run_labels(runs: Sequence[tuple[Path, dict[str, Any]]]) -> list[str]:
    """One distinct tick label per run: its position, its start (`11-30 16:58:03`), its run
    id's tail and its file (`parent/stem`, the parent only when stems repeat)."""
    stems = [path.stem for path, _ in runs]
    labels = []
    for number, (path, document) in enumerate(runs, start=1):
        run = document.get("run") or {}
        started = str(run.get("started") or "")
        when = f"{started[5:10]} {started[11:19]}" if len(started) >= 19 else "?"
        name = f"{path.parent.name}/{path.stem}" if stems.count(path.stem) > 1 else path.stem
        run_id = str(run.get("id") or "")
        labels.append(f"#{number} {when}\n{run_id[-6:] or '-'} {name}")
    return labels


def _value(case: dict[str, Any], metric: str) -> float | None:
    return (
        latency_of(case, metric)
        if metric != "auto"
        else (latency_of(case, "p50") if latency_of(case, "p50") is not None else latency_of(case, "avg"))
    )


def _ordered(inputs: Sequence[tuple[Path, dict[str, Any]]]) -> list[tuple[Path, dict[str, Any]]]:
    ordered = sorted(
        enumerate(inputs), key=lambda item: (str(item[1][1]["run"].get("started") or ""), item[0])
    )
    return [pair for _, pair in ordered]


def trend_series(
    inputs: Sequence[tuple[Path, dict[str, Any]]], metric: str = "auto"
) -> tuple[list[tuple[Path, dict[str, Any]]], dict[str, list[float | None]]]:
    """The inputs ordered by `run.started` (then as given) and, per case key, its latency in
    each of them (None where the case is missing or unmeasured). `metric` is a latency_ms key,
    or `auto`: p50 where present, else avg."""
    runs = _ordered(inputs)
    series: dict[str, list[float | None]] = {}
    for position, (_, document) in enumerate(runs):
        for case in document.get("cases") or []:
            values = series.setdefault(case_key(case), [None] * len(runs))
            values[position] = _value(case, metric)
    return runs, {key: values for key, values in series.items() if any(v is not None for v in values)}


def trend_bands(
    inputs: Sequence[tuple[Path, dict[str, Any]]],
) -> dict[str, list[tuple[float, float] | None]]:
    """Per case key, its p10-p90 band in each run (ordered as `trend_series`), None where the
    run has fewer than two samples of it."""
    runs = _ordered(inputs)
    bands: dict[str, list[tuple[float, float] | None]] = {}
    for position, (_, document) in enumerate(runs):
        for case in document.get("cases") or []:
            samples = sorted(samples_of(case))
            values = bands.setdefault(case_key(case), [None] * len(runs))
            if len(samples) >= 2:
                values[position] = (percentile(samples, 10), percentile(samples, 90))
    return bands


def _change(values: list[float | None]) -> float:
    known = [v for v in values if v is not None]
    if len(known) < 2 or known[0] <= 0:
        return 0.0
    return abs(known[-1] / known[0] - 1.0)


def run_failures(document: dict[str, Any]) -> int:
    """How many cases of a run failed or errored (what makes it red)."""
    from hil.verdict import Verdict

    return sum(Verdict(c["verdict"]).is_failure or Verdict(c["verdict"]).is_error
               for c in document.get("cases") or [])


def plot_trend(inputs: Sequence[tuple[Path, dict[str, Any]]], out: Path, metric: str = "auto",
               rings: Sequence[tuple[int, str, float]] = ()) -> int:
    """Draw the latency trend of `inputs` as a PNG at `out`; returns the number of cases drawn.
    `rings`: (index into `inputs`, case key, latency) of each regression to ring."""
    figure, drawn = trend_figure(inputs, metric, rings)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
    return drawn


def _chosen(series: dict[str, list[float | None]], ringed: set[str]) -> list[str]:
    """The ringed cases, then those whose latency changed most: MAX_SERIES in all, sorted."""
    others = sorted((k for k in series if k not in ringed), key=lambda k: _change(series[k]), reverse=True)
    return sorted([*sorted(k for k in ringed if k in series), *others][:MAX_SERIES])


def _tick_labels(labels: list[str], failures: list[int]) -> list[str]:
    """Every label when there are at most MAX_LABELS; else every n-th, the last and every
    failing run's, the others empty."""
    step = -(-len(labels) // MAX_LABELS)
    last = len(labels) - 1
    return [label if step == 1 or x == last or failures[x] or (x % step == 0 and last - x >= step)
            else "" for x, label in enumerate(labels)]


def trend_figure(inputs: Sequence[tuple[Path, dict[str, Any]]], metric: str = "auto",
                 rings: Sequence[tuple[int, str, float]] = ()) -> tuple[Any, int]:
    """The figure `plot_trend` saves (a failing run: red band and tick label, `N failed`),
    and the number of cases drawn."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter, LogLocator

    runs, series = trend_series(inputs, metric)
    bands = trend_bands(inputs)
    chosen = _chosen(series, {key for _, key, _ in rings})
    figure = Figure(figsize=(11, 6), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    xs = list(range(len(runs)))
    palette = colormaps["tab20"].colors
    filled = len(chosen) <= FILLED_BANDS
    offsets = {key: 0.0 if filled or len(chosen) == 1 else SPREAD * (n / (len(chosen) - 1) - 0.5)
               for n, key in enumerate(chosen)}
    for number, key in enumerate(chosen):
        values, shift = series[key], offsets[key]
        points = [(x + shift, v) for x, v in zip(xs, values, strict=True) if v is not None]
        (line,) = axes.plot([p[0] for p in points], [p[1] for p in points],
                            linestyle=STYLES[number % len(STYLES)], marker=MARKERS[number % len(MARKERS)],
                            color=palette[(2 * number) % 20 + (number * 2 // 20) % 2], markersize=4,
                            label=key)
        spans = [(x + shift, band) for x, band in zip(xs, bands.get(key, []), strict=False) if band]
        if spans and filled and len(spans) > 1:
            axes.fill_between([x for x, _ in spans], [b[0] for _, b in spans],
                              [b[1] for _, b in spans], color=line.get_color(), alpha=0.15,
                              linewidth=0)
        elif spans:  # one run with samples, or too many series for areas: a bar per run
            axes.vlines([x for x, _ in spans], [b[0] for _, b in spans], [b[1] for _, b in spans],
                        color=line.get_color(), alpha=0.5, linewidth=3 if filled else 2)
    order = {id(document): x for x, (_, document) in enumerate(runs)}
    ringed = [(order[id(inputs[index][1])] + offsets[key], value) for index, key, value in rings
              if key in offsets]
    if ringed:
        axes.scatter([x for x, _ in ringed], [y for _, y in ringed], **RING,
                     label="latency regression (hil compare)")
    known = [v for key in chosen for v in series[key] if v is not None]
    known += [edge for key in chosen for band in bands.get(key, []) if band for edge in band]
    if known and min(known) > 0 and max(known) / min(known) > 10:
        axes.set_yscale("log")  # keeps sub-millisecond ops readable beside whole models
        axes.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        axes.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))  # 0.02 0.05 0.2 0.5...
        axes.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    failures = [run_failures(document) for _, document in runs]
    labels = [label + (f"\n{n} failed" if n else "")
              for label, n in zip(run_labels(runs), failures, strict=True)]
    axes.set_xticks(xs, _tick_labels(labels, failures), fontsize=7, rotation=45, ha="right",
                    rotation_mode="anchor")
    for x, (tick, failed) in enumerate(zip(axes.get_xticklabels(), failures, strict=True)):
        if failed:  # a red night stands out from the trend
            tick.set_color("tab:red")
            axes.axvspan(x - 0.4, x + 0.4, color="tab:red", alpha=0.08, linewidth=0)
    band_words = "shaded" if filled else "bars"
    axes.set_xlabel(f"run (ordered by start time); {band_words}: p10-p90 of the run's samples; "
                    "red: a run with failed cases" + ("; ringed: a latency regression" if ringed else ""))
    axes.set_ylabel(f"latency, ms ({'p50, else avg' if metric == 'auto' else metric})")
    axes.grid(True, alpha=0.3)
    title = "hil latency trend"
    if len(chosen) < len(series):
        title += f": {len(chosen)} of {len(series)} cases (largest change)"
    if any(document["run"].get("virtual") for _, document in runs):
        title += "\nVIRTUAL boards: ExecuTorch host runtime, not the NPU"
    axes.set_title(title, fontsize=10)
    if chosen:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False,
                    handlelength=4)  # long enough to show a dash-dot or a dotted style
    else:
        axes.text(0.5, 0.5, "no latency measured", ha="center", va="center", transform=axes.transAxes)
    return figure, len(chosen)
