"""Renderings of localizations: a case record's `localization` block (hil/localize) as the
lead of its JUnit message and GitHub annotation, console lines, the step summary's rows, and
plots of the probes (`--plot`) and of the A8W8-against-fp32 SQNR curve. matplotlib is
imported by the plot functions only, with the Agg backend."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.report.results import case_key

MAX_PLOTTED = 6
"""Localized cases drawn in one `--plot` figure (one panel each); the rest are named."""


def localized_cases(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The case records that carry a localization block, in results order."""
    return [case for case in results.get("cases") or [] if case.get("localization")]


def lead(case: dict[str, Any], message: str) -> str:
    """`message` led by the case's localization finding (`first diverging op: ...`), when
    it has one."""
    found = (case.get("localization") or {}).get("message")
    if not found:
        return message
    return f"{found}; {message}" if message else found


def _number(value: Any, spec: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    return format(value, spec)


def sqnr_text(entry: dict[str, Any]) -> str:
    """An entry's SQNR in dB; `inf` for identical values (stored as null in results.json)."""
    sqnr = entry.get("sqnr_db")
    if sqnr == math.inf or (sqnr is None and entry.get("max_abs") == 0):
        return "inf"
    return _number(sqnr, ".1f")


def where(entry: dict[str, Any]) -> str:
    """`hardswish at features.0.2` for a node or probe entry."""
    return f"{entry.get('op_name')} at {entry.get('module') or '(top level)'}"


def probe_line(key: str, entry: dict[str, Any]) -> str:
    """One console line per finished probe."""
    parts = [f"  probe {key} after node {entry.get('index')} {entry.get('name')} ({where(entry)}):",
             str(entry.get("verdict"))]
    if entry.get("board_run"):
        parts.append(f"max abs {_number(entry.get('max_abs'), '.4g')}, SQNR {sqnr_text(entry)} dB")
    else:
        parts.append(str(entry.get("message") or ""))
    if entry.get("cache_hit"):
        parts.append("(cached probe)")
    return " ".join(parts)


def probe_rows(case: dict[str, Any]) -> list[tuple[str, ...]]:
    """The probes of a localized case as plain cells: run, node, op, module, source, max abs
    error, SQNR, verdict, delegation (calls/delegated ops/undelegated ops)."""
    rows = []
    for number, entry in enumerate((case.get("localization") or {}).get("probes") or [], start=1):
        delegation = entry.get("delegation") or {}
        rows.append((
            str(number),
            f"{entry.get('index')} {entry.get('name')}",
            str(entry.get("op_name")),
            str(entry.get("module") or "(top level)"),
            str(entry.get("source") or "-"),
            _number(entry.get("max_abs"), ".4g"),
            sqnr_text(entry),
            str(entry.get("verdict")),
            (f"{delegation.get('delegated_calls', 0)}/{delegation.get('delegated_op_count', 0)}/"
             f"{delegation.get('undelegated_op_count', 0)}") if delegation else "-",
        ))
    return rows


def _figure(rows: int, height: float = 3.6) -> tuple[Any, list[Any]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, height * rows), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, [figure.add_subplot(rows, 1, i + 1) for i in range(rows)]


TITLE_WIDTH = 150
"""Characters per line of a panel's title (wrapped: one line was cut at both edges)."""
MAX_OP_TICKS = 40
"""At most this many op names along the x axis."""
ZERO_ERROR = 1e-12
"""Where an error of exactly 0 is drawn on the log scale."""


def plot_localizations(cases: Sequence[dict[str, Any]], out: Path) -> int:
    """Per localized case (up to MAX_PLOTTED) two panels along the graph's depth (node index
    in topological order): each probe's max abs error (log scale) and its SQNR, green within
    tolerance, red out of it, the first diverging node marked. A PNG at `out`; returns the
    number of cases drawn."""
    figure, shown = localization_figure(cases)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
    return shown


def localization_figure(cases: Sequence[dict[str, Any]]) -> tuple[Any, int]:
    """The figure `plot_localizations` saves, and the number of cases drawn."""
    shown = list(cases)[:MAX_PLOTTED]
    figure, panels = _figure(2 * max(1, len(shown)), height=2.6)
    if not shown:
        panels[0].text(0.5, 0.5, "no localized case", ha="center", va="center",
                       transform=panels[0].transAxes)
    for number, case in enumerate(shown):
        _plot_one(panels[2 * number], panels[2 * number + 1], case)
    if len(cases) > len(shown):
        figure.suptitle(f"{len(shown)} of {len(cases)} localized cases", fontsize=9)
    return figure, len(shown)


def _colour(probe: dict[str, Any]) -> str:
    return {True: "tab:red", False: "tab:green"}.get(probe.get("diverged"), "tab:grey")


def _plot_one(errors: Any, sqnrs: Any, case: dict[str, Any]) -> None:
    block = case["localization"]
    probes = [p for p in block.get("probes") or [] if p.get("board_run")]
    whole = block.get("whole_graph")  # the last cut point: the case's own run
    if whole and not any(p["index"] == whole["index"] for p in probes):
        probes.append({**whole, "diverged": whole.get("verdict") == "FAIL_MISMATCH"})
    probes.sort(key=lambda p: p["index"])
    nodes = block.get("nodes") or 1
    first = block.get("first_diverging")
    error_points = [(p["index"], max(p["max_abs"], ZERO_ERROR), _colour(p)) for p in probes
                    if isinstance(p.get("max_abs"), (int, float))]
    sqnr_points = [(p["index"], p["sqnr_db"], _colour(p)) for p in probes
                   if isinstance(p.get("sqnr_db"), (int, float)) and math.isfinite(p["sqnr_db"])]
    for axes, points in ((errors, error_points), (sqnrs, sqnr_points)):
        if points:
            axes.plot([x for x, _, _ in points], [y for _, y, _ in points], color="tab:blue", alpha=0.3)
            axes.scatter([x for x, _, _ in points], [y for _, y, _ in points],
                         c=[c for _, _, c in points], zorder=3)
        axes.set_xlim(-1, nodes)
        axes.grid(True, alpha=0.3)
    errors.set_yscale("log")
    errors.set_ylabel("max abs error")
    sqnrs.set_ylabel("SQNR, dB")
    sqnrs.ticklabel_format(axis="y", useOffset=False, style="plain")  # 6.02, not 1e-7+6.02
    values = [y for _, y, _ in sqnr_points]
    if values and max(values) - min(values) < 1.0:  # flat: a readable band around it
        middle = (max(values) + min(values)) / 2
        sqnrs.set_ylim(middle - 1.0, middle + 1.0)
    sqnrs.set_xlabel(f"node (topological order of {nodes}) and its op; identical values: error "
                     f"drawn at {ZERO_ERROR:g}, SQNR left out")
    named = {p["index"]: str(p.get("op_name") or p.get("name") or "") for p in probes}
    if first:
        named[first["index"]] = str(first.get("op_name") or first.get("name") or "")
    ticks = sorted(named)[:MAX_OP_TICKS]
    sqnrs.set_xticks(ticks, [f"{i} {named[i]}" for i in ticks], rotation=40, ha="right", fontsize=6)
    errors.set_xticks(ticks)
    errors.tick_params(labelbottom=False)
    if first:
        for axes in (errors, sqnrs):
            axes.axvline(first["index"], color="tab:red", linestyle=":")
        sqnrs.annotate(f"{where(first)}\n{first.get('source') or ''}", (first["index"], 0.95),
                       xycoords=("data", "axes fraction"), xytext=(6, 0), textcoords="offset points",
                       va="top", fontsize=7, color="tab:red",
                       bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "linewidth": 0})
    runs = f"{block.get('board_runs', 0)} board runs (at most {block.get('max_board_runs', '-')})"
    title = f"{case_key(case)} on {block.get('board')}: {block.get('message')}"
    errors.set_title("\n".join([*textwrap.wrap(title, TITLE_WIDTH)[:3],
                                f"{runs}; green: probe within tolerance, red: out of it"]),
                     fontsize=8, loc="left")


