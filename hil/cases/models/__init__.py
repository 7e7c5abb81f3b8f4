"""The built-in `models` suite: the upstream Samsung model list at fp32 and A8W8, each with a
generated dataset and, where the task has one, a quantization checker.

By default every model is randomly initialised from a fixed seed (no weights can be
downloaded on the machines this runs on). A random network's BatchNorm statistics
(mean 0, variance 1) do not match its activations, which then vanish within a few blocks;
so after the seeded init the BatchNorm running statistics are set from a generated
calibration batch (what training would have converged them to), and Wav2Letter, which has
no normalisation, gets a layer-sequential unit-variance rescaling of its convs on generated
audio. Random-init classifiers use a 10-class head: a 1000-way random head has top-2 margins
below the quantization noise, so top-k agreement would measure nothing.

`--pretrained` loads the published weights instead (torchvision's, full configurations,
1000/21-class heads); models without published weights stop the run with one line.
Reduced configurations are marked by `reduced:` tags.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
from torch import nn

from hil.cases.case import PRECISIONS, Case, InputSpec, definition_site
from hil.cases.datasets import (
    Dataset,
    GeneratedImages,
    GeneratedScenes,
    GeneratedSpeech,
    GeneratedSuperResolution,
    GeneratedTokens,
)
from hil.checkers import CheckerSpec, checker_spec
from hil.errors import UsageError
from hil.verdict import Tolerance

log = logging.getLogger(__name__)

A8W8_TOLERANCE = Tolerance(atol=1e-3, rtol=0.0, min_sqnr_db=12.0)
A8W8_SCALE_STEPS = 32.0
"""A8W8 models: atol = 1e-3 + 32 quantization steps of the output, SQNR >= 12 dB against the
quantized model run on the host. Loose on purpose: int8 kernels round at every
requantization, and a random-init BatchNorm network amplifies such differences with depth
(mobilenet_v2: up to 20 steps, 15.7 dB between XNNPACK's int8 run and the host simulation,
about what separates the simulation from fp32). Broken lowering still fails (unrelated
outputs score about 0 dB); the task-level gate for models is the checker against fp32."""

BN_CALIBRATION_BATCH = 7919
"""Dataset batch index used to set BatchNorm statistics (never an evaluation or A8W8
calibration batch)."""


@dataclass(frozen=True)
class ModelSpec:
    """One model of the suite."""

    name: str
    factory: Callable[[], nn.Module]
    dataset: Dataset
    checker: CheckerSpec | None
    fp32: Tolerance
    """upstream's fp32 atol/rtol (set for the NPU's fp16 arithmetic) and a 40 dB SQNR floor."""
    tags: tuple[str, ...] = ()
    weights: str | None = None
    """torchvision weights enum (`--pretrained`), None when nothing is published."""
    site: tuple[str, int] = ("", 0)
    """Where the spec is written (file, line), for JUnit locations."""
    expect: tuple[str, ...] = ("convolution",)
    """Edge ops that must end in a delegate on flow `enn`."""


# -- factories (module-level: cases pickle into lowering workers) ---------------------------


def recalibrate_batchnorm(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> nn.Module:
    """Set every BatchNorm's running statistics to those of `inputs` (one cumulative pass in
    train mode, no gradient), then return the model in eval mode."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    model.train()
    with torch.no_grad():
        model(*inputs)
    return model.eval()


def unit_variance_init(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> nn.Module:
    """Layer-sequential unit-variance init (Mishkin & Matas, 2016): rescale each conv/linear
    in forward order so its output has unit variance on `inputs`."""
    layers = [m for m in model.modules() if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear))]
    model.eval()
    for layer in layers:
        seen: list[torch.Tensor] = []
        hook = layer.register_forward_hook(lambda _m, _i, out, seen=seen: seen.append(out))
        with torch.no_grad():
            model(*inputs)
            std = float(seen[0].std())
            if std > 0:
                layer.weight.div_(std)
                if layer.bias is not None:
                    layer.bias.div_(std)
        hook.remove()
    return model


