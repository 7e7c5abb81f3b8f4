"""The models suite: the upstream model list at both precisions, its init procedures, and
`--pretrained` failing on one line where weights cannot be had."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from hil.cases import load_suite
from hil.cases.datasets import GeneratedImages, GeneratedSpeech, GeneratedTokens
from hil.cases.models import fetch_weights, unit_variance_init
from hil.cases.models.fit import ridge
from hil.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
MODELS = ("mobilenet_v2", "mobilenet_v3", "resnet18", "resnet50", "inception_v3", "inception_v4",
          "vit", "deeplab_v3", "edsr", "wav2letter", "mobilebert", "mobilebert_classifier", "mobilebert_qat")


def test_every_upstream_model_at_both_precisions():
    cases = load_suite("models")
    assert sorted(c.key for c in cases) == sorted(
        f"models.{p}.{m}" for m in MODELS for p in ("fp32", "a8w8")
    )
    checkers = {c.id: c.checker.name if c.checker else None for c in cases}
    assert checkers["mobilenet_v2"] == "classifier" and checkers["deeplab_v3"] == "segmentation"
    assert checkers["edsr"] == "super_resolution" and checkers["wav2letter"] == "asr"
    assert checkers["mobilebert"] == "masked_lm" and checkers["inception_v4"] == "classifier"
    assert checkers["mobilebert_classifier"] == checkers["mobilebert_qat"] == "classifier"
    assert all("random-init" in c.tags and c.dataset is not None for c in cases)
    reduced = {c.id for c in cases if any(t.startswith("reduced:") for t in c.tags)}
    assert reduced == set(MODELS)  # 10-class heads at least, and upstream's inputs where they differ
    post_training = [c for c in cases if c.precision == "a8w8" and c.qat is None]
    assert all(c.atol_scale_steps < 32 and c.tolerance.min_sqnr_db > 12 for c in post_training)
    # every model but hil's masked LM stands for an upstream test (scripts/upstream-coverage.py)
    untagged = {c.id for c in cases if not any(t.startswith("upstream:") for t in c.tags)}
    assert untagged == {"mobilebert"}
    lines = (REPO / "hil/cases/models/__init__.py").read_text().splitlines()
    assert all(f'"{c.id}"' in lines[c.line - 1] for c in cases)


def test_mobilebert_qat_is_a8w8_only_with_upstreams_tolerance():
    cases = {c.key: c for c in load_suite("models")}
    qat = cases["models.a8w8.mobilebert_qat"]
    assert qat.qat is not None and qat.atol_scale_steps == 0
    assert (qat.tolerance.atol, qat.tolerance.rtol, qat.tolerance.min_sqnr_db) == (0.03, 1e-3, None)
    assert "upstream:main:models/test_mobilebert_qat.py::test_mobilebert_qat_a8w8" in qat.tags
    assert cases["models.fp32.mobilebert_qat"].skip.startswith("quantization-aware training is an A8W8")
    assert all(c.qat is None for key, c in cases.items() if key != "models.a8w8.mobilebert_qat")
    sentences = qat.dataset.batch(0, 0)
    ids, mask = sentences.inputs
    assert ids.shape == (8, 128) and mask.shape == (8, 1, 128, 128)  # upstream's additive QAT mask
    assert set(mask.unique().tolist()) == {-255.0, 0.0}
    classifier = cases["models.fp32.mobilebert_classifier"].dataset.batch(0, 0)
    assert classifier.inputs[1].shape == (8, 128) and set(classifier.inputs[1].unique().tolist()) == {0.0, 1.0}


def test_ridge_recovers_a_linear_map():
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(500, 6, generator=generator)
    truth = torch.randn(3, 6, generator=generator)
    weight, bias = ridge(features, features @ truth.T + 2.0, strength=1e-6)
    torch.testing.assert_close(weight, truth, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(bias, torch.full((3,), 2.0), atol=1e-3, rtol=1e-3)


def test_generated_data_carries_what_the_fits_need():
    images = GeneratedImages(size=32, count=8).batch(0, 0)
    assert images.inputs[0].shape == (8, 3, 32, 32) and images.targets.shape == (8,)
    speech = GeneratedSpeech(samples=16000, count=2)
    batch = speech.batch(0, 0)
    transcript = [int(t) for t in batch.targets[0] if t >= 0]
    frames = speech.frame_labels(0, 0, 50)[0]
    voiced = [int(t) for i, t in enumerate(frames) if t != 28 and (i == 0 or t != frames[i - 1])]
    assert transcript and set(voiced) <= set(transcript)  # vowels only, in the transcript
    tokens = GeneratedTokens(length=16, vocab=64, count=4)
    ids, targets = tokens.batch(0, 0).inputs[0], tokens.batch(0, 0).targets
    successor = tokens.successor()
    masked = targets >= 0
    assert masked.any(axis=1).all() and (ids.numpy()[masked] == tokens.mask_id).all()
    original = torch.where(torch.as_tensor(masked), torch.as_tensor(targets), ids)
    assert torch.equal(original[:, 1:], successor[original[:, :-1]])


def test_unit_variance_init_scales_every_layer_in_one_pass():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 8, 5), nn.ReLU(), nn.Conv1d(8, 8, 3), nn.ReLU(), nn.Conv1d(8, 4, 1))
    batch = torch.randn(4, 1, 200) * 0.01
    unit_variance_init(model, (batch,))
    with torch.no_grad():
        x = batch
        for layer in model:
            x = layer(x)
            if isinstance(layer, nn.Conv1d):
                assert float(x.std()) == pytest.approx(1.0, rel=1e-3)


def test_pretrained_without_published_weights_is_one_line_exit_3(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "hil", "lower", "--suite", "models", "--filter", "wav2letter",
         "--pretrained", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 3 and len(lines) == 1, done.stderr
    assert lines[0] == ("hil: error: --pretrained: wav2letter: no published weights for this model "
                        "in hil (a compact re-implementation); run it without --pretrained")


def test_pretrained_weights_found_in_the_hub_cache_are_not_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    checkpoints = tmp_path / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)

    def no_network(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(torch.hub, "download_url_to_file", no_network)
    with pytest.raises(UsageError, match=r"--pretrained: resnet18: cannot download the published "
                       r"weights ResNet18_Weights.DEFAULT \(https://\S+\): OSError: no network"):
        fetch_weights("resnet18", "ResNet18_Weights.DEFAULT")
    (checkpoints / "resnet18-f37072fd.pth").write_bytes(b"")  # present: nothing to fetch
    fetch_weights("resnet18", "ResNet18_Weights.DEFAULT")
