"""The graph a localization cuts: node table (op, module path, source line), clean cut
points, frontiers, and cut programs that return exactly the full graph's intermediate values."""

from __future__ import annotations

import pytest
import torch

from hil.localize.graph import CutPlan, build_graph, cut_module, iterate_values
from hil.lower.quantize import output_scales

from . import fixture_cases, forward_line

pytestmark = pytest.mark.slow  # export and A8W8 calibration of a small CNN: seconds


@pytest.fixture(scope="module")
def fp32():
    graph_module, inputs = build_graph(fixture_cases("fp32")[0], "xnnpack")
    return graph_module, inputs, CutPlan(graph_module, quantized=False)


@pytest.fixture(scope="module")
def a8w8():
    graph_module, inputs = build_graph(fixture_cases("a8w8")[0], "xnnpack")
    return graph_module, inputs, CutPlan(graph_module, quantized=True)


def by_name(plan: CutPlan) -> dict:
    return {node.name: node for node in plan.nodes}


def test_nodes_carry_op_module_path_and_the_models_source_line(fp32) -> None:
    _, _, plan = fp32
    nodes = by_name(plan)
    first_hardswish = next(n for n in plan.nodes if n.op_name == "hardswish")
    assert (first_hardswish.name, first_hardswish.module) == ("hardswish", "head.1")
    assert first_hardswish.module_type == "torch.nn.modules.activation.Hardswish"
    assert first_hardswish.source == f"tests/fixtures/localize_models.py:{forward_line('x = self.head(x)')}"
    add = nodes["add"]
    assert (add.op, add.module) == ("aten.add.Tensor", "")  # the residual add, in forward itself
    assert add.source.endswith(f":{forward_line('self.block(x) + x')}")
    assert [n.index for n in plan.nodes] == list(range(len(plan.nodes)))


def test_tuples_are_not_cut_points_and_a_residual_cut_returns_the_skip_value(fp32) -> None:
    _, _, plan = fp32
    batch_norms = [n for n in plan.nodes if n.op_name == "_native_batch_norm_legit_no_training"]
    assert batch_norms and all(n.cut is None and "tuple" in n.reason for n in batch_norms)
    assert all(n.index not in plan.frontiers for n in batch_norms)
    inside_block = next(n for n in plan.nodes if n.module == "block.3")  # the block's 2nd conv
    skip = next(n for n in plan.nodes if n.module == "stem.2")  # relu: the skip connection
    assert plan.frontiers[inside_block.index] == (inside_block.name, skip.name)
    last = plan.candidates[-1]
    assert plan.frontiers[last] == (plan.nodes[last].name,)  # the whole graph: its output only


def test_a_cut_returns_the_full_graphs_values_of_its_frontier(fp32) -> None:
    graph_module, inputs, plan = fp32
    values = {node.name: value.clone() for node, value in iterate_values(graph_module, inputs)
              if isinstance(value, torch.Tensor)}
    for index in plan.candidates:
        outputs = plan.frontiers[index]
        cut = cut_module(graph_module, outputs)
        got = cut(*inputs)
        assert len(got) == len(outputs)
        for name, tensor in zip(outputs, got, strict=True):
            torch.testing.assert_close(tensor, values[name], rtol=0, atol=0)
        used = {n.name for n in cut.graph.nodes if n.op == "call_function"}
        assert all(n.index <= index for n in plan.nodes if n.name in used)  # dead code removed


def test_a8w8_cuts_after_the_requantization_and_never_inside_a_fused_pattern(a8w8) -> None:
    graph_module, _, plan = a8w8
    nodes = by_name(plan)
    stem_conv = next(n for n in plan.nodes if n.module == "stem.0")  # conv → relu: one pattern
    assert stem_conv.cut is None and "fused quantization pattern" in stem_conv.reason
    skip = next(n for n in plan.nodes if n.module == "stem.2")  # quantized once, dequantized per consumer
    inside_block = next(n for n in plan.nodes if n.module == "block.3")
    assert plan.frontiers[inside_block.index] == (inside_block.cut, skip.cut)
    hardswish = nodes["hardswish"]
    assert hardswish.cut.startswith("dequantize_per_tensor")
    cut = cut_module(graph_module, plan.frontiers[hardswish.index])
    (step,) = output_scales(cut)
    dequantize = next(n for n in cut.graph.nodes if n.name == hardswish.cut)
    assert step is not None and step >= dequantize.args[1] > 0  # the step read at the probed node
    assert not any("quantize" in n.op for n in plan.nodes)  # the quantization's nodes are not ops


def test_walking_the_graph_leaves_the_threads_grad_mode_as_it_found_it(fp32) -> None:
    """Grad mode is the thread's: a walk that is suspended, or abandoned half-way (a probe
    that stops at the first diverging node), must not leave it off for the caller (a later
    quantization-aware training in the same process)."""
    graph_module, inputs, _ = fp32
    assert torch.is_grad_enabled()
    walk = iterate_values(graph_module, inputs)
    next(walk)
    assert torch.is_grad_enabled()  # suspended at its first node
    walk = None  # abandoned, not exhausted
    assert torch.is_grad_enabled()
