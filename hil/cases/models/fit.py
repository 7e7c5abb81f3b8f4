"""Fitting the last layer of a randomly initialised model on generated data, so that the model
does its task with margins like a trained network's and its quantization can be judged.

A random network's outputs have no margin: the top two logits of a random head differ by less
than the int8 rounding, so agreement with fp32 measures noise. Training a whole network is
out of reach here (no weights, 2 cores); fitting only its last layer is a linear problem.
The backbone stays random (its BatchNorm statistics set from generated data), the last layer
is solved in closed form (ridge regression) from the backbone's features on training batches
of the case's dataset — batches that are never the evaluated one nor A8W8 calibration ones —
to the dataset's targets. The fitted layer then reads the features the way a trained head
does, and its outputs are scaled so that the correct class leads by several logits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

TRAIN_BATCH = 50_000
"""First dataset batch index used for fitting (evaluation is 0, calibration 1..N)."""


def layer_inputs(model: nn.Module, layer: nn.Module,
                 batches: Sequence[tuple[torch.Tensor, ...]]) -> torch.Tensor:
    """The inputs `layer` receives when `model` runs each batch, concatenated on dim 0."""
    seen: list[torch.Tensor] = []
    hook = layer.register_forward_hook(lambda _m, args, _out: seen.append(args[0].detach()))
    try:
        with torch.no_grad():
            for batch in batches:
                model(*batch)
    finally:
        hook.remove()
    return torch.cat(seen)


def ridge(features: torch.Tensor, targets: torch.Tensor,
          strength: float = 1e-2) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights `(outputs, d)` and bias `(outputs,)` minimising |X W^T + b - Y|^2 + l |W|^2,
    with l = `strength` x the mean feature variance (so it does not depend on their scale)."""
    x = features.double()
    y = targets.double()
    mean_x, mean_y = x.mean(0), y.mean(0)
    xc = x - mean_x
    gram = xc.T @ xc
    penalty = strength * float(gram.diagonal().mean())
    identity = torch.eye(gram.shape[0], dtype=torch.float64)
    weight = torch.linalg.solve(gram + penalty * identity, xc.T @ (y - mean_y))
    bias = mean_y - mean_x @ weight
    return weight.T.float(), bias.float()


def one_hot(labels: torch.Tensor, classes: int) -> torch.Tensor:
    """Targets of +1 for the class and 0 elsewhere."""
    flat = labels.reshape(-1)
    hot = torch.zeros((flat.numel(), classes))
    hot[torch.arange(flat.numel()), flat] = 1.0
    return hot


def set_linear(layer: nn.Module, weight: torch.Tensor, bias: torch.Tensor, scale: float) -> None:
    """Load `scale x (weight, bias)` into a Linear or a 1x1 convolution."""
    with torch.no_grad():
        layer.weight.copy_((scale * weight).reshape(layer.weight.shape))
        layer.bias.copy_(scale * bias)


Labelled = Callable[[int], tuple[tuple[torch.Tensor, ...], torch.Tensor]]
"""Batch index -> (forward inputs, labels)."""


def fit_classifier_head(model: nn.Module, head: nn.Linear, batches: Labelled, count: int,
                        scale: float = 8.0, strength: float = 3.0) -> nn.Module:
    """Fit `head` (the last Linear) to the labels of `count` training batches
    (`batches(i) -> (inputs, labels)`); logits = `scale` x the ridge fit of one-hot labels.
    The penalty (`strength` x the mean feature variance) is high by default: the head then
    reads the features' large directions, which int8 rounding disturbs least."""
    data = [batches(TRAIN_BATCH + i) for i in range(count)]
    features = layer_inputs(model, head, [inputs for inputs, _ in data]).flatten(1)
    labels = torch.cat([labels for _, labels in data])
    weight, bias = ridge(features, one_hot(labels, head.out_features), strength)
    set_linear(head, weight, bias, scale)
    return model.eval()


def fit_pixel_head(model: nn.Module, head: nn.Conv2d | nn.Conv1d, features: torch.Tensor,
                   labels: torch.Tensor, scale: float = 8.0, strength: float = 1e-2) -> nn.Module:
    """Fit a 1x1 convolution (a per-position linear layer) to per-position labels:
    `features (N, C, *positions)` are its inputs, `labels (N, *positions)` its classes."""
    flat = features.movedim(1, -1).reshape(-1, features.shape[1])
    weight, bias = ridge(flat, one_hot(labels.reshape(-1), head.out_channels), strength)
    set_linear(head, weight, bias, scale)
    return model.eval()
