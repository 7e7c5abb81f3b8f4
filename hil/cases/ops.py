"""The built-in `ops` suite: every op of the ENN op-support table, of the ExecuTorch 1.5.1
Samsung test tree and of upstream main's newer Samsung tests, each at fp32 and at A8W8.

A case tagged `upstream:VERSION:PATH::TEST` has the module configuration, input shapes,
explicit parameters and tolerance of that upstream test (`PATH` under
`backends/samsung/test/`; VERSION `1.5.1` is the wheel, `main` upstream's main branch at the
commit `hil/cases/upstream_reference.json` names). An A8W8 case carries its own upstream
A8W8 test when upstream has one, else the fp32 test whose module it quantizes.
`scripts/upstream-coverage.py` compares every tagged case with its test in a checkout or wheel.
Cases without the tag are hil's own variants, kept where they cover what upstream's do not
(non-trivial BatchNorm statistics, log of positive inputs at A8W8, ...). Inputs are seeded
uniform draws in a range that suits the op, not upstream's standard normal draws, except
where upstream's inputs carry the test (permutations for topk's order). Every case id starts
with its op's name and carries the tag `op:<name>`; the yolo26 primitives also `group:yolo26`.

`expect_delegated` is not written by hand: it is what the installed ExecuTorch's ENN
partitioner keeps of the case's edge graph at that precision (`hil.lower.enn_partition`:
upstream's `ops_to_not_decompose`, edge compile config and support rule, read from the
wheel), stored in DELEGATION_FILE by `scripts/derive-ops-delegation.py` and pinned by
tests/cases/test_ops_delegation.py. On flow `enn` every one of them must end in a delegate
(recorded, not required, on host flows). What newer upstream versions expect instead is
recorded per version in `hil/cases/upstream_reference.json` and checked against the installed
partitioner (tests/cases/test_delegation_versions.py).

Tolerances: a tagged fp32 case is judged as upstream judges: elementwise with the test's
atol/rtol, else the test harness's defaults (atol = rtol = 1e-3), NaN on both sides equal
(`hil.verdict.compare_output`, as `torch.allclose(equal_nan=True)`). hil's own fp32 cases use
atol = rtol = 1e-4. A8W8 is hil's own rule, stricter than upstream's `atol=0.2`: compared
with the quantized model run eagerly on the host (the graph convert_pt2e produced), atol =
1e-3 + 2 quantization steps of the output (the scale of its final dequantize node, or of the
producing op's quantized inputs when larger), and SQNR >= 30 dB; an output the quantizer
leaves in float (ops the ENN quantizer does not annotate, indices) falls back to the case's
atol. An A8W8 variant that means nothing (NaN calibration, tied indices, a module that
quantizes itself) is a SKIP with its reason.
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
from hil.cases.upstream_modules import (
    AffineBatchNorm,
    QuantizedTopK,
    RmsNormWeight,
    TopKOutput,
    attention_scale,
    negated_permutation,
    tenths_permutation,
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

NEWER_OPS = ("prelu", "pixel_unshuffle", "amax")
"""Ops upstream main's newer Samsung tests add beyond both (ops/test_prelu.py,
ops/test_pixel_unshuffle.py, the amax of models/test_yolo26_primitives.py)."""

OPS = ENN_OPS + EXTRA_OPS + NEWER_OPS
"""Every op the suite must cover at fp32 and at A8W8, each list matching the facts of
`hil/cases/upstream_reference.json` (tests/cases/test_ops_coverage.py)."""

GROUP_NORM_A8W8 = Expectation(
    Verdict.FAIL_QUANTIZE,
    "EnnQuantizer gives GroupNorm's 1-D weight a per-channel observer: IndexError at calibration",
    "scripts/repro/enn-quantizer-group-norm.py",
)
"""ExecuTorch 1.5.1's known failure (upstream has no A8W8 GroupNorm test)."""

_DROPPED_MAX = ("torch.export drops hardtanh's max_val when it is the default 1 (hardtanh(x, 0)), "
                "and {} reads node.args[2]: IndexError")
