"""The built-in `ops` suite: every op of the ENN op-support table and the extra ops of the
ExecuTorch 1.5.1 Samsung test tree, each at fp32 and at A8W8.

A case tagged `upstream:FILE::TEST` has the module configuration and input shapes of that
test of the 1.5.1 wheel (`executorch/backends/samsung/test/ops/`), pinned by
tests/cases/test_ops_upstream.py; its A8W8 variant quantizes the same module, whether or not
upstream has an A8W8 test of it. Cases without the tag are hil's own (ops the upstream tree
does not test, such as layer_norm and the hard* activations, and extra variants). Inputs are
seeded uniform draws in a range that suits the op (positive for sqrt/log, ...), not
upstream's standard normal draws. Every case id starts with its op's name and carries the
tag `op:<name>`.

`expect_delegated` is not written by hand: it is what ExecuTorch 1.5.1's ENN partitioner
keeps of the case's edge graph at that precision (`hil.lower.enn_partition`: upstream's
`ops_to_not_decompose`, edge compile config and support rule, read from the wheel), stored
in DELEGATION_FILE by `scripts/derive-ops-delegation.py` and pinned by
tests/cases/test_ops_delegation.py. On flow `enn` every one of them must end in a delegate
(recorded, not required, on host flows).

Tolerances: fp32 is compared elementwise (atol/rtol 1e-4 unless a case says why not). A8W8
is compared with the quantized model run eagerly on the host (the graph convert_pt2e
produced): atol = 1e-3 + 2 quantization steps of the output (the scale of its final
dequantize node, or of the producing op's quantized inputs when larger), and SQNR >= 30 dB;
an output the quantizer leaves in float (ops the ENN quantizer does not annotate, indices)
falls back to the case's atol.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

from hil.cases.case import A8W8_RULE, A8W8_RULE_STEPS, PRECISIONS, Case, InputSpec, definition_site
from hil.cases.op_modules import (
    BatchNorm,
    Binary,
    Concat,
    ConvThen,
    Dequantize,
    Index,
    Quantize,
    SplitPart,
    TopK,
    Unary,
    WithConstant,
    crop,
    expand_channels,
    interpolate,
    pad_rows,
    seeded,
    square,
    to_fp16,
)
from hil.expectation import Expectation
from hil.verdict import Tolerance, Verdict

ENN_OPS = (
    "add", "avg_pool2d", "batch_norm", "bmm", "cat", "clamp", "constant_pad_nd", "conv2d",
    "div", "embedding", "expand_copy", "gelu", "getitem", "hardsigmoid", "hardswish",
    "hardtanh", "layer_norm", "leaky_relu", "linear", "log_softmax", "max_pool2d", "maximum",
    "mean_dim", "minimum", "mul", "permute", "pixel_shuffle", "quantize_per_tensor",
    "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel", "relu",
    "reshape", "rsqrt", "select", "slice_copy", "softmax", "sqrt", "squeeze", "sub", "to_copy",
    "unsqueeze", "upsample_bilinear2d", "upsample_nearest2d",
)
"""The ENN backend's op-support table (quantize/dequantize split into per-tensor and
per-channel, each direction its own op)."""

EXTRA_OPS = (
    "cos", "sin", "log", "pow", "rms_norm", "group_norm", "index", "topk", "sum_int_list",
    "split_with_sizes_copy", "tanh", "sigmoid",
)
"""Ops the ExecuTorch 1.5.1 Samsung test tree adds beyond the table."""

OPS = ENN_OPS + EXTRA_OPS
"""Every op the suite must cover at fp32 and at A8W8 (tests/cases/test_ops_coverage.py)."""

GROUP_NORM_A8W8 = Expectation(
    Verdict.FAIL_QUANTIZE,
    "EnnQuantizer gives GroupNorm's 1-D weight a per-channel observer: IndexError at calibration",
    "scripts/repro/enn-quantizer-group-norm.py",
)
"""ExecuTorch 1.5.1's known failure (upstream has no A8W8 GroupNorm test)."""

DELEGATION_FILE = Path(__file__).with_name("ops_delegation.json")
"""Per case, the ops the ENN partitioner keeps (derived, see the module doc)."""

