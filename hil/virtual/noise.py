"""The `noise` fault's perturbation: what a wrong kernel does to a runner's outputs.

Each floating-point output gets independent Gaussian noise whose standard deviation is
`rel` times that output's own standard deviation (over all its elements), from a
generator seeded with the fault's `seed` and the output's index, so a run is reproducible. An
output with no spread (constant) and non-float outputs (indices, masks) are left as they
are: noise on an index is not a rounding error but a different answer.

Sizes to think in: `rel=0.003` is a fraction of one int8 quantization step of an output
spread over ~6 standard deviations (a step is ~0.024 of them); `rel=0.1` is an output at
20 dB SQNR, the size of error a broken kernel (a wrong requantization scale, a dropped bias,
a mis-rounded accumulator) leaves.
"""

from __future__ import annotations

from typing import Any


def add_noise(value: Any, index: int, rel: float, seed: int) -> Any:
    """Output `index` (`value`) with noise of `rel` x its standard deviation added when it is
    a floating-point tensor with spread; anything else unchanged (the same object)."""
    import torch

    if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point or value.numel() < 2:
        return value
    spread = float(value.double().std())
    if spread == 0.0:
        return value
    generator = torch.Generator().manual_seed(seed * 1_000_003 + index)
    noise = torch.randn(value.shape, generator=generator, dtype=torch.float64) * (rel * spread)
    return (value.double() + noise).to(value.dtype)