HARDTANH_FP32 = Expectation(
    Verdict.FAIL_LOWER,
    _DROPPED_MAX.format("XNNPACK's HardTanhVisitor (the host flows' lowering; ENN's builder reads "
                        "the default, so on flow enn the case passes: XPASS)"),
    "scripts/repro/xnnpack-hardtanh-default-max.py",
)
HARDTANH_A8W8 = Expectation(
    Verdict.FAIL_QUANTIZE,
    _DROPPED_MAX.format("EnnQuantizer's _is_hardtanh_for_relux"),
    "scripts/repro/enn-quantizer-hardtanh-default-max.py",
)
"""Upstream main's Hardtanh(0, 1) meets two bugs of ExecuTorch 1.5.1 (upstream tests it at
fp32, on flow enn only)."""

TIED_INDICES = ("int8 values tie, and tied values have no unique index order: the A8W8 indices "
                "mean nothing (the values-only case is the A8W8 topk)")
QUANTIZES_ITSELF = ("upstream's QuantizedTopK carries its own int8 quantize/dequantize pairs (hil "
                    "lowers it as given, without PTQ): quantizing it again means nothing")

DELEGATION_FILE = Path(__file__).with_name("ops_delegation.json")
"""Per case, the ops the ENN partitioner keeps (derived, see the module doc)."""

FP32_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-4)
"""hil's own fp32 cases."""
UPSTREAM_FP32_TOLERANCE = Tolerance(atol=1e-3, rtol=1e-3)
"""An upstream-tagged fp32 case whose test gives no atol/rtol: the defaults of upstream's
`Tester.run_method_and_compare_outputs` (executorch/backends/test/harness/tester.py)."""
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
    """`precision.case_id` -> the ops the installed ExecuTorch's ENN partitioner keeps for that
    case (DELEGATION_FILE, written by `scripts/derive-ops-delegation.py`; null for a skipped
    case)."""
    table = json.loads(DELEGATION_FILE.read_text(encoding="utf-8"))
    return {key: tuple(ops or ()) for key, ops in table["cases"].items()}