FP32_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-4)
A8W8_TOLERANCE = A8W8_RULE
A8W8_SCALE_STEPS = A8W8_RULE_STEPS
"""A8W8 atol = A8W8_TOLERANCE.atol + A8W8_SCALE_STEPS x the output's quantization step
(`hil.cases.case.A8W8_RULE`)."""


def coverage_gaps(suite: Sequence[Case], ops: Sequence[str] = OPS) -> list[str]:
    """`op: precision` for every op of `ops` that has no case at that precision (by the
    case's `op:` tag), plus cases whose id does not start with their op."""
    covered = {(tag.removeprefix("op:"), case.precision)
               for case in suite for tag in case.tags if tag.startswith("op:")}
    gaps = [f"{op}: no {precision} case" for op in ops for precision in PRECISIONS
            if (op, precision) not in covered]
    for case in suite:
        op = next((t.removeprefix("op:") for t in case.tags if t.startswith("op:")), None)
        if op is None or not (case.id == op or case.id.startswith(op + "_")):
            gaps.append(f"{case.key}: id does not start with its op ({op})")
    return gaps


# -- case helpers -------------------------------------------------------------------------


def _in(*shape: int, low: float = -1.0, high: float = 1.0, dtype: str = "float32") -> InputSpec:
    return InputSpec(tuple(shape), dtype, low, high)


def _w(*shape: int) -> InputSpec:
    """A float input drawn from [-3, 3] (upstream draws from a standard normal)."""
    return _in(*shape, low=-3.0, high=3.0)


@functools.lru_cache(maxsize=1)
def derived_delegation() -> dict[str, tuple[str, ...]]:
    """`precision.case_id` -> the ops ExecuTorch 1.5.1's ENN partitioner keeps for that case
    (DELEGATION_FILE, written by `scripts/derive-ops-delegation.py`)."""
    table = json.loads(DELEGATION_FILE.read_text(encoding="utf-8"))
    return {key: tuple(ops or ()) for key, ops in table["cases"].items()}


def _op(
    op: str,
    case_id: str,
    factory: Callable[[], nn.Module],
    inputs: Sequence[InputSpec],
    upstream: str = "",
    precisions: Sequence[str] = PRECISIONS,
    fp32: Tolerance = FP32_TOLERANCE,
    a8w8: Tolerance = A8W8_TOLERANCE,
    known_a8w8: Expectation | None = None,
) -> list[Case]:
    """One case per precision of `op`, defined at the caller's line; `upstream` names the
    upstream test (`test_add.py::test_fp32_simple_add`) whose module and shapes it has;
    `known_a8w8` is the A8W8 case's known failure, if it has one."""
    if op not in OPS or not (case_id == op or case_id.startswith(op + "_")):
        raise ValueError(f"ops suite: case {case_id!r} must start with a listed op ({op!r})")
    file, line = definition_site()
    delegation = derived_delegation()
    return [
        Case(
            id=case_id,
            suite="ops",
            factory=factory,
            inputs=tuple(inputs),
            precision=precision,
            tolerance=a8w8 if precision == "a8w8" else fp32,
            atol_scale_steps=A8W8_SCALE_STEPS if precision == "a8w8" else 0.0,
            expect_delegated=delegation.get(f"{precision}.{case_id}", ()),
            tags=(f"op:{op}", *((f"upstream:{upstream}",) if upstream else ())),
            file=file,
            line=line,
            expect=known_a8w8 if precision == "a8w8" else None,
        )
        for precision in precisions
    ]


P = functools.partial


