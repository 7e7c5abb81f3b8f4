"""The A8W8 stage: `EnnQuantizer(Precision.A8W8)`, calibration, convert — on every flow.

The same quantized graph is lowered for `enn`, `xnnpack` and `portable`: on host flows the
quantize/dequantize pairs either end inside an XNNPACK delegate (int8 kernels) or run on
ExecuTorch's quantized/portable kernels, and the artifact lists which (undelegated ops).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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


def quantize_a8w8(module: torch.nn.Module, example: tuple[torch.Tensor, ...],
                  calibration: Sequence[tuple[torch.Tensor, ...]]) -> torch.fx.GraphModule:
    """Post-training A8W8 quantization with the ENN quantizer, calibrated on `calibration`."""
    from executorch.backends.samsung.quantizer.quantizer import EnnQuantizer, Precision
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = EnnQuantizer()
    quantizer.setup_quant_params(Precision.A8W8)
    graph = torch.export.export(module, example).module()
    prepared = prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for sample in calibration:
            prepared(*sample)
    # fold_quantize=True: the host kernels abort on unfolded per-channel weight quantize ops.
    return convert_pt2e(prepared, fold_quantize=True)


def _target_name(node: torch.fx.Node) -> str:
    target = node.target
    name = getattr(target, "__name__", str(target))
    return name.split("::")[-1].split(".")[0]


def _scale_of(node: Any, graph_module: torch.fx.GraphModule) -> float | None:
    """The quantization scale of the value `node` produces, when it comes straight from a
    per-tensor dequantize (through shape-only ops)."""
    seen = 0
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and seen < 16:
        name = _target_name(node)
        if name == "dequantize_per_tensor":
            scale = node.args[1]
            if isinstance(scale, torch.fx.Node) and scale.op == "get_attr":
                scale = getattr(graph_module, str(scale.target))
            if isinstance(scale, torch.Tensor):
                return float(scale.reshape(-1)[0])
            return float(scale) if isinstance(scale, (int, float)) else None
        if name == "dequantize_per_channel" or not name.startswith(_PASS_THROUGH):
            return None
        node = node.args[0] if node.args else None
        seen += 1
    return None


def output_scales(graph_module: torch.fx.GraphModule) -> tuple[float | None, ...]:
    """Per flat output of a converted graph, the scale of its final dequantize (None for an
    output that is not quantized, e.g. indices or an op the quantizer leaves in float)."""
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    flat = torch.utils._pytree.tree_leaves(output.args[0])
    return tuple(_scale_of(node, graph_module) for node in flat)
