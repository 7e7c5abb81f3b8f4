"""Tests of the virtual board. `TwoInputs` is the program the runner tests share."""

import torch


class TwoInputs(torch.nn.Module):
    """Two inputs, two outputs (one of them a reduction): a linear layer on the first."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(self.linear(x)) * y, x.sum()
