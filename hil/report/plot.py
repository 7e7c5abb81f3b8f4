"""Latency trend plot over several results files (`hil compare --plot PNG`): one line per
case (its p50, else avg), runs in the order they started, and a shaded p10-p90 band where a
run has samples; matplotlib is imported here only, with the Agg backend (no display needed).

Every run gets its own tick label (`#1 11-30 16:58:03` and what tells it apart: the run id,
then the file), so two runs are never drawn under one name.
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
COLOURS = 10
"""Length of matplotlib's default colour cycle; later series are dashed."""


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


def plot_trend(inputs: Sequence[tuple[Path, dict[str, Any]]], out: Path, metric: str = "auto") -> int:
    """Draw the latency trend of `inputs` as a PNG at `out`; returns the number of cases drawn."""
    figure, drawn = trend_figure(inputs, metric)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
    return drawn


def trend_figure(inputs: Sequence[tuple[Path, dict[str, Any]]], metric: str = "auto") -> tuple[Any, int]:
    """The figure `plot_trend` saves (a failing run: red band and tick label, `N failed`),
    and the number of cases drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter, LogLocator

    runs, series = trend_series(inputs, metric)
    bands = trend_bands(inputs)
    chosen = sorted(series, key=lambda key: _change(series[key]), reverse=True)[:MAX_SERIES]
    figure = Figure(figsize=(11, 6), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    xs = list(range(len(runs)))
    for number, key in enumerate(sorted(chosen)):
        values = series[key]
        points = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        style = "-" if number < COLOURS else "--"  # the colour cycle repeats after 10
        (line,) = axes.plot([p[0] for p in points], [p[1] for p in points], style, marker="o",
                            label=key)
        spans = [(x, band) for x, band in zip(xs, bands.get(key, []), strict=False) if band]
        if spans:
            axes.fill_between([x for x, _ in spans], [b[0] for _, b in spans],
                              [b[1] for _, b in spans], color=line.get_color(), alpha=0.15,
                              linewidth=0)
            if len(spans) == 1:  # one run with samples: a bar instead of an invisible area
                x, (low, high) = spans[0]
                axes.vlines(x, low, high, color=line.get_color(), alpha=0.4, linewidth=6)
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
    axes.set_xticks(xs, labels, fontsize=7)
    for x, (tick, failed) in enumerate(zip(axes.get_xticklabels(), failures, strict=True)):
        if failed:  # a red night stands out from the trend
            tick.set_color("tab:red")
            axes.axvspan(x - 0.4, x + 0.4, color="tab:red", alpha=0.08, linewidth=0)
    axes.set_xlabel("run (ordered by start time); shaded: p10-p90 of the run's samples; "
                    "red: a run with failed cases")
    axes.set_ylabel(f"latency, ms ({'p50, else avg' if metric == 'auto' else metric})")
    axes.grid(True, alpha=0.3)
    title = "hil latency trend"
    if len(chosen) < len(series):
        title += f": {len(chosen)} of {len(series)} cases (largest change)"
    if any(document["run"].get("virtual") for _, document in runs):
        title += "\nVIRTUAL boards: ExecuTorch host runtime, not the NPU"
    axes.set_title(title, fontsize=10)
    if chosen:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    else:
        axes.text(0.5, 0.5, "no latency measured", ha="center", va="center", transform=axes.transAxes)
    return figure, len(chosen)
