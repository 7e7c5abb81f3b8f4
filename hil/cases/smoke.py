"""The built-in `smoke` suite: a handful of fp32 ops and one small multi-op model.

Small enough to lower and run in seconds, broad enough to exercise every stage.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from hil.cases.case import Case, InputSpec, definition_site
from hil.verdict import Tolerance


class Add(nn.Module):
    """Elementwise add of two inputs."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


class Softmax(nn.Module):
    """Softmax over the last dimension."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class TinyCnn(nn.Module):
    """conv → batch_norm → relu → max_pool → conv → hardswish → mean → linear → softmax."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, stride=2),
            nn.Hardswish(),
        )
        self.classifier = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.features(x).mean(dim=(2, 3))
        return torch.softmax(self.classifier(pooled), dim=-1)


def _seeded(cls: type[nn.Module], *args: object, **kwargs: object) -> nn.Module:
    """Build a module with weights from a fixed seed, so every run tests the same numbers."""
    torch.manual_seed(0)
    return cls(*args, **kwargs).eval()


def _case(
    case_id: str,
    factory: functools.partial[nn.Module],
    *shapes: tuple[int, ...],
    expect: tuple[str, ...] = (),
    tolerance: Tolerance | None = None,
) -> Case:
    file, line = definition_site()
    return Case(
        id=case_id,
        suite="smoke",
        factory=factory,
        inputs=tuple(InputSpec(shape) for shape in shapes),
        tolerance=tolerance or Tolerance(atol=1e-4, rtol=1e-4),
        expect_delegated=expect,
        file=file,
        line=line,
    )


def cases() -> list[Case]:
    """The smoke suite (fp32 only)."""
    return [
        _case(
            "conv2d_3x3",
            functools.partial(_seeded, nn.Conv2d, 3, 8, 3, padding=1),
            (1, 3, 16, 16),
            expect=("convolution",),
        ),
        _case(
            "linear",
            functools.partial(_seeded, nn.Linear, 32, 16),
            (4, 32),
            expect=("linear",),
        ),
        _case("add", functools.partial(_seeded, Add), (1, 8, 8), (1, 8, 8), expect=("add",)),
        _case("softmax", functools.partial(_seeded, Softmax), (2, 10), expect=("softmax",)),
        _case(
            "max_pool2d",
            functools.partial(_seeded, nn.MaxPool2d, 2, 2),
            (1, 4, 8, 8),
            expect=("max_pool2d",),
        ),
        _case(
            "avg_pool2d",
            functools.partial(_seeded, nn.AvgPool2d, 2, 2),
            (1, 4, 8, 8),
            expect=("avg_pool2d",),
        ),
        _case(
            "tiny_cnn",
            functools.partial(_seeded, TinyCnn),
            (1, 3, 32, 32),
            expect=("convolution", "linear"),
        ),
    ]