def drift_lines(key: str, record: dict[str, Any]) -> list[str]:
    """The console report of `hil localize --against fp32`."""
    first = record.get("first_below_floor")
    lines = [f"{key}: A8W8 against fp32 on the host, {record.get('compared')} of {record.get('nodes')} "
             f"ops compared, output SQNR {_number(record.get('output_sqnr_db'), '.1f')} dB"]
    if first:
        lines.append(f"first node below {record['floor_db']:g} dB: {first['index']} {first['name']} "
                     f"({where(first)}, {first.get('source') or 'no source line'}): "
                     f"SQNR {_number(first.get('sqnr_db'), '.1f')} dB")
    else:
        lines.append(f"no node below {record['floor_db']:g} dB")
    worst = sorted((p for p in record.get("curve") or [] if isinstance(p.get("sqnr_db"), (int, float))),
                   key=lambda p: p["sqnr_db"])[:5]
    for point in worst:
        lines.append(f"  {_number(point['sqnr_db'], '6.1f')} dB  {point['index']:>4} {point['name']} "
                     f"({where(point)})")
    return lines


def plot_drift(key: str, record: dict[str, Any], out: Path) -> None:
    """The SQNR of every op of the A8W8 graph against fp32 along the graph, the floor and the
    first op below it: a PNG at `out`."""
    figure, (axes,) = _figure(1)
    points = [p for p in record.get("curve") or [] if isinstance(p.get("sqnr_db"), (int, float))
              and math.isfinite(p["sqnr_db"])]
    axes.plot([p["index"] for p in points], [p["sqnr_db"] for p in points], marker=".", linewidth=1,
              label="SQNR of the op's A8W8 value against fp32")
    floor = record["floor_db"]
    axes.axhline(floor, color="tab:red", linestyle="--", label=f"floor {floor:g} dB")
    first = record.get("first_below_floor")
    if first:
        axes.scatter([first["index"]], [first["sqnr_db"]], color="tab:red", zorder=3)
        axes.annotate(f"{first['name']} ({where(first)})", (first["index"], first["sqnr_db"]),
                      xytext=(6, -12), textcoords="offset points", fontsize=8, color="tab:red")
    axes.set_xlabel(f"op (topological order, {record.get('nodes')} ops)")
    axes.set_ylabel("SQNR, dB")
    axes.set_title(f"{key}: A8W8 against fp32 per op (host, flow {record.get('flow')})", fontsize=9)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
