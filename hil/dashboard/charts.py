"""The dashboard's charts: matplotlib figures (the Agg canvas, no display) saved as SVG text to
inline in the page. The latency trend is `hil compare --plot`'s figure (hil/report/plot.py)
with the flagged regressions marked on it, the localization curves are `hil run --plot`'s
(hil/report/localization.py); every chart has a table beside it in the page."""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.dashboard.model import Flag, Health, Lane, Mover
from hil.report.localization import localization_figure
from hil.report.plot import MAX_SERIES, trend_figure, trend_series
from hil.report.results import case_key


def to_svg(figure: Any, name: str) -> str:
    """`figure` as an `<svg>` element: text kept as text, ids salted with `name` so that several
    charts in one page never share one, no date (the same input gives the same bytes)."""
    import matplotlib
    from matplotlib.text import Text

    buffer = io.StringIO()
    for text in figure.findobj(Text):  # case ids are text, not TeX: a `$` starts no math mode
        text.set_parse_math(False)
    with matplotlib.rc_context({"svg.hashsalt": name, "svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def trend_cases(nights: Sequence[tuple[str, dict[str, Any]]], flagged: set[str]) -> list[str]:
    """The cases a lane's trend draws: its flagged ones, then those whose latency moved most
    from one night to the next, MAX_SERIES in all."""
    _, series = trend_series([(Path(night), document) for night, document in nights])

    def largest_step(values: list[float | None]) -> float:
        known = [v for v in values if v is not None and v > 0]
        return max((abs(b / a - 1.0) for a, b in zip(known, known[1:], strict=False)), default=0.0)

    others = sorted((k for k in series if k not in flagged), key=lambda k: (-largest_step(series[k]), k))
    return sorted([*sorted(k for k in flagged if k in series), *others][:MAX_SERIES])


def sentence(text: str) -> str:
    """What stands in a chart's place when it would be empty: one plain sentence."""
    return f'<p class="no-chart">{html.escape(text)}</p>'


def _point_label(name: str) -> str:
    """A night (`2026-12-05` -> `12-05`) or a run's start (`2026-12-05T07:21:32` -> `07:21:32`)."""
    return name[5:10] if len(name) <= 10 else name[11:19]


def trend_svg(lane: Lane, nights: Sequence[tuple[str, dict[str, Any]]], flags: Sequence[Flag],
              cases: Sequence[str]) -> str:
    """The latency trend of `cases` over a lane's nights (or its runs, named by their start
    time, when all fall on one night), each flagged regression ringed in red; a sentence when
    there is one point in time only."""
    if len(nights) < 2:
        return sentence("One point in time for this chipset, flow and precision: a trend needs "
                        "two. Its latencies are in the table below.")
    per_run = len(nights[0][0]) > 10
    chosen = set(cases)
    inputs = [(Path(night), {**document, "cases": [c for c in document["cases"] if case_key(c) in chosen]})
              for night, document in nights]
    position = {night: x for x, (night, _) in enumerate(nights)}
    rings = [(position[f.night], f.key, f.latency_ms[1]) for f in flags
             if f.night in position and f.key in chosen]
    figure, _ = trend_figure(inputs, rings=rings)
    axes = figure.axes[0]
    ticks = axes.get_xticklabels()
    colours = [tick.get_color() for tick in ticks]
    axes.set_xticks(range(len(nights)), [_point_label(night) for night, _ in nights], rotation=45,
                    fontsize=7)
    for tick, colour in zip(axes.get_xticklabels(), colours, strict=False):
        tick.set_color(colour)
    point = "run" if per_run else "night"
    axes.set_xlabel(f"{'run (UTC start)' if per_run else 'night (UTC)'}; shaded or bars: p10-p90 of "
                    f"its samples; red: a {point} with failed cases; ringed: a regression (hil compare)")
    chipset, flow, precision = lane
    axes.set_title(f"latency, {chipset} {flow} {precision}: {len(cases)} case(s), the flagged "
                   "first, then the largest night-to-night moves", fontsize=10)
    figure.set_size_inches(11, 4.6)
    return to_svg(figure, f"trend-{chipset}-{flow}-{precision}")


def _figure(width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def movers_svg(movers: Sequence[Mover], floor_db: float) -> str:
    """The SQNR drops as horizontal bars, largest on top; red beyond `floor_db`; a sentence
    when nothing dropped."""
    if not movers:
        return sentence("No case's worst SQNR dropped from one night to the next of its chipset, "
                        "flow and precision (by 1 dB or more).")
    figure, axes = _figure(11, 0.8 + 0.28 * max(1, len(movers)))
    labels = [f"{m.night[5:]} {m.lane[0]} {m.key}" for m in movers]
    drops = [m.drop for m in movers]
    colours = ["tab:red" if d > floor_db else "tab:grey" for d in drops]
    axes.barh(range(len(movers)), drops, color=colours)
    axes.set_yticks(range(len(movers)), labels, fontsize=7)
    axes.invert_yaxis()
    axes.axvline(floor_db, color="tab:red", linestyle=":", linewidth=1)
    axes.set_xlabel(f"SQNR drop against the previous night, dB (red: beyond {floor_db:g} dB, "
                    "an accuracy regression for hil compare)")
    axes.grid(True, axis="x", alpha=0.3)
    return to_svg(figure, "sqnr-movers")


def health_svg(nights: Sequence[str], health: Sequence[Health]) -> str:
    """Per night: quarantines and recovery steps (bars, all chipsets) and the largest share of
    board capacity lost to recovery (line, right axis) where runs record it; a sentence when
    none of these happened."""
    if not any(h.quarantines or h.recoveries or h.capacity_lost for h in health):
        return sentence(f"No quarantine, no recovery step and no capacity lost to recovery in "
                        f"{len(nights)} night(s) of {len(health)} run(s).")
    figure, axes = _figure(11, 3.4)
    xs = range(len(nights))
    quarantines = [sum(h.quarantines for h in health if h.night == n) for n in nights]
    recoveries = [sum(h.recoveries for h in health if h.night == n) for n in nights]
    axes.bar([x - 0.2 for x in xs], quarantines, width=0.4, color="tab:red", label="quarantines")
    axes.bar([x + 0.2 for x in xs], recoveries, width=0.4, color="tab:orange", label="recovery steps")
    axes.set_xticks(list(xs), [n[5:] for n in nights], rotation=45, fontsize=7)
    axes.set_ylabel("count (all chipsets)")
    axes.set_ylim(bottom=0)
    axes.yaxis.get_major_locator().set_params(integer=True)
    recorded = {n: [h.capacity_lost for h in health if h.night == n and h.capacity_lost is not None]
                for n in nights}
    lost = [(x, max(recorded[n]) * 100) for x, n in enumerate(nights) if recorded[n]]
    if lost:
        right = axes.twinx()
        right.plot([x for x, _ in lost], [y for _, y in lost], "o-", color="tab:blue",
                   label="capacity lost to recovery (worst run), %")
        right.set_ylabel("capacity lost, %")
        right.set_ylim(bottom=0)
        right.legend(loc="upper right", fontsize=7, frameon=False)
    axes.legend(loc="upper left", fontsize=7, frameon=False)
    axes.grid(True, axis="y", alpha=0.3)
    return to_svg(figure, "health")


def localization_svg(cases: Sequence[dict[str, Any]], name: str) -> str:
    """`hil run --localize --plot`'s figure of these cases."""
    figure, _ = localization_figure(cases)
    return to_svg(figure, f"localization-{name}")
