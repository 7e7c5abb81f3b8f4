"""Quantization drift on the host: where A8W8 itself loses the model (`hil localize
--against fp32`, no board).

Both graphs come from the case's own pipeline (`graph.build_graph`): the fp32 export and the
A8W8 quantized export. Each op of the quantized graph is paired with the fp32 node computing
the same value: the same module path, op and occurrence — and when quantization folded ops
away (BatchNorm into the conv before it), the fp32 node at the end of the folded chain (the
conv's pair is the BatchNorm's output). The quantized graph's value of an op is the one the
next op reads: the dequantize after its quantize where there is one. Both graphs run once,
node by node in step, so memory stays that of two forward passes; each pair gives an SQNR of
the A8W8 value against fp32, and the first op whose SQNR falls below a floor is reported.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from hil.cases.case import Case
from hil.localize.graph import CutPlan, build_graph, is_qdq, iterate_values, module_of, op_base
from hil.verdict import sqnr_db


def _key_table(graph_module: torch.fx.GraphModule) -> dict[tuple[str, str, int], torch.fx.Node]:
    """(module path, op, occurrence) → op node, for every op of the graph."""
    counts: dict[tuple[str, str], int] = {}
    table: dict[tuple[str, str, int], torch.fx.Node] = {}
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or is_qdq(node):
            continue
        base = (module_of(node)[0], op_base(str(node.target)))
        table[(*base, counts.get(base, 0))] = node
        counts[base] = counts.get(base, 0) + 1
    return table


def pair_nodes(fp32: torch.fx.GraphModule, quantized: torch.fx.GraphModule) -> dict[str, str]:
    """Quantized op node name → the fp32 node name computing the same value."""
    fp32_keys = _key_table(fp32)
    quantized_keys = _key_table(quantized)
    fp32_key_of = {node: key for key, node in fp32_keys.items()}
    pairs: dict[str, str] = {}
    for key, node in quantized_keys.items():
        match = fp32_keys.get(key)
        if match is None:
            continue
        while True:  # ops quantization folded away: follow the chain to its last value
            users = [u for u in match.users if u.op == "call_function"]
            if len(users) != 1 or fp32_key_of.get(users[0]) in quantized_keys:
                break
            match = users[0]
        pairs[node.name] = match.name
    return pairs


def _values(graph_module: torch.fx.GraphModule, inputs: Any, wanted: set[str]) -> Iterator[tuple[str, Any]]:
    for node, value in iterate_values(graph_module, inputs):
        if node.name in wanted:
            yield node.name, value


def drift_against_fp32(case: Case, flow: str, floor_db: float) -> dict[str, Any]:
    """The A8W8 graph of `case` against its fp32 graph: the per-op SQNR curve and the first
    op below `floor_db` (the `drift` record, hil/report/results.schema.json)."""
    start = time.perf_counter()
    fp32_module, inputs = build_graph(dataclasses.replace(case, precision="fp32"), flow)
    quantized_module, _ = build_graph(case, flow)
    plan = CutPlan(quantized_module, quantized=True)
    pairs = pair_nodes(fp32_module, quantized_module)
    value_node = {node.name: node.cut or node.name for node in plan.nodes}
    by_value: dict[str, list[str]] = {}
    for node in plan.nodes:
        if node.name in pairs:
            by_value.setdefault(value_node[node.name], []).append(node.name)
    uses = Counter(pairs.values())
    fp32_values = _values(fp32_module, inputs, set(uses))
    stash: dict[str, np.ndarray] = {}
    stats: dict[str, tuple[float | None, float | None]] = {}
    for name, value in _values(quantized_module, inputs, set(by_value)):
        for op_name in by_value[name]:
            wanted = pairs[op_name]
            while wanted not in stash:
                produced, fp32_value = next(fp32_values)
                stash[produced] = fp32_value.detach().numpy().copy()
            uses[wanted] -= 1
            reference = stash[wanted] if uses[wanted] else stash.pop(wanted)
            actual = value.detach().numpy()
            if reference.shape != actual.shape:
                stats[op_name] = (None, None)
                continue
            difference = np.abs(reference.astype(np.float64) - actual.astype(np.float64))
            stats[op_name] = (sqnr_db(reference, actual), float(difference.max()) if difference.size else 0.0)
    curve = []
    first = None
    for node in plan.nodes:
        sqnr, max_abs = stats.get(node.name, (None, None))
        point = {**node.record(), "fp32_node": pairs.get(node.name), "sqnr_db": sqnr, "max_abs": max_abs}
        curve.append(point)
        if first is None and sqnr is not None and not math.isnan(sqnr) and sqnr < floor_db:
            first = point
    compared = [p for p in curve if p["sqnr_db"] is not None]
    return {
        "against": "fp32",
        "flow": flow,
        "floor_db": floor_db,
        "nodes": len(plan.nodes),
        "compared": len(compared),
        "first_below_floor": first,
        "output_sqnr_db": compared[-1]["sqnr_db"] if compared else None,
        "curve": curve,
        "seconds": round(time.perf_counter() - start, 2),
    }