class SegmentationLogits(nn.Module):
    """torchvision segmentation models return a dict; the program returns its `out`."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)["out"]


def _published(weights: str) -> Any:
    from torchvision.models import get_weight

    return get_weight(weights)


def torchvision_model(builder: str, weights: str | None, dataset: Dataset | None,
                      segmentation: bool = False, **kwargs: Any) -> nn.Module:
    """A torchvision model: with `weights` the published ones (already fetched by
    `fetch_weights`), else a seeded random init with BatchNorm statistics from `dataset`."""
    import torchvision

    build = getattr(torchvision.models.segmentation if segmentation else torchvision.models, builder)
    if weights is not None:
        model = build(weights=_published(weights))
    else:
        model = build(weights=None, **kwargs)
        if dataset is not None:
            recalibrate_batchnorm(model, dataset.batch(BN_CALIBRATION_BATCH, 0).inputs)
    model = SegmentationLogits(model) if segmentation else model
    return model.eval()


def vit_reduced(classes: int) -> nn.Module:
    """ViT-B/16's patching and block structure at 4 layers, width 256, 4 heads. torchvision
    zero-initialises the classification head (all logits 0: nothing to agree on), so the
    head gets a truncated-normal init (std 0.02, as timm's ViT)."""
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=4,
                              hidden_dim=256, mlp_dim=1024, num_classes=classes)
    nn.init.trunc_normal_(model.heads.head.weight, std=0.02)
    return model.eval()


def edsr(blocks: int, features: int) -> nn.Module:
    """hil's EDSR (x2)."""
    from hil.cases.models.nets import Edsr

    return Edsr(scale=2, blocks=blocks, features=features).eval()


def wav2letter(dataset: Dataset) -> nn.Module:
    """hil's Wav2Letter (29 labels: space, a-z, apostrophe, blank), unit-variance init."""
    from hil.cases.models.nets import Wav2Letter

    return unit_variance_init(Wav2Letter(num_classes=29), dataset.batch(BN_CALIBRATION_BATCH, 0).inputs)


def mobilebert(layers: int, vocab: int) -> nn.Module:
    """hil's MobileBERT encoder."""
    from hil.cases.models.nets import MobileBert

    return MobileBert(vocab=vocab, layers=layers).eval()


def fetch_weights(name: str, weights: str | None) -> None:
    """Make the published `weights` of model `name` available (download into torch's hub
    cache, or find them there); UsageError with one line when that cannot be done."""
    if weights is None:
        raise UsageError(
            f"--pretrained: {name}: no published weights for this model in hil "
            "(a compact re-implementation); run it without --pretrained"
        )
    published = _published(weights)
    target = Path(torch.hub.get_dir()) / "checkpoints" / Path(urlparse(published.url).path).name
    if target.is_file():
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.hub.download_url_to_file(published.url, str(target), progress=False)
    except Exception as exc:  # noqa: BLE001 - any failure to get the weights is one usage line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise UsageError(
            f"--pretrained: {name}: cannot download the published weights {weights} "
            f"({published.url}): {type(exc).__name__}: {first}; without network access put "
            f"the file at {target}"
        ) from None


# -- the suite ----------------------------------------------------------------------------

P = functools.partial