def cases() -> list[Case]:
    """The ops suite, fp32 and A8W8."""
    x4 = _w(1, 3, 8, 8)
    found: list[Case] = []
    add = found.extend
    # elementwise binary
    add(_op("add", "add_simple", P(seeded, Binary, torch.add), [x4, x4],
            "test_add.py::test_fp32_simple_add"))
    add(_op("add", "add_const", P(seeded, WithConstant, torch.add, (1, 3, 8, 8)), [x4],
            "test_add.py::test_fp32_const_add"))
    add(_op("add", "add_broadcast", P(seeded, Binary, torch.add), [_in(1, 1, 8, 8), x4],
            "test_add.py::test_fp32_add_broadcast"))
    add(_op("sub", "sub_simple", P(seeded, Binary, torch.sub), [x4, x4],
            "test_sub.py::test_fp32_simple_sub"))
    add(_op("sub", "sub_const", P(seeded, WithConstant, torch.sub, (1, 3, 8, 8)), [x4],
            "test_sub.py::test_fp32_const_sub"))
    add(_op("sub", "sub_broadcast", P(seeded, Binary, torch.sub), [_in(1, 1, 8, 8), x4],
            "test_sub.py::test_fp32_sub_broadcast"))
    add(_op("mul", "mul_simple", P(seeded, Binary, torch.mul), [x4, x4],
            "test_mul.py::test_fp32_simple_mul"))
    add(_op("mul", "mul_const", P(seeded, WithConstant, torch.mul, (1, 3, 8, 8)), [x4],
            "test_mul.py::test_fp32_const_mul"))
    add(_op("mul", "mul_broadcast", P(seeded, Binary, torch.mul), [_in(1, 1, 8, 8), x4],
            "test_mul.py::test_fp32_mul_broadcast"))
    denominator = _in(1, 3, 8, 8, low=0.5, high=2.0)
    add(_op("div", "div_simple", P(seeded, Binary, torch.div), [x4, denominator],
            "test_div.py::test_fp32_simple_div"))
    add(_op("div", "div_broadcast", P(seeded, Binary, torch.div), [_in(1, 1, 8, 8), denominator],
            "test_div.py::test_fp32_div_broadcast"))
    pair = [_in(1, 8, 16, 16), _in(1, 8, 16, 16)]
    add(_op("maximum", "maximum", P(seeded, Binary, torch.maximum), pair))
    add(_op("minimum", "minimum", P(seeded, Binary, torch.min), pair,
            "test_minimum.py::test_fp32_minimum"))
    add(_op("pow", "pow_scalar", P(seeded, Unary, square), [_in(1, 1, 16, 8, low=-2.0, high=2.0)],
            "test_pow.py::test_fp32_pow_scalar"))
    add(_op("pow", "pow_tensor", P(seeded, Binary, torch.pow),
            [_in(1, 1, 16, 8, low=0.5, high=2.0), _in(1, 1, 16, 8)], "test_pow.py::test_fp32_pow_tensor"))
    add(_op("bmm", "bmm", P(seeded, Binary, torch.bmm), [_in(2, 16, 56), _in(2, 56, 32)],
            "test_bmm.py::test_fp32_bmm"))
    # convolution, linear, embedding
    image = [_w(1, 3, 24, 24)]
    add(_op("conv2d", "conv2d_stride2", P(seeded, nn.Conv2d, 3, 16, 3, stride=2, padding=1), image,
            "test_conv2d.py::test_fp32_conv2d_with_bias"))
    add(_op("conv2d", "conv2d_no_bias", P(seeded, nn.Conv2d, 3, 16, 3, stride=2, padding=1, bias=False),
            image, "test_conv2d.py::test_fp32_conv2d_without_bias"))
    add(_op("conv2d", "conv2d_depthwise", P(seeded, nn.Conv2d, 8, 8, 3, stride=2, padding=1, groups=8),
            [_w(1, 8, 24, 24)], "test_conv2d.py::test_fp32_depthwise_conv2d"))
    add(_op("conv2d", "conv2d_dilation", P(seeded, nn.Conv2d, 3, 16, 3, stride=2, padding=1, dilation=2),
            image, "test_conv2d.py::test_fp32_conv2d_with_dilation"))
    add(_op("conv2d", "conv2d_transpose", P(seeded, nn.ConvTranspose2d, 32, 8, 2, stride=2),
            [_in(1, 32, 24, 24)], "test_conv2d.py::test_fp32_transpose_conv2d"))
    add(_op("linear", "linear", P(seeded, nn.Linear, 24, 8), [_w(128, 24)],
            "test_linear.py::test_fp32_linear"))
    add(_op("embedding", "embedding", P(seeded, nn.Embedding, 2048, 256),
            [_in(1, 64, low=0, high=12, dtype="int32")], "test_embedding.py::test_fp32_embedding"))
    # pooling, normalisation, reductions
    pool_in = [_w(1, 16, 24, 24)]
    add(_op("avg_pool2d", "avg_pool2d", P(seeded, nn.AvgPool2d, 2, 1, count_include_pad=False),
            pool_in, "test_avg_pool2d.py::test_fp32_avg_pool2d"))
    add(_op("avg_pool2d", "avg_pool2d_stride2", P(seeded, nn.AvgPool2d, 2, 2, count_include_pad=False),
            pool_in, "test_avg_pool2d.py::test_fp32_avg_pool2d_with_stride"))
    add(_op("avg_pool2d", "avg_pool2d_kernel4", P(seeded, nn.AvgPool2d, 4, 1, count_include_pad=False),
            pool_in, "test_avg_pool2d.py::test_fp32_avg_pool2d_with_kernel_size"))
    add(_op("max_pool2d", "max_pool2d", P(seeded, nn.MaxPool2d, 2, 1), pool_in,
            "test_max_pool2d.py::test_fp32_max_pool2d"))
    add(_op("max_pool2d", "max_pool2d_padding", P(seeded, nn.MaxPool2d, 2, 1, padding=1), pool_in,
            "test_max_pool2d.py::test_fp32_max_pool2d_with_padding"))
    add(_op("max_pool2d", "max_pool2d_kernel4", P(seeded, nn.MaxPool2d, 4, 1), pool_in,
            "test_max_pool2d.py::test_fp32_max_pool2d_with_kernel_size"))
    add(_op("max_pool2d", "max_pool2d_dilation", P(seeded, nn.MaxPool2d, 2, 1, dilation=2), pool_in,
            "test_max_pool2d.py::test_fp32_max_pool2d_with_dilation"))
    # upstream's "with_stride" passes stride=1, its default: a stride of 2 is hil's own
    add(_op("max_pool2d", "max_pool2d_stride2", P(seeded, nn.MaxPool2d, 2, 2), pool_in))
    add(_op("batch_norm", "batch_norm", P(seeded, BatchNorm, 16), [_w(4, 16, 32, 32)],
            "test_batch_norm.py::test_fp32_batch_norm"))
    add(_op("layer_norm", "layer_norm", P(seeded, nn.LayerNorm, 32), [_w(1, 16, 32)]))
    add(_op("group_norm", "group_norm", P(seeded, nn.GroupNorm, 3, 12), [_w(1, 12, 8, 8)],
            "test_group_norm.py::test_fp32_group_norm", known_a8w8=GROUP_NORM_A8W8))
    add(_op("rms_norm", "rms_norm", P(seeded, nn.RMSNorm, [196], eps=1e-5), [_w(1, 196)],
            "test_rms_norm.py::test_fp32_rms_norm"))
    add(_op("mean_dim", "mean_dim_keepdim", P(seeded, Unary, torch.mean, dim=[2, 3], keepdim=True),
            [x4], "test_mean_dim.py::test_fp32_mean_with_keep_dims"))
    add(_op("mean_dim", "mean_dim", P(seeded, Unary, torch.mean, dim=[2, 3], keepdim=False),
            [x4], "test_mean_dim.py::test_fp32_mean_without_keep_dims"))
    add(_op("sum_int_list", "sum_int_list_keepdim", P(seeded, Unary, torch.sum, [2, 3], keepdim=True),
            [_in(1, 16, 8, 8)], "test_sum_int_list.py::test_fp32_sum_dim_with_keep_dims"))
    add(_op("sum_int_list", "sum_int_list", P(seeded, Unary, torch.sum, [2, 3], keepdim=False),
            [_in(1, 16, 8, 8)], "test_sum_int_list.py::test_fp32_sum_dim_without_keep_dims"))
    add(_op("softmax", "softmax_dim1", P(seeded, nn.Softmax, dim=1), [_w(1, 16, 8, 8)],
            "test_softmax.py::test_fp32_softmax"))
    add(_op("softmax", "softmax_last", P(seeded, nn.Softmax, dim=-1), [_w(2, 10)]))
    add(_op("log_softmax", "log_softmax_dim1", P(seeded, nn.LogSoftmax, dim=1),
            [_w(1, 16, 56, 56)], "test_log_softmax.py::test_fp32_log_softmax"))
    topk_in = [_in(1, 16, 8, 8)]
    add(_op("topk", "topk_dim3", P(seeded, TopK, 5, 3), topk_in, "test_topk.py::test_fp32_topk_dim3",
            precisions=("fp32",)))
    add(_op("topk", "topk_dim_negative1", P(seeded, TopK, 5, -1), topk_in,
            "test_topk.py::test_fp32_topk_dim_negative1", precisions=("fp32",)))
    # Quantized values tie, and tied values have no unique index order: A8W8 compares values.
    add(_op("topk", "topk_values", P(seeded, TopK, 5, -1, values_only=True), topk_in))
    # activations
    act_in = [_in(1, 3, 56, 56, low=-4.0, high=4.0)]
    add(_op("relu", "relu", P(seeded, nn.ReLU), act_in, "test_relu.py::test_fp32_single_relu"))
    add(_op("relu", "relu_conv", P(seeded, ConvThen, nn.ReLU()), act_in,
            "test_relu.py::test_fp32_conv_relu"))
    small_act = [_in(1, 3, 8, 8, low=-4.0, high=4.0)]
    add(_op("gelu", "gelu", P(seeded, nn.GELU), small_act, "test_gelu.py::test_fp32_single_gelu"))
    add(_op("gelu", "gelu_conv", P(seeded, ConvThen, nn.GELU()), small_act,
            "test_gelu.py::test_fp32_conv_gelu"))
    add(_op("leaky_relu", "leaky_relu", P(seeded, nn.LeakyReLU), small_act,
            "test_leaky_relu.py::test_fp32_leaky_relu"))
    add(_op("hardsigmoid", "hardsigmoid", P(seeded, nn.Hardsigmoid), small_act))
    add(_op("hardswish", "hardswish", P(seeded, nn.Hardswish), small_act))
    add(_op("hardtanh", "hardtanh", P(seeded, nn.Hardtanh, -1.0, 1.0), small_act))
    add(_op("hardtanh", "hardtanh_relu6", P(seeded, nn.ReLU6), small_act))
    add(_op("clamp", "clamp", P(seeded, Unary, torch.clamp, 0.0, 2.0), [_w(1, 16, 8, 8)],
            "test_clamp.py::test_fp32_clamp"))
    add(_op("tanh", "tanh", P(seeded, nn.Tanh), small_act, "test_tanh.py::test_fp32_tanh"))
    add(_op("sigmoid", "sigmoid", P(seeded, nn.Sigmoid), [_in(1, 4, 32, 32, low=-4.0, high=4.0)],
            "test_sigmoid.py::test_fp32_sigmoid"))
    # elementwise math
    add(_op("sqrt", "sqrt", P(seeded, Unary, torch.sqrt), [_in(16, 8, low=0.0, high=3.0)],
            "test_sqrt.py::test_fp32_sqrt"))
    add(_op("rsqrt", "rsqrt", P(seeded, Unary, torch.rsqrt), [_in(16, 8, low=0.1, high=3.0)],
            "test_rsqrt.py::test_fp32_rsqrt"))
    add(_op("log", "log", P(seeded, Unary, torch.log), [_in(1, 16, 56, 56, low=0.1, high=4.0)],
            "test_log.py::test_fp32_log"))
    trig = [_w(1, 3, 56, 56)]
    add(_op("cos", "cos", P(seeded, Unary, torch.cos), trig, "test_cos.py::test_fp32_cos"))
    add(_op("sin", "sin", P(seeded, Unary, torch.sin), trig, "test_sin.py::test_fp32_sin"))
    # data movement
    add(_op("cat", "cat_axis1", P(seeded, Concat, 1), [x4, x4], "test_cat.py::test_fp32_concat_on_axis1"))
    add(_op("cat", "cat_axis3", P(seeded, Concat, 3), [x4, x4], "test_cat.py::test_fp32_concat_on_axis3"))
    add(_op("constant_pad_nd", "constant_pad_nd", P(seeded, Unary, pad_rows), [_in(1, 6, 8, 16)],
            "test_constant_pad_nd.py::test_fp32_constant_pad_nd"))
    add(_op("expand_copy", "expand_copy", P(seeded, Unary, expand_channels), [_in(1, 1, 8, 8)],
            "test_expand_copy.py::test_fp32_expand_copy"))
    for order in ((0, 2, 3, 1), (0, 3, 1, 2), (0, 3, 2, 1)):
        name = "".join(map(str, order))
        add(_op("permute", f"permute_{name}", P(seeded, Unary, torch.permute, order), [x4],
                f"test_permute.py::test_fp32_permute_{name}"))
    add(_op("reshape", "reshape", P(seeded, Unary, torch.reshape, (1, 32, 8)), [_in(1, 16, 2, 8)],
            "test_reshape.py::test_fp32_reshape"))
    add(_op("squeeze", "squeeze_dim2", P(seeded, Unary, torch.squeeze, [2]), [_in(1, 2, 1, 3)],
            "test_squeeze.py::test_fp32_squeeze"))
    add(_op("unsqueeze", "unsqueeze_dim1", P(seeded, Unary, torch.unsqueeze, 1), [_in(2, 3, 1, 4)],
            "test_unsqueeze.py::test_fp32_unsqueeze"))
    add(_op("select", "select_axis1", P(seeded, Unary, torch.select, 1, 0), [_in(1, 4, 16, 16)],
            "test_select.py::test_fp32_select_on_axis1"))
    add(_op("select", "select_axis3", P(seeded, Unary, torch.select, 3, 6), [_in(1, 4, 16, 16)],
            "test_select.py::test_fp32_concat_on_axis3"))  # sic: upstream's name for axis 3
    add(_op("slice_copy", "slice_copy", P(seeded, Unary, crop), [_in(1, 16, 16, 16)],
            "test_slice_copy.py::test_fp32_slice_copy"))
    index_in = [_in(4, 16, 8, 8)]
    for axis, positions in ((0, [2, 0]), (1, [0, 3, 2, 11, 8]), (2, [1, 2, 5, 6]), (3, [0, 3, 6, 4])):
        add(_op("index", f"index_axis{axis}", P(seeded, Index, axis, positions), index_in,
                f"test_index.py::test_fp32_index_on_axis{axis}"))
    split_in = [_in(6, 6)]
    add(_op("split_with_sizes_copy", "split_with_sizes_copy_dim1", P(seeded, SplitPart, [3, 2, 1], 1),
            split_in, "test_split_with_sizes_copy.py::test_fp32_split_dim1"))
    add(_op("split_with_sizes_copy", "split_with_sizes_copy_even", P(seeded, SplitPart, 3, 0),
            split_in, "test_split_with_sizes_copy.py::test_fp32_split_default"))
    add(_op("split_with_sizes_copy", "split_with_sizes_copy_chunk", P(seeded, SplitPart, [3, 3], 0),
            split_in, "test_split_with_sizes_copy.py::test_fp32_split_chunk"))
    add(_op("getitem", "getitem_split", P(seeded, SplitPart, [3, 2, 1], 1, part=1), split_in))
    add(_op("pixel_shuffle", "pixel_shuffle", P(seeded, nn.PixelShuffle, 3), [_in(1, 9, 4, 4)],
            "test_pixel_shuffle.py::test_fp32_pixel_shuffle"))
    add(_op("upsample_bilinear2d", "upsample_bilinear2d",
            P(seeded, Unary, interpolate, 32, "bilinear", False), [_in(1, 16, 16, 16)],
            "test_upsample_bilinear2d.py::test_fp32_upsample_bilinear2d"))
    add(_op("upsample_bilinear2d", "upsample_bilinear2d_align_corners",
            P(seeded, Unary, interpolate, 32, "bilinear", True), [_in(1, 16, 16, 16)]))
    add(_op("upsample_nearest2d", "upsample_nearest2d",
            P(seeded, Unary, interpolate, 32, "nearest", None), [_in(1, 4, 16, 16)],
            "test_upsample_nearest2d.py::test_fp32_upsample_nearest2d"))
    add(_op("to_copy", "to_copy_fp16", P(seeded, Unary, to_fp16), [_in(1, 3, 56, 56)],
            "test_to_copy.py::test_fp32_to_copy"))
    # quantize / dequantize
    add(_op("quantize_per_tensor", "quantize_per_tensor", P(seeded, Quantize, False),
            [_in(1, 4, 8, 8, low=-2.0, high=2.0)]))
    add(_op("dequantize_per_tensor", "dequantize_per_tensor", P(seeded, Dequantize, False),
            [_in(1, 4, 8, 8, low=-128, high=128, dtype="int8")]))
    add(_op("quantize_per_channel", "quantize_per_channel", P(seeded, Quantize, True),
            [_in(1, 4, 8, 8, low=-2.0, high=2.0)]))
    add(_op("dequantize_per_channel", "dequantize_per_channel", P(seeded, Dequantize, True),
            [_in(1, 4, 8, 8, low=-128, high=128, dtype="int8")]))
    return found
