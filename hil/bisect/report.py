"""The report of a bisection: `bisect.json` (its schema below and in the docs), a Markdown
summary (`--github`: the step summary) and a plot of the metric over the candidates.

bisect.json (`schema` "exynos-hil/bisect", `version` 1): `status`, `command`, `good` and `bad`
(path, run id, tuple), `changed` (each element that differs, its source, whether bisected),
`cases` (the metric, the cases run, those listed apart and missing from BAD), `regression`
(latency: the confirmation's figures), `isolation`, `factor`, `candidates` (per factor, each
candidate's state, reason, runs and judgement), `answer` (kind, message, culprit or range,
confidence, `exit_code`), `rounds` and `runs` (counted per phase), `board_runs` (every board
run: its builds, board, verdicts, samples, and its own results.json), `notes`.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from hil.bisect.answers import (
    CULPRIT,
    EXIT_CODES,
    INTERRUPTED,
    NO_BOARD,
    NOT_BISECTABLE,
    NOT_REPRODUCED,
    RANGE,
)
from hil.bisect.boards import failed
from hil.bisect.candidates import Candidate
from hil.bisect.search import Answer, Bisection
from hil.report.results import atomic_write_text, sanitise
from hil.report.summary import cell

SCHEMA = "exynos-hil/bisect"
VERSION = 1


def _candidate(candidate: Candidate | None) -> dict[str, Any] | None:
    return None if candidate is None else {"factor": candidate.factor, **candidate.record()}


def answer_record(answer: Answer) -> dict[str, Any]:
    return {"kind": answer.kind, "exit_code": EXIT_CODES[answer.kind], "message": answer.message,
            "factor": answer.factor, "culprit": _candidate(answer.culprit),
            "parent": _candidate(answer.parent),
            "range": [_candidate(c) for c in answer.range] if answer.range else None,
            "factors": list(answer.factors), "confidence": answer.confidence}


def _by_phase(items: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item["phase"]] = counts.get(item["phase"], 0) + 1
    return counts


def candidates_record(bisection: Bisection) -> dict[str, list[dict[str, Any]]]:
    """Per searched factor, every candidate with its state and the runs that tested it."""
    found = {}
    primary = bisection.settings.primary
    for name, states in bisection.progress.states.items():
        rows = []
        for candidate in bisection.factors[name].candidates:
            builds = bisection.good.swap(name, candidate).record()
            runs = [o for o in bisection.progress.runs if o.get("builds") == builds]
            medians = [statistics.median(o["samples"][primary]) for o in runs
                       if primary and (o.get("samples") or {}).get(primary)]
            state = states.get(candidate.index, {"state": "untested"})
            rows.append({**candidate.record(), **state, "runs": [o["number"] for o in runs],
                         "failed_runs": sum(map(failed, runs)),
                         "p50_ms": medians})
        found[name] = rows
    return found


def document(bisection: Bisection, answer: Answer, header: dict[str, Any], status: str) -> dict[str, Any]:
    """bisect.json."""
    progress = bisection.progress
    return sanitise({
        "schema": SCHEMA, "version": VERSION, "status": status, **header,
        "regression": progress.regression.record() if progress.regression else None,
        "isolation": progress.isolation,
        "factor": answer.factor,
        "candidates": candidates_record(bisection),
        "answer": answer_record(answer),
        "rounds": {"total": sum(progress.rounds.values()), "by_phase": progress.rounds},
        "runs": {"total": len(progress.runs), "by_phase": _by_phase(progress.runs)},
        "board_runs": progress.runs,
        "notes": progress.notes + list(header.get("notes", [])),
    })


def write(out: Path, doc: dict[str, Any]) -> Path:
    import json

    path = out / "bisect.json"
    atomic_write_text(path, json.dumps(doc, indent=1, allow_nan=False) + "\n")
    return path


def markdown(doc: dict[str, Any]) -> str:
    """The summary: the answer first, then what changed, the candidates and the counts."""
    answer = doc["answer"]
    title = {CULPRIT: f"culprit {answer['factor']} {(answer['culprit'] or {}).get('label')}",
             RANGE: "a range, no single culprit", NOT_REPRODUCED: "not reproduced",
             NOT_BISECTABLE: "not bisectable", NO_BOARD: "no board",
             INTERRUPTED: "interrupted (run the same command to go on)"}[answer["kind"]]
    lines = [f"## hil bisect: {title}", "", cell(answer["message"], 2000), ""]
    if answer.get("confidence"):
        lines += ["Confidence: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                             for k, v in answer["confidence"].items()), ""]
    lines += ["| element | GOOD | BAD | bisected |", "| --- | --- | --- | --- |"]
    for change in doc["changed"]:
        bisected = f"yes ({change['source']})" if change["source"] else "no: no candidates"
        lines.append(f"| {change['element']} | `{cell(str(change['good']), 80)}` | "
                     f"`{cell(str(change['bad']), 80)}` | {bisected} |")
    if not doc["changed"]:
        lines.append("| (nothing recorded differs) | | | |")
    cases = doc["cases"]
    lines += ["", f"Cases ({cases['metric']}): " + ", ".join(f"`{k}`" for k in cases["bisected"])]
    for key, why in cases["listed_apart"].items():
        lines.append(f"- `{key}`: {why}")
    if cases["missing_from_bad"]:
        lines.append("- missing from BAD (not bisected): "
                     + ", ".join(f"`{k}`" for k in cases["missing_from_bad"]))
    regression = doc.get("regression")
    if regression:
        lines += ["", f"Regression: {regression['good_median_ms']:.3f} → "
                  f"{regression['bad_median_ms']:.3f} ms (p50), noise {regression['noise_ms']:.3f} ms "
                  f"(half a good run's IQR), p = {regression['p']:.2g}"]
    latency = cases["metric"] == "latency"
    for name, rows in doc["candidates"].items():
        measure = "p50 ms of each run" if latency else "failed runs"
        lines += ["", f"### {name} candidates", "",
                  f"| # | candidate | state | runs | {measure} | note |",
                  "| ---: | --- | --- | ---: | --- | --- |"]
        for row in rows:
            if row["state"] == "untested":
                continue
            p50 = ", ".join(f"{v:.3f}" for v in row["p50_ms"]) or "-"
            measured = p50 if latency else str(row["failed_runs"])
            judged = (row.get("judgement") or {}).get("vs_good")
            note = row.get("reason") or judged or row.get("subject") or ""
            lines.append(f"| {row['index']} | {cell(row['label'], 60)} | {row['state']} | "
                         f"{len(row['runs'])} | {measured} | {cell(str(note), 200)} |")
        untested = sum(row["state"] == "untested" for row in rows)
        if untested:
            lines.append(f"\n{untested} of {len(rows)} candidates needed no run.")
    lines += ["", f"{doc['runs']['total']} board run(s) in {doc['rounds']['total']} round(s) "
              f"({', '.join(f'{k} {v}' for k, v in doc['rounds']['by_phase'].items())}); each run's "
              "results.json is under runs/."]
    for note in doc["notes"]:
        lines.append(f"> {cell(note, 500)}")
    return "\n".join(lines) + "\n"


def plot(doc: dict[str, Any], path: Path) -> bool:
    """The metric over the searched factor's candidates (latency: each run's p50; numbers:
    pass or fail per run); False when nothing was searched."""
    if not doc["candidates"]:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name, rows = next(iter(doc["candidates"].items()))
    latency = doc["cases"]["metric"] == "latency"
    figure, axes = plt.subplots(figsize=(max(6.0, 0.25 * len(rows)), 3.6))
    colours = {"good": "tab:green", "bad": "tab:red", "skipped": "tab:gray", "unknown": "tab:orange"}
    for row in rows:
        values = row["p50_ms"] if latency else [1.0 if i < row["failed_runs"] else 0.0
                                                for i in range(len(row["runs"]))]
        colour = colours.get(row["state"], "tab:blue")
        if values:
            axes.scatter([row["index"]] * len(values), values, color=colour, s=18, zorder=3)
        elif row["state"] == "skipped":
            axes.axvline(row["index"], color=colour, linestyle=":", linewidth=1)
    culprit = doc["answer"].get("culprit")
    if culprit:
        axes.axvline(culprit["index"], color="tab:red", linestyle="--", linewidth=1)
        axes.annotate(f" culprit {culprit['label']}", (culprit["index"], axes.get_ylim()[1]), va="top",
                      fontsize=8, color="tab:red")
    axes.set_xlabel(f"{name} candidate (0: GOOD's build)")
    axes.set_ylabel("p50 ms per run" if latency else "each run")
    if not latency:
        axes.set_yticks([0.0, 1.0], ["passed", "failed"])
        axes.set_ylim(-0.3, 1.3)
    axes.set_title(f"hil bisect: {doc['answer']['kind']}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
