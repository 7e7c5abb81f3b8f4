"""The dashboard page: one self-contained `index.html` (styles, script and SVG charts inline;
a Content-Security-Policy that forbids every fetch), rendered with jinja2 from
`index.html.j2` beside this module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hil import __version__
from hil.dashboard import charts
from hil.dashboard.model import Dashboard, Flag, Lane, night_state, summary_line
from hil.report.compare import ALPHA, SQNR_DROP_DB
from hil.report.localization import localized_cases, probe_rows
from hil.report.plot import trend_series
from hil.report.results import atomic_write_text, case_key

MAX_LOCALIZED_RUNS = 3
"""Runs whose localization curves are drawn (the newest that have localized cases)."""
PROBE_COLUMNS = ("#", "node", "op", "module", "source", "max abs", "SQNR dB", "verdict",
                 "delegation (calls/delegated/undelegated)")


def _lane_name(lane: Lane) -> str:
    return " ".join(lane)


def _latency_tables(board: Dashboard) -> list[dict[str, Any]]:
    """Per lane: its chart and the table under it (the drawn cases' latency per night)."""
    sections = []
    for lane, nights in board.lanes.items():
        flags = [f for f in board.flags if f.lane == lane]
        flagged = {(f.night, f.key) for f in flags}
        cases = charts.trend_cases(nights, {f.key for f in flags})
        if not cases:
            continue
        _, series = trend_series([(Path(night), document) for night, document in nights])
        rows = [{"key": key, "cells": [{"value": value, "flagged": (night, key) in flagged}
                                       for (night, _), value in zip(nights, series[key], strict=True)]}
                for key in cases]
        sections.append({
            "lane": _lane_name(lane), "nights": [night for night, _ in nights], "rows": rows,
            "svg": charts.trend_svg(lane, nights, flags, cases), "flags": len(flags),
        })
    return sections


def _localizations(board: Dashboard) -> tuple[list[dict[str, Any]], int]:
    """The newest runs with localized cases (at most MAX_LOCALIZED_RUNS), and how many runs
    with some were left out."""
    found = [(run, localized_cases(run.document)) for run in reversed(board.runs)]
    found = [(run, cases) for run, cases in found if cases]
    shown = []
    for number, (run, cases) in enumerate(found[:MAX_LOCALIZED_RUNS]):
        shown.append({
            "night": run.night, "chipset": run.chipset, "flow": run.flow, "path": str(run.path),
            "svg": charts.localization_svg(cases, str(number)),
            "cases": [{"key": case_key(c), "message": (c.get("localization") or {}).get("message"),
                       "rows": probe_rows(c)} for c in cases],
        })
    return shown, max(0, len(found) - MAX_LOCALIZED_RUNS)


def _flag_row(flag: Flag) -> dict[str, Any]:
    chipset, flow, precision = flag.lane
    return {"night": flag.night, "base_night": flag.base_night, "chipset": chipset, "flow": flow,
            "precision": precision, "key": flag.key, "base": flag.latency_ms[0],
            "new": flag.latency_ms[1], "change": flag.change * 100, "p": flag.p_value,
            "notes": flag.notes}


def render(board: Dashboard) -> str:
    """The page as HTML text."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined
    from markupsafe import Markup

    environment = Environment(loader=FileSystemLoader(Path(__file__).parent), autoescape=True,
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = environment.get_template("index.html.j2")
    latency = _latency_tables(board)
    for section in latency:
        section["svg"] = Markup(section["svg"])  # noqa: S704 - matplotlib's own SVG output
    localizations, localizations_left_out = _localizations(board)
    for entry in localizations:
        entry["svg"] = Markup(entry["svg"])  # noqa: S704
    virtual = any(run.document["run"].get("virtual") for run in board.runs)
    return template.render(
        version=__version__,
        board=board,
        nights_newest_first=[(night, night_state(board, night), summary_line(board, night))
                             for night in reversed(board.nights)],
        matrix=[{"suite": suite, "precision": precision, "chipset": chipset, "flow": flow,
                 "cells": [(night, cells.get(night)) for night in board.nights]}
                for (suite, precision, chipset, flow), cells in board.matrix.items()],
        bisect_commands=[(night, " ".join(row), cell.bisect) for row, cells in board.matrix.items()
                         for night, cell in sorted(cells.items()) if cell.bisect],
        flags=[_flag_row(flag) for flag in board.flags],
        notes=any(flag.notes for flag in board.flags),
        latency=latency,
        movers=board.movers,
        movers_svg=Markup(charts.movers_svg(board.movers, SQNR_DROP_DB)),  # noqa: S704
        sqnr_floor=SQNR_DROP_DB,
        health=board.health,
        health_svg=Markup(charts.health_svg(board.nights, board.health)),  # noqa: S704
        localizations=localizations,
        localizations_left_out=localizations_left_out,
        probe_columns=PROBE_COLUMNS,
        alpha=ALPHA,
        virtual=virtual,
    )


def write(board: Dashboard, out: Path) -> Path:
    """Render the page into `out/index.html` (atomically); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "index.html"
    atomic_write_text(path, render(board))
    return path