def _op(
    op: str,
    case_id: str,
    factory: Callable[[], nn.Module],
    inputs: Sequence[InputSpec],
    upstream: str = "",
    precisions: Sequence[str] = PRECISIONS,
    fp32: Tolerance | None = None,
    a8w8: Tolerance = A8W8_TOLERANCE,
    known_a8w8: Expectation | None = None,
    known_fp32: Expectation | None = None,
    upstream_a8w8: str = "",
    skip_a8w8: str = "",
    input_fn: Callable[[int], tuple[torch.Tensor, ...]] | None = None,
    tags: Sequence[str] = (),
) -> list[Case]:
    """One case per precision of `op`, defined at the caller's line. `upstream`
    (`VERSION:PATH::TEST`, e.g. `1.5.1:ops/test_add.py::test_fp32_simple_add`) names the upstream
    test whose module, shapes and parameters the case has; its fp32 tolerance is then
    upstream's (`fp32`, default the harness's). `upstream_a8w8` names upstream's own A8W8 test
    of the module; `known_fp32` and `known_a8w8` are the cases' known failures, `skip_a8w8` why
    the A8W8 variant is not run."""
    if op not in OPS or not (case_id == op or case_id.startswith(op + "_")):
        raise ValueError(f"ops suite: case {case_id!r} must start with a listed op ({op!r})")
    file, line = definition_site()
    delegation = derived_delegation()
    fp32 = fp32 or (UPSTREAM_FP32_TOLERANCE if upstream else FP32_TOLERANCE)

    def tagged(precision: str) -> tuple[str, ...]:
        test = upstream_a8w8 if precision == "a8w8" and upstream_a8w8 else upstream
        return (f"op:{op}", *tags, *((f"upstream:{test}",) if test else ()))

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
            tags=tagged(precision),
            file=file,
            line=line,
            expect=known_a8w8 if precision == "a8w8" else known_fp32,
            skip=skip_a8w8 if precision == "a8w8" else "",
            input_fn=input_fn,
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
            "1.5.1:ops/test_add.py::test_fp32_simple_add",
            upstream_a8w8="1.5.1:ops/test_add.py::test_a8w8_simple_add"))
    add(_op("add", "add_const", P(seeded, WithConstant, torch.add, (1, 3, 8, 8)), [x4],
            "1.5.1:ops/test_add.py::test_fp32_const_add",
            upstream_a8w8="1.5.1:ops/test_add.py::test_a8w8_const_add"))
    add(_op("add", "add_broadcast", P(seeded, Binary, torch.add), [_in(1, 1, 8, 8), x4],
            "1.5.1:ops/test_add.py::test_fp32_add_broadcast"))
    add(_op("sub", "sub_simple", P(seeded, Binary, torch.sub), [x4, x4],
            "1.5.1:ops/test_sub.py::test_fp32_simple_sub"))
    add(_op("sub", "sub_const", P(seeded, WithConstant, torch.sub, (1, 3, 8, 8)), [x4],
            "1.5.1:ops/test_sub.py::test_fp32_const_sub"))
    add(_op("sub", "sub_broadcast", P(seeded, Binary, torch.sub), [_in(1, 1, 8, 8), x4],
            "1.5.1:ops/test_sub.py::test_fp32_sub_broadcast"))
    add(_op("mul", "mul_simple", P(seeded, Binary, torch.mul), [x4, x4],
            "1.5.1:ops/test_mul.py::test_fp32_simple_mul",
            upstream_a8w8="1.5.1:ops/test_mul.py::test_a8w8_simple_mul"))
    add(_op("mul", "mul_const", P(seeded, WithConstant, torch.mul, (1, 3, 8, 8)), [x4],
            "1.5.1:ops/test_mul.py::test_fp32_const_mul",
            upstream_a8w8="1.5.1:ops/test_mul.py::test_a8w8_const_mul"))
    add(_op("mul", "mul_broadcast", P(seeded, Binary, torch.mul), [_in(1, 1, 8, 8), x4],
            "1.5.1:ops/test_mul.py::test_fp32_mul_broadcast",
            upstream_a8w8="1.5.1:ops/test_mul.py::test_a8w8_mul_broadcast"))
    add(_op("mul", "mul_attention_scale", P(seeded, Unary, attention_scale), [_w(1, 2, 100, 100)],
            "main:unit/test_mul.py::test_attention_scale_has_matching_operand_shapes"))
    denominator = _in(1, 3, 8, 8, low=0.5, high=2.0)
    add(_op("div", "div_simple", P(seeded, Binary, torch.div), [x4, denominator],
            "1.5.1:ops/test_div.py::test_fp32_simple_div",
            upstream_a8w8="1.5.1:ops/test_div.py::test_a8w8_simple_div"))
    add(_op("div", "div_broadcast", P(seeded, Binary, torch.div), [_in(1, 1, 8, 8), denominator],
            "1.5.1:ops/test_div.py::test_fp32_div_broadcast",
            upstream_a8w8="1.5.1:ops/test_div.py::test_a8w8_div_broadcast"))
    pair = [_in(1, 8, 16, 16), _in(1, 8, 16, 16)]
    add(_op("maximum", "maximum", P(seeded, Binary, torch.maximum), [_w(1, 3, 56, 56), _w(1, 3, 56, 56)],
            "main:ops/test_maximum.py::test_fp32_maximum"))
    add(_op("minimum", "minimum", P(seeded, Binary, torch.min), pair,
            "1.5.1:ops/test_minimum.py::test_fp32_minimum"))
    add(_op("pow", "pow_scalar", P(seeded, Unary, square), [_in(1, 1, 16, 8, low=-2.0, high=2.0)],
            "1.5.1:ops/test_pow.py::test_fp32_pow_scalar"))
    add(_op("pow", "pow_tensor", P(seeded, Binary, torch.pow),
            [_in(1, 1, 16, 8, low=0.5, high=2.0), _in(1, 1, 16, 8)],
            "1.5.1:ops/test_pow.py::test_fp32_pow_tensor"))
    add(_op("bmm", "bmm", P(seeded, Binary, torch.bmm), [_in(2, 16, 56), _in(2, 56, 32)],
            "1.5.1:ops/test_bmm.py::test_fp32_bmm", fp32=Tolerance(0.005, 0.005)))
    # convolution, linear, embedding
    image = [_w(1, 3, 24, 24)]
    add(_op("conv2d", "conv2d_stride2", P(seeded, nn.Conv2d, 3, 16, 3, stride=2, padding=1), image,
            "1.5.1:ops/test_conv2d.py::test_fp32_conv2d_with_bias",
            upstream_a8w8="1.5.1:ops/test_conv2d.py::test_a8w8_conv2d_with_bias"))
    add(_op("conv2d", "conv2d_no_bias", P(seeded, nn.Conv2d, 3, 16, 3, stride=2, padding=1, bias=False),
            image, "1.5.1:ops/test_conv2d.py::test_fp32_conv2d_without_bias",
            upstream_a8w8="1.5.1:ops/test_conv2d.py::test_a8w8_conv2d_without_bias"))
    add(_op("conv2d", "conv2d_depthwise", P(seeded, nn.Conv2d, 8, 8, 3, stride=2, padding=1, groups=8),
            [_w(1, 8, 24, 24)], "1.5.1:ops/test_conv2d.py::test_fp32_depthwise_conv2d",
            upstream_a8w8="1.5.1:ops/test_conv2d.py::test_a8w8_depthwise_conv2d"))
    add(_op("conv2d", "conv2d_dilation", P(seeded, nn.Conv2d, 3, 16, 3, stride=2, padding=1, dilation=2),
            image, "1.5.1:ops/test_conv2d.py::test_fp32_conv2d_with_dilation",
            upstream_a8w8="1.5.1:ops/test_conv2d.py::test_a8w8_conv2d_with_dilation"))
    add(_op("conv2d", "conv2d_transpose", P(seeded, nn.ConvTranspose2d, 32, 8, 2, stride=2),
            [_in(1, 32, 24, 24)], "1.5.1:ops/test_conv2d.py::test_fp32_transpose_conv2d"))
    add(_op("linear", "linear", P(seeded, nn.Linear, 24, 8), [_w(128, 24)],
            "1.5.1:ops/test_linear.py::test_fp32_linear"))
    add(_op("embedding", "embedding", P(seeded, nn.Embedding, 2048, 256),
            [_in(1, 64, low=0, high=12, dtype="int32")], "1.5.1:ops/test_embedding.py::test_fp32_embedding"))
    # pooling, normalisation, reductions
    pool_in = [_w(1, 16, 24, 24)]
    add(_op("avg_pool2d", "avg_pool2d", P(seeded, nn.AvgPool2d, 2, 1, count_include_pad=False),
            pool_in, "1.5.1:ops/test_avg_pool2d.py::test_fp32_avg_pool2d",
            upstream_a8w8="1.5.1:ops/test_avg_pool2d.py::test_a8w8_avg_pool2d"))
    add(_op("avg_pool2d", "avg_pool2d_stride2", P(seeded, nn.AvgPool2d, 2, 2, count_include_pad=False),
            pool_in, "1.5.1:ops/test_avg_pool2d.py::test_fp32_avg_pool2d_with_stride"))
    add(_op("avg_pool2d", "avg_pool2d_kernel4", P(seeded, nn.AvgPool2d, 4, 1, count_include_pad=False),
            pool_in, "1.5.1:ops/test_avg_pool2d.py::test_fp32_avg_pool2d_with_kernel_size",
            upstream_a8w8="1.5.1:ops/test_avg_pool2d.py::test_a8w8_avg_pool2d_with_kernel_size"))
    add(_op("max_pool2d", "max_pool2d", P(seeded, nn.MaxPool2d, 2, 1), pool_in,
            "1.5.1:ops/test_max_pool2d.py::test_fp32_max_pool2d",
            upstream_a8w8="1.5.1:ops/test_max_pool2d.py::test_a8w8_max_pool2d"))
    add(_op("max_pool2d", "max_pool2d_padding", P(seeded, nn.MaxPool2d, 2, 1, padding=1), pool_in,
            "1.5.1:ops/test_max_pool2d.py::test_fp32_max_pool2d_with_padding",
            upstream_a8w8="1.5.1:ops/test_max_pool2d.py::test_a8w8_max_pool2d_with_padding"))
    add(_op("max_pool2d", "max_pool2d_kernel4", P(seeded, nn.MaxPool2d, 4, 1), pool_in,
            "1.5.1:ops/test_max_pool2d.py::test_fp32_max_pool2d_with_kernel_size",
            upstream_a8w8="1.5.1:ops/test_max_pool2d.py::test_a8w8_max_pool2d_with_kernel_size"))
    add(_op("max_pool2d", "max_pool2d_dilation", P(seeded, nn.MaxPool2d, 2, 1, dilation=2), pool_in,
            "1.5.1:ops/test_max_pool2d.py::test_fp32_max_pool2d_with_dilation",
            upstream_a8w8="1.5.1:ops/test_max_pool2d.py::test_a8w8_max_pool2d_with_dilation"))
    # upstream's "with_stride" passes stride=1, its default: a stride of 2 is hil's own
    add(_op("max_pool2d", "max_pool2d_stride2", P(seeded, nn.MaxPool2d, 2, 2), pool_in))
    add(_op("batch_norm", "batch_norm", P(seeded, AffineBatchNorm, 16), [_w(4, 16, 32, 32)],
            "1.5.1:ops/test_batch_norm.py::test_fp32_batch_norm"))
    # upstream's running statistics are the defaults (BatchNorm is then an affine map): hil's
    # own variant folds non-trivial ones
    add(_op("batch_norm", "batch_norm_running_stats", P(seeded, BatchNorm, 16), [_w(4, 16, 32, 32)]))
    add(_op("layer_norm", "layer_norm", P(seeded, nn.LayerNorm, 10), [_w(1, 32, 10)],
            "main:ops/test_layer_norm.py::test_fp32_layer_norm"))
    add(_op("group_norm", "group_norm", P(seeded, nn.GroupNorm, 3, 12), [_w(1, 12, 8, 8)],
            "1.5.1:ops/test_group_norm.py::test_fp32_group_norm", known_a8w8=GROUP_NORM_A8W8))
    add(_op("rms_norm", "rms_norm", P(seeded, RmsNormWeight, [196], 2.0), [_w(1, 196)],
            "1.5.1:ops/test_rms_norm.py::test_fp32_rms_norm"))
    add(_op("mean_dim", "mean_dim_keepdim", P(seeded, Unary, torch.mean, dim=[2, 3], keepdim=True),
            [x4], "1.5.1:ops/test_mean_dim.py::test_fp32_mean_with_keep_dims",
            upstream_a8w8="1.5.1:ops/test_mean_dim.py::test_a8w8_mean_with_keep_dims"))
    add(_op("mean_dim", "mean_dim", P(seeded, Unary, torch.mean, dim=[2, 3], keepdim=False),
            [x4], "1.5.1:ops/test_mean_dim.py::test_fp32_mean_without_keep_dims",
            upstream_a8w8="1.5.1:ops/test_mean_dim.py::test_a8w8_mean_without_keep_dims"))
    add(_op("sum_int_list", "sum_int_list_keepdim", P(seeded, Unary, torch.sum, [2, 3], keepdim=True),
            [_in(1, 16, 8, 8)], "1.5.1:ops/test_sum_int_list.py::test_fp32_sum_dim_with_keep_dims",
            fp32=Tolerance(0.005, 0.005)))
    add(_op("sum_int_list", "sum_int_list", P(seeded, Unary, torch.sum, [2, 3], keepdim=False),
            [_in(1, 16, 8, 8)], "1.5.1:ops/test_sum_int_list.py::test_fp32_sum_dim_without_keep_dims",
            fp32=Tolerance(0.005, 0.005)))
    add(_op("softmax", "softmax_dim1", P(seeded, Unary, torch.softmax, dim=1), [_w(1, 16, 8, 8)],
            "1.5.1:ops/test_softmax.py::test_fp32_softmax"))
    add(_op("softmax", "softmax_last", P(seeded, nn.Softmax, dim=-1), [_w(2, 10)]))
    add(_op("log_softmax", "log_softmax_dim1", P(seeded, nn.LogSoftmax, dim=1),
            [_w(1, 16, 56, 56)], "1.5.1:ops/test_log_softmax.py::test_fp32_log_softmax"))
    topk_in = [_in(1, 16, 8, 8)]
    add(_op("topk", "topk_dim3", P(seeded, TopK, 5, 3), topk_in,
            "1.5.1:ops/test_topk.py::test_fp32_topk_dim3", precisions=("fp32",)))
    add(_op("topk", "topk_dim_negative1", P(seeded, TopK, 5, -1), topk_in,
            "1.5.1:ops/test_topk.py::test_fp32_topk_dim_negative1", precisions=("fp32",)))
    # Quantized values tie, and tied values have no unique index order: A8W8 compares values.
    add(_op("topk", "topk_values", P(seeded, TopK, 5, -1, values_only=True), topk_in))
    permuted = [_in(1, 2100, low=-2099.0, high=0.0)]
    add(_op("topk", "topk_indices_k300", P(seeded, TopKOutput, 300, -1, "indices"), permuted,
            "main:ops/test_topk.py::test_fp32_topk_indices_only", input_fn=P(negated_permutation, 2100),
            skip_a8w8=TIED_INDICES))
    add(_op("topk", "topk_values_k300", P(seeded, TopKOutput, 300, -1, "values"), permuted,
            "main:ops/test_topk.py::test_fp32_topk_values_only", input_fn=P(negated_permutation, 2100)))
    tenths = dict(input_fn=P(tenths_permutation, 127), skip_a8w8=QUANTIZES_ITSELF)
    add(_op("topk", "topk_quantized_indices", P(seeded, QuantizedTopK, 30, -1, "indices"),
            [_in(1, 127, low=0.0, high=12.7)], "main:ops/test_topk.py::test_a8w8_topk_indices_only",
            **tenths))
    for output in ("values", "both"):
        add(_op("topk", f"topk_quantized_{output}", P(seeded, QuantizedTopK, 30, -1, output, True),
                [_in(1, 127, low=0.0, high=12.7)],
                f"main:ops/test_topk.py::test_a8w8_topk_quantized_values[output={output}]", **tenths))
    # activations
    act_in = [_in(1, 3, 56, 56, low=-4.0, high=4.0)]
    add(_op("relu", "relu", P(seeded, nn.ReLU), act_in, "1.5.1:ops/test_relu.py::test_fp32_single_relu",
            upstream_a8w8="1.5.1:ops/test_relu.py::test_a8w8_single_relu"))
    add(_op("relu", "relu_conv", P(seeded, ConvThen, nn.ReLU()), act_in,
            "1.5.1:ops/test_relu.py::test_fp32_conv_relu",
            upstream_a8w8="1.5.1:ops/test_relu.py::test_a8w8_conv_relu"))
    small_act = [_in(1, 3, 8, 8, low=-4.0, high=4.0)]
    gelu_tolerance = Tolerance(0.002, 0.002)
    add(_op("gelu", "gelu", P(seeded, nn.GELU), small_act, "1.5.1:ops/test_gelu.py::test_fp32_single_gelu",
            fp32=gelu_tolerance))
    add(_op("gelu", "gelu_conv", P(seeded, ConvThen, nn.GELU()), small_act,
            "1.5.1:ops/test_gelu.py::test_fp32_conv_gelu", fp32=gelu_tolerance))
    add(_op("prelu", "prelu", P(seeded, nn.PReLU, 1), act_in, "main:ops/test_prelu.py::test_fp32_prelu"))
    add(_op("prelu", "prelu_per_channel", P(seeded, nn.PReLU, 3), act_in,
            "main:ops/test_prelu.py::test_fp32_prelu_per_channel"))
    add(_op("leaky_relu", "leaky_relu", P(seeded, nn.LeakyReLU), small_act,
            "1.5.1:ops/test_leaky_relu.py::test_fp32_leaky_relu"))
    # [-4, 4]: both saturated ends of the hard* activations (they bend at -3 and 3)
    hard_in = [_in(1, 16, 32, 32, low=-4.0, high=4.0)]
    add(_op("hardsigmoid", "hardsigmoid", P(seeded, nn.Hardsigmoid), hard_in,
            "main:ops/test_hardsigmoid.py::test_fp32_hard_sigmoid"))
    add(_op("hardswish", "hardswish", P(seeded, nn.Hardswish), hard_in,
            "main:ops/test_hardswish.py::test_fp32_hard_swish", fp32=Tolerance(0.002, 1e-3)))
    add(_op("hardtanh", "hardtanh", P(seeded, nn.Hardtanh, 0, 1), [_in(1, 3, 16, 16, low=-2.0, high=2.0)],
            "main:ops/test_hardtanh.py::test_fp32_hardtanh", known_fp32=HARDTANH_FP32,
            known_a8w8=HARDTANH_A8W8))
    # ReLU6 (hardtanh(0, 6)), as the mobile networks write it
    add(_op("hardtanh", "hardtanh_relu6", P(seeded, nn.ReLU6), small_act))
    add(_op("clamp", "clamp", P(seeded, Unary, torch.clamp, 0.0, 2.0), [_w(1, 16, 8, 8)],
            "1.5.1:ops/test_clamp.py::test_fp32_clamp",
            upstream_a8w8="1.5.1:ops/test_clamp.py::test_a8w8_clamp"))
    add(_op("tanh", "tanh", P(seeded, nn.Tanh), small_act, "1.5.1:ops/test_tanh.py::test_fp32_tanh",
            fp32=Tolerance(0.008, 1e-3)))
    add(_op("sigmoid", "sigmoid", P(seeded, nn.Sigmoid), [_in(1, 4, 32, 32, low=-4.0, high=4.0)],
            "1.5.1:ops/test_sigmoid.py::test_fp32_sigmoid"))
    # elementwise math
    add(_op("sqrt", "sqrt", P(seeded, Unary, torch.sqrt), [_in(16, 8, low=0.0, high=3.0)],
            "1.5.1:ops/test_sqrt.py::test_fp32_sqrt"))
    add(_op("rsqrt", "rsqrt", P(seeded, Unary, torch.rsqrt), [_in(16, 8, low=0.1, high=3.0)],
            "1.5.1:ops/test_rsqrt.py::test_fp32_rsqrt"))
    # upstream's draws are half negative: NaN on both sides, judged equal
    add(_op("log", "log", P(seeded, Unary, torch.log), [_w(1, 16, 56, 56)],
            "1.5.1:ops/test_log.py::test_fp32_log",
            skip_a8w8="log of negative inputs is NaN: the A8W8 observers would calibrate on NaN "
                      "(log_positive is the A8W8 log)"))
    add(_op("log", "log_positive", P(seeded, Unary, torch.log), [_in(1, 16, 56, 56, low=0.1, high=4.0)]))
    trig = [_w(1, 3, 56, 56)]
    add(_op("cos", "cos", P(seeded, Unary, torch.cos), trig, "1.5.1:ops/test_cos.py::test_fp32_cos"))
    add(_op("sin", "sin", P(seeded, Unary, torch.sin), trig, "1.5.1:ops/test_sin.py::test_fp32_sin"))
    # data movement
    for axis in (1, 3):
        add(_op("cat", f"cat_axis{axis}", P(seeded, Concat, axis), [x4, x4],
                f"1.5.1:ops/test_cat.py::test_fp32_concat_on_axis{axis}"))
    add(_op("constant_pad_nd", "constant_pad_nd", P(seeded, Unary, pad_rows), [_in(1, 6, 8, 16)],
            "1.5.1:ops/test_constant_pad_nd.py::test_fp32_constant_pad_nd"))
    add(_op("expand_copy", "expand_copy", P(seeded, Unary, expand_channels), [_in(1, 1, 8, 8)],
            "1.5.1:ops/test_expand_copy.py::test_fp32_expand_copy"))
    for order in ((0, 2, 3, 1), (0, 3, 1, 2), (0, 3, 2, 1)):
        name = "".join(map(str, order))
        add(_op("permute", f"permute_{name}", P(seeded, Unary, torch.permute, order), [x4],
                f"1.5.1:ops/test_permute.py::test_fp32_permute_{name}"))
    add(_op("reshape", "reshape", P(seeded, Unary, torch.reshape, (1, 32, 8)), [_in(1, 16, 2, 8)],
            "1.5.1:ops/test_reshape.py::test_fp32_reshape"))
    add(_op("squeeze", "squeeze_dim2", P(seeded, Unary, torch.squeeze, [2]), [_in(1, 2, 1, 3)],
            "1.5.1:ops/test_squeeze.py::test_fp32_squeeze"))
    add(_op("unsqueeze", "unsqueeze_dim1", P(seeded, Unary, torch.unsqueeze, 1), [_in(2, 3, 1, 4)],
            "1.5.1:ops/test_unsqueeze.py::test_fp32_unsqueeze"))
    add(_op("select", "select_axis1", P(seeded, Unary, torch.select, 1, 0), [_in(1, 4, 16, 16)],
            "1.5.1:ops/test_select.py::test_fp32_select_on_axis1"))
    add(_op("select", "select_axis3", P(seeded, Unary, torch.select, 3, 6), [_in(1, 4, 16, 16)],
            "1.5.1:ops/test_select.py::test_fp32_concat_on_axis3"))  # sic: upstream's name for axis 3
    add(_op("slice_copy", "slice_copy", P(seeded, Unary, crop), [_in(1, 16, 16, 16)],
            "1.5.1:ops/test_slice_copy.py::test_fp32_slice_copy"))
    index_in = [_in(4, 16, 8, 8)]
    for axis, positions in ((0, [2, 0]), (1, [0, 3, 2, 11, 8]), (2, [1, 2, 5, 6]), (3, [0, 3, 6, 4])):
        add(_op("index", f"index_axis{axis}", P(seeded, Index, axis, positions), index_in,
                f"1.5.1:ops/test_index.py::test_fp32_index_on_axis{axis}"))
    split_in = [_in(6, 6)]
    add(_op("split_with_sizes_copy", "split_with_sizes_copy_dim1", P(seeded, SplitPart, [3, 2, 1], 1),
            split_in, "1.5.1:ops/test_split_with_sizes_copy.py::test_fp32_split_dim1"))
    add(_op("split_with_sizes_copy", "split_with_sizes_copy_even", P(seeded, SplitPart, 3, 0),
            split_in, "1.5.1:ops/test_split_with_sizes_copy.py::test_fp32_split_default"))
    add(_op("split_with_sizes_copy", "split_with_sizes_copy_chunk", P(seeded, SplitPart, [3, 3], 0),
            split_in, "1.5.1:ops/test_split_with_sizes_copy.py::test_fp32_split_chunk"))
    add(_op("getitem", "getitem_split", P(seeded, SplitPart, [3, 2, 1], 1, part=1), split_in))
    add(_op("pixel_shuffle", "pixel_shuffle", P(seeded, nn.PixelShuffle, 3), [_in(1, 9, 4, 4)],
            "1.5.1:ops/test_pixel_shuffle.py::test_fp32_pixel_shuffle"))
    add(_op("pixel_unshuffle", "pixel_unshuffle", P(seeded, nn.PixelUnshuffle, 2), [_in(1, 4, 8, 8)],
            "main:ops/test_pixel_unshuffle.py::test_fp32_pixel_unshuffle"))
    add(_op("upsample_bilinear2d", "upsample_bilinear2d",
            P(seeded, Unary, interpolate, 32, "bilinear", False), [_in(1, 16, 16, 16)],
            "1.5.1:ops/test_upsample_bilinear2d.py::test_fp32_upsample_bilinear2d",
            upstream_a8w8="1.5.1:ops/test_upsample_bilinear2d.py::test_a8w8_upsample_bilinear2d"))
    add(_op("upsample_bilinear2d", "upsample_bilinear2d_align_corners",
            P(seeded, Unary, interpolate, 32, "bilinear", True), [_in(1, 16, 16, 16)]))
    add(_op("upsample_nearest2d", "upsample_nearest2d",
            P(seeded, Unary, interpolate, 32, "nearest", None), [_in(1, 4, 16, 16)],
            "1.5.1:ops/test_upsample_nearest2d.py::test_fp32_upsample_nearest2d"))
    add(_op("to_copy", "to_copy_fp16", P(seeded, Unary, to_fp16), [_in(1, 3, 56, 56)],
            "1.5.1:ops/test_to_copy.py::test_fp32_to_copy"))
    # quantize / dequantize
    add(_op("quantize_per_tensor", "quantize_per_tensor", P(seeded, Quantize, False),
            [_in(1, 4, 8, 8, low=-2.0, high=2.0)]))
    add(_op("dequantize_per_tensor", "dequantize_per_tensor", P(seeded, Dequantize, False),
            [_in(1, 4, 8, 8, low=-128, high=128, dtype="int8")]))
    add(_op("quantize_per_channel", "quantize_per_channel", P(seeded, Quantize, True),
            [_in(1, 4, 8, 8, low=-2.0, high=2.0)]))
    add(_op("dequantize_per_channel", "dequantize_per_channel", P(seeded, Dequantize, True),
            [_in(1, 4, 8, 8, low=-128, high=128, dtype="int8")]))
    from hil.cases.ops_yolo26 import yolo26_primitives

    found.extend(yolo26_primitives())
    return found

