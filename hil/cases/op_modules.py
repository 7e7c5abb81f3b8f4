"""The torch modules of the built-in `ops` suite (`hil/cases/ops.py`): small wrappers that
turn one op (a function, a layer, a quantize/dequantize pair) into a module to export."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers torch.ops.quantized_decomposed
from torch import nn


class Binary(nn.Module):
    """`fn(x, y)` of two inputs."""

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.fn(x, y)


class WithConstant(nn.Module):
    """`fn(x, c)` with a seeded constant tensor `c` of `shape`."""

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 shape: Sequence[int]) -> None:
        super().__init__()
        self.fn = fn
        self.register_buffer("constant", torch.randn(tuple(shape)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, self.constant)


class Unary(nn.Module):
    """`fn(x, *args, **kwargs)` of one input, e.g. `torch.permute(x, dims)`."""

    def __init__(self, fn: Callable[..., torch.Tensor], *args: object, **kwargs: object) -> None:
        super().__init__()
        self.fn = fn
        self.args = args
        self.kwargs = kwargs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, *self.args, **self.kwargs)


class Index(nn.Module):
    """`x[indices]` with constant int32 index tensors (as upstream)."""

    def __init__(self, dim: int, positions: Sequence[int]) -> None:
        super().__init__()
        self.dim = dim
        self.register_buffer("positions", torch.tensor(list(positions), dtype=torch.int32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[(slice(None),) * self.dim + (self.positions,)]


class Concat(nn.Module):
    """`torch.cat((x, y), dim)`."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cat((x, y), dim=self.dim)


class SplitPart(nn.Module):
    """`torch.split(x, sizes, dim)`: every part, or only part `part` (a getitem)."""

    def __init__(self, sizes: int | Sequence[int], dim: int, part: int | None = None) -> None:
        super().__init__()
        self.sizes = sizes if isinstance(sizes, int) else list(sizes)
        self.dim = dim
        self.part = part

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        parts = torch.split(x, self.sizes, dim=self.dim)
        return tuple(parts) if self.part is None else parts[self.part]


class TopK(nn.Module):
    """`torch.topk(x, k, dim)`: values and indices, or values only."""

    def __init__(self, k: int, dim: int, values_only: bool = False) -> None:
        super().__init__()
        self.k = k
        self.dim = dim
        self.values_only = values_only

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.topk(x, self.k, dim=self.dim)
        return values if self.values_only else (values, indices)


class ConvThen(nn.Module):
    """A 3x3 stride-2 conv followed by an activation (upstream's `with_conv` variants)."""

    def __init__(self, activation: nn.Module, channels: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, 16, 3, stride=2, padding=1)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.conv(x))


class Int8Parameters(nn.Module):
    """Fixed int8 quantization parameters: per tensor (scale 0.02, zero point 3), or per
    channel along dim 1 (`scales`, `zero_points` buffers)."""

    def __init__(self, per_channel: bool, channels: int = 4) -> None:
        super().__init__()
        self.per_channel = per_channel
        self.register_buffer("scales", torch.linspace(0.01, 0.04, channels, dtype=torch.float64))
        self.register_buffer("zero_points", torch.arange(channels, dtype=torch.int64) - 2)


class Quantize(Int8Parameters):
    """quantized_decomposed quantize (int8 output): per tensor, or per channel along dim 1."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ops = torch.ops.quantized_decomposed
        if self.per_channel:
            return ops.quantize_per_channel(x, self.scales, self.zero_points, 1, -128, 127, torch.int8)
        return ops.quantize_per_tensor(x, 0.02, 3, -128, 127, torch.int8)


class Dequantize(Int8Parameters):
    """quantized_decomposed dequantize of an int8 input: per tensor, or per channel along
    dim 1 (followed by a float op, as the int8 kernels' consumers are)."""

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        ops = torch.ops.quantized_decomposed
        if self.per_channel:
            x = ops.dequantize_per_channel(q, self.scales, self.zero_points, 1, -128, 127, torch.int8)
        else:
            x = ops.dequantize_per_tensor(q, 0.02, 3, -128, 127, torch.int8)
        return torch.relu(x)


class BatchNorm(nn.Module):
    """BatchNorm2d in eval mode with seeded statistics and affine parameters."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(features)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.1, 0.1)
            self.bn.running_mean.uniform_(-0.2, 0.2)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def seeded(cls: Callable[..., nn.Module], *args: object, **kwargs: object) -> nn.Module:
    """Build a module with weights from a fixed seed."""
    torch.manual_seed(0)
    return cls(*args, **kwargs).eval()


def interpolate(x: torch.Tensor, size: int, mode: str, align: bool | None) -> torch.Tensor:
    """`x` resized to `size` x `size` by `mode`."""
    return torch.nn.functional.interpolate(x, size=[size, size], mode=mode, align_corners=align)


def pad_rows(x: torch.Tensor) -> torch.Tensor:
    """`x` with a row of zeros above and below."""
    return torch.nn.functional.pad(x, (0, 0, 1, 1), mode="constant", value=0.0)


def crop(x: torch.Tensor) -> torch.Tensor:
    """The first 8 channels and 8 columns of `x`."""
    return x[:, :8, :, :8]


def to_fp16(x: torch.Tensor) -> torch.Tensor:
    """`x` as float16."""
    return x.to(torch.float16)


def square(x: torch.Tensor) -> torch.Tensor:
    """`x` squared (a `pow` by 2.0)."""
    return x ** 2.0


def expand_channels(x: torch.Tensor) -> torch.Tensor:
    """`x` broadcast to 16 channels."""
    return x.expand(1, 16, -1, -1)