def _specs(pretrained: bool) -> list[ModelSpec]:
    classes = 1000 if pretrained else 10

    def images(size: int, count: int) -> GeneratedImages:
        return GeneratedImages(size=size, count=count, classes=10, labels=not pretrained)

    def classifier(name: str, builder: str, weights: str, size: int, count: int,
                   fp32: Tolerance, tags: tuple[str, ...] = (), **kwargs: Any) -> ModelSpec:
        dataset = images(size, count)
        factory = (
            P(torchvision_model, builder, weights, None) if pretrained
            else P(torchvision_model, builder, None, dataset, num_classes=classes, **kwargs)
        )
        return ModelSpec(name, factory, dataset, checker_spec("classifier"), fp32,
                         ("classifier", *tags), weights, definition_site())

    vit_data = images(224, 16)
    scenes = GeneratedScenes(size=224 if pretrained else 128, count=4, calibration=2)
    sr = GeneratedSuperResolution(size=64, scale=2, count=4, calibration=2)
    speech = GeneratedSpeech(samples=16000, count=4)
    tokens = GeneratedTokens(length=32, vocab=1024, count=4)
    def model(name: str, *fields: Any, expect: tuple[str, ...] = ("convolution",)) -> ModelSpec:
        return ModelSpec(name, *fields, site=definition_site(), expect=expect)

    return [
        classifier("mobilenet_v2", "mobilenet_v2", "MobileNet_V2_Weights.DEFAULT", 224, 32,
                   Tolerance(0.02, 0.0, 40.0)),
        classifier("mobilenet_v3", "mobilenet_v3_small", "MobileNet_V3_Small_Weights.DEFAULT", 224, 32,
                   Tolerance(0.07, 0.07, 40.0), ("small",)),
        classifier("resnet18", "resnet18", "ResNet18_Weights.DEFAULT", 224, 16,
                   Tolerance(0.02, 0.02, 40.0)),
        classifier("resnet50", "resnet50", "ResNet50_Weights.DEFAULT", 224 if pretrained else 160, 16,
                   Tolerance(0.02, 0.02, 40.0), () if pretrained else ("reduced:input-160",)),
        classifier("inception_v3", "inception_v3", "Inception_V3_Weights.DEFAULT",
                   299 if pretrained else 160, 16, Tolerance(0.02, 0.02, 40.0),
                   () if pretrained else ("reduced:input-160",), aux_logits=False, init_weights=True),
        model("vit",
              P(torchvision_model, "vit_b_16", "ViT_B_16_Weights.DEFAULT", None) if pretrained
              else P(vit_reduced, classes),
              vit_data, checker_spec("classifier"), Tolerance(0.005, 0.005, 40.0),
              ("classifier",) if pretrained else ("classifier", "reduced:4-layers-256-wide"),
              "ViT_B_16_Weights.DEFAULT", expect=("linear",)),
        model("deeplab_v3",
              P(torchvision_model, "deeplabv3_resnet50", "DeepLabV3_ResNet50_Weights.DEFAULT", None,
                segmentation=True) if pretrained
              else P(torchvision_model, "deeplabv3_resnet50", None, scenes, segmentation=True,
                     num_classes=21, weights_backbone=None, aux_loss=False),
              scenes, checker_spec("segmentation"), Tolerance(0.009, 0.0, 40.0),
              ("segmentation",) if pretrained else ("segmentation", "reduced:input-128"),
              "DeepLabV3_ResNet50_Weights.DEFAULT"),
        model("edsr", P(edsr, 16, 64), sr, checker_spec("super_resolution"),
              Tolerance(0.02, 0.0, 40.0), ("super_resolution", "reduced:input-64"), None),
        model("wav2letter", P(wav2letter, speech), speech, checker_spec("asr"),
              Tolerance(0.009, 0.0, 40.0), ("asr",), None),
        model("mobilebert", P(mobilebert, 4, 1024), tokens, None, Tolerance(0.008, 0.0, 40.0),
              ("nlp", "reduced:4-layers-vocab-1024"), None, expect=("linear",)),
    ]


def _input_specs(dataset: Dataset) -> tuple[InputSpec, ...]:
    """Describe the dataset's batch (shapes, dtypes) for reports; values come from it."""
    sample = dataset.batch(0, 0).inputs
    return tuple(InputSpec(tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in sample)


def cases(pretrained: bool = False) -> list[Case]:
    """The models suite, fp32 and A8W8."""
    found = []
    for spec in _specs(pretrained):
        prefetch = P(fetch_weights, spec.name, spec.weights) if pretrained else None
        inputs = _input_specs(spec.dataset)
        for precision in PRECISIONS:
            found.append(Case(
                id=spec.name,
                suite="models",
                factory=spec.factory,
                inputs=inputs,
                precision=precision,
                tolerance=A8W8_TOLERANCE if precision == "a8w8" else spec.fp32,
                atol_scale_steps=A8W8_SCALE_STEPS if precision == "a8w8" else 0.0,
                expect_delegated=spec.expect,
                dataset=spec.dataset,
                checker=spec.checker,
                prefetch=prefetch,
                tags=(*spec.tags, "pretrained" if pretrained else "random-init"),
                file=spec.site[0],
                line=spec.site[1],
            ))
    return found
