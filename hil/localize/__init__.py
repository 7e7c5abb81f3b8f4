"""Localization: find the first op a board computes wrong, by bisecting the graph.

For a case that ended FAIL_MISMATCH: take its exported (A8W8: quantized) graph
(`graph.py`), cut it after a node, lower the cut with the case's flow, run it on the same
board and judge it with the case's own code and tolerance rule at that node (`probes.py`);
a binary search over the clean cut points in topological order (`search.py`) finds the first
node out of tolerance in about log2(N) + 2 board runs. The result is the case record's
`localization` block (hil/report/results.schema.json). `drift.py` walks an A8W8 graph against fp32 on
the host instead (no board).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hil.cases.case import Case
from hil.errors import InfraError
from hil.localize.graph import GraphNode, plan_from_record
from hil.localize.probes import (
    HOST_WORK,
    PlanCache,
    build_probe,
    plan_key,
    probe_artifact,
    probe_key,
)
from hil.localize.search import Outcome, ProbeLost, bisect, max_board_runs
from hil.lower.artifact import Artifact
from hil.lower.cache import ArtifactCache
from hil.verdict import Verdict

log = logging.getLogger(__name__)

RunProbe = Callable[[Artifact, str], Any]
"""Runs a probe artifact on the board in a named slot; returns the `Execution`; InfraError
when the board fails."""


class _Graph:
    """The case's graph, built on first use (a warm localization never needs it). Callers
    hold HOST_WORK."""

    def __init__(self, case: Case, flow: str) -> None:
        self.case = case
        self.flow = flow
        self._built: tuple[Any, Any] | None = None

    def get(self) -> tuple[Any, Any]:
        if self._built is None:
            from hil.localize.graph import build_graph

            start = time.perf_counter()
            self._built = build_graph(self.case, self.flow)
            log.info("%s: graph built in %.1f s", self.case.key, time.perf_counter() - start)
        return self._built


def cut_plan(case: Case, flow: str, chipset: str, graph: _Graph,
             cache: ArtifactCache | None) -> tuple[list[GraphNode], dict[int, tuple[str, ...]]]:
    """The case's node table and cut frontiers, from the cache when it has them."""
    from hil.localize.graph import CutPlan

    plans = PlanCache(cache.root) if cache is not None else None
    key = plan_key(case, flow, chipset)
    record = plans.get(key) if plans is not None else None
    if record is None:
        with HOST_WORK:
            graph_module, _ = graph.get()
            record = CutPlan(graph_module, case.precision == "a8w8").record()
        if plans is not None:
            plans.put(key, record)
    return plan_from_record(record)


def _probe_case(case: Case) -> Case:
    """The case as a probe is judged: its tolerance rule, no checker, no delegation demand."""
    return dataclasses.replace(case, checker=None, expect_delegated=(), require_delegation=False)


def headline(record: dict[str, Any]) -> str:
    """The one-line finding of a localization record."""
    status = record.get("status")
    node = record.get("first_diverging") or {}
    module = node.get("module") or "(top level)"
    where = f"{node.get('op_name')} at {module} ({node.get('source') or 'no source line'})"
    if status == Outcome.FOUND.value:
        return f"first diverging op: {where}"
    if status == Outcome.FIRST_PROBE.value:
        return (f"diverges from the first probe: {where} is already out of tolerance, so no single op "
                "is to blame (every program on the board, or the graph's first op)")
    if status == Outcome.NOT_REPRODUCED.value:
        return "not localized: the probe of the whole graph is within tolerance"
    return f"localization incomplete: {record.get('reason') or 'stopped'}"


