"""The smoke suite's own torch modules (hil/cases/smoke.py names them by `ModuleRef`, so that
loading the suite does not import torch)."""

from __future__ import annotations

import torch
from torch import nn


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
