"""The A8W8 stage: `EnnQuantizer(Precision.A8W8)`, calibration, convert — on every flow.

The same quantized graph is lowered for `enn`, `xnnpack` and `portable`: on host flows the
quantize/dequantize pairs either end inside an XNNPACK delegate (int8 kernels) or run on
ExecuTorch's quantized/portable kernels, and the artifact lists which (undelegated ops).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

log = logging.getLogger(__name__)

CALIBRATION_SAMPLES = 8
"""Seeded calibration batches for A8W8 when a case gives none."""

_DEQUANTIZE = ("dequantize_per_tensor", "dequantize_per_channel")
_PASS_THROUGH = ("view", "reshape", "permute", "squeeze", "unsqueeze", "flatten", "clone",
                 "contiguous", "_unsafe_view", "select", "slice", "getitem", "expand")
"""Ops that move quantized values without changing their scale: the output's scale is the
scale of the dequantize before them."""


def quantize_a8w8(module: torch.nn.Module, example: tuple[Any, ...],
                  calibration: Sequence[tuple[Any, ...]],
                  fold_quantize: bool = True,
                  train: Callable[[torch.fx.GraphModule], None] | None = None) -> torch.fx.GraphModule:
    """A8W8 quantization with the ENN quantizer: post-training, calibrated on `calibration`,
    or quantization-aware, trained by `train` (a case's `qat`).

    Post-training is line for line `quantize_module(module, inputs, calibration_dataset,
    Precision.A8W8)` of `executorch/backends/samsung/utils/export_utils.py` (pinned by
    tests/lower/test_upstream_path.py), SDPA decomposition before `prepare_pt2e` included,
    with two differences: calibration runs under `torch.no_grad()` (no numbers change), and
    `fold_quantize` is a parameter (and `check_guards=False` says what upstream's `.module()`
    gets implicitly). Flow `enn` keeps upstream's `False` (the ENN backend
    consumes the weight quantize nodes itself); host flows fold (`True`): ExecuTorch's host
    kernels abort on unfolded per-channel weight quantize ops. Quantization-aware follows
    upstream's test_mobilebert_qat.py: `setup_quant_params(A8W8, is_per_channel=True,
    is_qat=True)`, `prepare_pt2e`, training, `convert_pt2e`; no calibration."""
    from executorch.backends.samsung.quantizer.quantizer import EnnQuantizer, Precision
    from executorch.backends.transforms.decompose_sdpa import DecomposeScaledDotProductAttention
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = EnnQuantizer()
    quantizer.setup_quant_params(Precision.A8W8, True, train is not None)  # is_per_channel, is_qat
    # `.module()` called from a file under an "executorch" path makes no `_guards_fn` call
    # module (torch/export/_unlift.py, _ok_to_generate_guards_fn); hil's path is not one, so
    # it asks for what upstream gets. With the guard call the quantizer sees an extra user of
    # the first input and duplicates its dequantize node.
    exported_module = torch.export.export(module, example).module(check_guards=False)
    DecomposeScaledDotProductAttention()(exported_module)
    annotated_module = prepare_pt2e(exported_module, quantizer)
    if train is not None:
        train(annotated_module)
    else:
        with torch.no_grad():
            for data in calibration:
                annotated_module(*data)
    return convert_pt2e(annotated_module, fold_quantize=fold_quantize)


def _target_name(node: torch.fx.Node) -> str:
    target = node.target
    name = getattr(target, "__name__", str(target))
    return name.split("::")[-1].split(".")[0]


def _per_tensor_scale(node: torch.fx.Node, graph_module: torch.fx.GraphModule) -> float | None:
    scale = node.args[1] if len(node.args) > 1 else None
    if isinstance(scale, torch.fx.Node) and scale.op == "get_attr":
        scale = getattr(graph_module, str(scale.target))
    if isinstance(scale, torch.Tensor):
        return float(scale.reshape(-1)[0])
    return float(scale) if isinstance(scale, (int, float)) else None


def _step_of(node: Any, graph_module: torch.fx.GraphModule) -> float | None:
    """The quantization step behind the value `node` produces: the scale of the per-tensor
    dequantize it comes from (through shape-only ops), or the larger scale of the per-tensor
    dequantized inputs of the op that produced the quantized value (a requantizing op carries
    its inputs' rounding into its output). None when the value is not quantized."""
    seen = 0
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and seen < 16:
        name = _target_name(node)
        if name == "dequantize_per_tensor":
            steps = [_per_tensor_scale(node, graph_module)]
            quantize = node.args[0]
            producer = quantize.args[0] if isinstance(quantize, torch.fx.Node) and quantize.args else None
            if isinstance(producer, torch.fx.Node):
                steps += [
                    _per_tensor_scale(arg, graph_module)
                    for arg in producer.all_input_nodes
                    if arg.op == "call_function" and _target_name(arg) == "dequantize_per_tensor"
                ]
            known = [s for s in steps if s is not None]
            return max(known) if known else None
        if name == "dequantize_per_channel" or not name.startswith(_PASS_THROUGH):
            return None
        node = node.args[0] if node.args else None
        seen += 1
    return None


def output_scales(graph_module: torch.fx.GraphModule) -> tuple[float | None, ...]:
    """Per flat output of a converted graph, the quantization step that bounds its rounding
    (see `_step_of`); None for an output that is not quantized (indices, an op the quantizer
    leaves in float)."""
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    flat = torch.utils._pytree.tree_leaves(output.args[0])
    return tuple(_step_of(node, graph_module) for node in flat)