def localize_case(
    case: Case,
    flow: str,
    chipset: str,
    run_probe: RunProbe,
    *,
    board: str,
    cache: ArtifactCache | None,
    scratch: Path,
    case_outputs: Sequence[dict[str, Any]] | None = None,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Bisect `case` on a board (`run_probe`); the `localization` block of its record.

    `case_outputs`: the `outputs` entries of the case's own run on that board. The program
    of the last cut point computes exactly the case's outputs, so its verdict is taken from
    them instead of a board run (a case whose outputs are all within tolerance failed on
    its checker: nothing to bisect)."""
    from hil.judge import judge
    from hil.lower import LoweringFailed

    start = time.perf_counter()
    graph = _Graph(case, flow)
    nodes, frontiers = cut_plan(case, flow, chipset, graph, cache)
    judged_as = _probe_case(case)
    quantized = case.precision == "a8w8"
    probes: dict[int, dict[str, Any]] = {}
    records: list[dict[str, Any]] = []

    def probe(index: int) -> bool | None:
        node, outputs = nodes[index], frontiers[index]
        entry: dict[str, Any] = {**node.record(), "cut": node.cut, "outputs": list(outputs),
                                 "board_run": False}
        records.append(entry)
        probes[index] = entry
        began = time.perf_counter()

        def build(folder: Path) -> Artifact:
            graph_module, inputs = graph.get()
            return build_probe(graph_module, inputs, outputs, quantized, flow, chipset, folder)

        try:
            artifact, hit = probe_artifact(cache, probe_key(case, flow, chipset, outputs),
                                           scratch / f"p{index:04d}", build)
        except LoweringFailed as exc:
            entry.update(verdict=exc.verdict.value, diverged=None, message=exc.message)
            _report(entry)
            return None
        lower_s = round(time.perf_counter() - began, 4)
        entry.update(cache_hit=hit, pte_bytes=artifact.pte_bytes,
                     delegation=artifact.record_fields()["delegation"])
        try:
            execution = run_probe(artifact, f"p{len(records):02d}")
        except InfraError as exc:
            entry.update(verdict=Verdict.ERROR_INFRA.value, diverged=None, message=str(exc)[:300])
            _report(entry)
            raise ProbeLost(f"probe after {node.name}: {exc}") from exc
        entry["board_run"] = True
        judgement = judge(judged_as, artifact, execution)
        entry["seconds"] = {"lower": 0.0 if hit else lower_s, **execution.timings_s}
        values = [{"node": name, "max_abs": c.max_abs, "sqnr_db": c.sqnr_db, "atol": tol.atol,
                   "atol_rule": rule, "ok": c.ok}
                  for name, c, (tol, rule) in zip(outputs, judgement.comparisons, judgement.tolerances,
                                                  strict=False)]
        own = values[0] if values else {}
        diverged = {Verdict.PASS: False, Verdict.FAIL_MISMATCH: True}.get(judgement.verdict)
        entry.update(verdict=judgement.verdict.value, diverged=diverged, message=judgement.message,
                     max_abs=own.get("max_abs"), sqnr_db=own.get("sqnr_db"), atol=own.get("atol"),
                     atol_rule=own.get("atol_rule"), values=values)
        _report(entry)
        return diverged

    def _report(entry: dict[str, Any]) -> None:
        log.info("%s: probe after %s (%s): %s", case.key, entry["name"], entry.get("module"),
                 entry.get("verdict"))
        if on_probe is not None:
            on_probe(entry)

    candidates = sorted(frontiers)
    last_diverges = None
    if case_outputs is not None and candidates:
        bad = [output for output in case_outputs if not output.get("ok")]
        last_diverges = bool(bad)
        worst = (bad or list(case_outputs) or [{}])[0]
        measured = {key: worst.get(key) for key in ("max_abs", "sqnr_db", "atol", "atol_rule")}
        verdict = Verdict.FAIL_MISMATCH if bad else Verdict.PASS
        probes[candidates[-1]] = {"verdict": verdict.value, "from": "the case's own run", **measured}
    search = bisect(candidates, probe, last_diverges)
    record = _record(search, nodes, frontiers, probes, records)
    if search.outcome is Outcome.NOT_REPRODUCED and not search.probed:
        record["reason"] = "the case's outputs are within tolerance: it failed on its checker"
    if last_diverges is not None:
        record["whole_graph"] = _node_result(nodes, probes, candidates[-1])
    record.update(board=board, flow=flow, precision=case.precision,
                  seconds=round(time.perf_counter() - start, 2))
    record["message"] = headline(record)
    return record


def _node_result(nodes: list[GraphNode], probes: dict[int, dict[str, Any]],
                 index: int | None) -> dict[str, Any] | None:
    if index is None:
        return None
    found = {**nodes[index].record()}
    entry = probes.get(index, {})
    for key in ("max_abs", "sqnr_db", "atol", "atol_rule", "verdict"):
        found[key] = entry.get(key)
    if "from" in entry:
        found["from"] = entry["from"]
    return found


def _record(search: Any, nodes: list[GraphNode], frontiers: dict[int, tuple[str, ...]],
            probes: dict[int, dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    first = _node_result(nodes, probes, search.first_bad)
    if first is not None and search.last_good is not None:
        first["spans"] = [
            {"index": n.index, "name": n.name, "op_name": n.op_name, "module": n.module, "reason": n.reason}
            for n in nodes[search.last_good + 1 : search.first_bad] if n.cut is None
        ]
    return {
        "status": search.outcome.value,
        "reason": search.reason,
        "nodes": len(nodes),
        "clean_cut_points": len(frontiers),
        "board_runs": sum(1 for entry in records if entry["board_run"]),
        "max_board_runs": max_board_runs(len(nodes)),
        "first_diverging": first,
        "last_good": _node_result(nodes, probes, search.last_good),
        "probes": records,
        "unclean": [{"index": n.index, "name": n.name, "op_name": n.op_name, "reason": n.reason}
                    for n in nodes if n.cut is None or n.index not in frontiers],
        "cache_hits": sum(1 for entry in records if entry.get("cache_hit")),
    }

