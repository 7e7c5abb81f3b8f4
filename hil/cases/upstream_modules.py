"""Torch modules and inputs of the `ops` suite's cases written after upstream tests that
`hil/cases/op_modules.py` has no module for: each mirrors the upstream module named in its
docstring (`backends/samsung/test/...` of ExecuTorch; the version and commit of each file are in
`hil/cases/upstream_reference.json`). Module-level, so cases pickle into lowering workers."""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers torch.ops.quantized_decomposed
from torch import nn


class RmsNormWeight(nn.Module):
    """RMSNorm over `shape` (eps 1e-5) with every weight set to `weight` (upstream's `RMSNorm`
    of ops/test_rms_norm.py sets 2.0)."""

    def __init__(self, shape: list[int], weight: float) -> None:
        super().__init__()
        self.module = nn.RMSNorm(shape, eps=1e-5)
        self.module.weight = nn.Parameter(torch.ones(shape) * weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)


class AffineBatchNorm(nn.Module):
    """BatchNorm2d in eval mode with weight and bias drawn from U(-0.1, 0.1) and the default
    running statistics (mean 0, variance 1): upstream's `BatchNorm` of ops/test_batch_norm.py."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(features)
        with torch.no_grad():
            self.bn.weight.uniform_(-0.1, 0.1)
            self.bn.bias.uniform_(-0.1, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


class TopKOutput(nn.Module):
    """`torch.topk(x, k[, dim])` returning both, the indices or the values (upstream's `TopK`
    of ops/test_topk.py and the topk primitives of models/test_yolo26_primitives.py); `dim`
    None calls topk without one, as the yolo26 `both_topk` primitive does."""

    def __init__(self, k: int, dim: int | None = -1, output: str = "both") -> None:
        super().__init__()
        if output not in ("both", "indices", "values"):
            raise ValueError(f"TopKOutput: output {output!r} is not both, indices or values")
        self.k = k
        self.dim = dim
        self.output = output

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        result = torch.topk(x, self.k) if self.dim is None else torch.topk(x, self.k, dim=self.dim)
        if self.output == "indices":
            return result.indices
        if self.output == "values":
            return result.values
        return tuple(result)


def _qdq(x: torch.Tensor) -> torch.Tensor:
    """int8 quantize then dequantize with scale 0.1, zero point 0."""
    ops = torch.ops.quantized_decomposed
    quantized = ops.quantize_per_tensor.default(x, 0.1, 0, -128, 127, torch.int8)
    return ops.dequantize_per_tensor.default(quantized, 0.1, 0, -128, 127, torch.int8)


class QuantizedTopK(TopKOutput):
    """Upstream's `QuantizedTopK` (ops/test_topk.py): topk of an int8 quantize/dequantize of
    relu of a quantize/dequantize of the input; `quantize_values` passes the values through
    one more pair. The module carries its own quantization (no PTQ on top)."""

    def __init__(self, k: int, dim: int = -1, output: str = "both", quantize_values: bool = False) -> None:
        super().__init__(k, dim, output)
        self.quantize_values = quantize_values

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        result = super().forward(_qdq(torch.relu(_qdq(x))))
        if not self.quantize_values or self.output == "indices":
            return result
        if self.output == "values":
            return _qdq(result)
        return _qdq(result[0]), result[1]


class StrideMul(nn.Module):
    """A `(N, 4, 2100)` input times a `(1, 2100)` buffer of ones: the stride multiply of
    upstream's yolo26 primitives (models/test_yolo26_primitives.py)."""

    def __init__(self, anchors: int = 2100) -> None:
        super().__init__()
        self.register_buffer("strides", torch.ones(1, anchors))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.strides


def attention_scale(x: torch.Tensor) -> torch.Tensor:
    """`x * 32**-0.5`: the attention scale of upstream's `Scale` (unit/test_mul.py)."""
    return x * (32**-0.5)


def amax_last(x: torch.Tensor) -> torch.Tensor:
    """`torch.amax(x, dim=-1)` (the yolo26 scores primitive)."""
    return torch.amax(x, dim=-1)


def softmax_last(x: torch.Tensor) -> torch.Tensor:
    """`torch.softmax(x, -1)` (the yolo26 attention primitive)."""
    return torch.softmax(x, -1)


def negated_permutation(size: int, seed: int) -> tuple[torch.Tensor]:
    """`-randperm(size)` as `(1, size)` float32: distinct values, so topk's order is unique
    (upstream's inputs of the k=300 topk tests); the permutation comes from `seed`."""
    generator = torch.Generator().manual_seed(seed)
    return (-torch.randperm(size, generator=generator, dtype=torch.float32).view(1, size),)


def tenths_permutation(size: int, seed: int) -> tuple[torch.Tensor]:
    """`randperm(size) * 0.1` as `(1, size)` float32 (upstream's QuantizedTopK inputs): every
    value a distinct multiple of the int8 step 0.1."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randperm(size, generator=generator).float().view(1, size) * 0.1,)
