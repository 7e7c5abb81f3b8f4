"""The A8W8 stage: calibration sources, and the output scale the A8W8 tolerance is built on."""

import functools

import pytest
import torch
from torch import nn

from hil.cases.case import Case, InputSpec
from hil.cases.datasets import GeneratedImages
from hil.cases.op_modules import TopK
from hil.lower.build import calibration_samples, case_samples, make_inputs
from hil.lower.quantize import CALIBRATION_SAMPLES, output_scales, quantize_a8w8


def _case(**fields) -> Case:
    return Case(id="c", suite="t", factory=nn.Identity, inputs=(InputSpec((2, 8)),),
                precision="a8w8", seed=3, **fields)


def _seeded_inputs(seed: int) -> torch.Tensor:
    return torch.full((1, 2), float(seed))


def test_calibration_comes_from_the_suite_the_dataset_or_seeded_inputs():
    plain = calibration_samples(_case())
    assert len(plain) == CALIBRATION_SAMPLES
    assert all(not torch.equal(s[0], case_samples(_case()).inputs[0]) for s in plain)
    assert torch.equal(plain[0][0], make_inputs((InputSpec((2, 8)),), 3 + 1000)[0])

    data = GeneratedImages(size=8, count=2, calibration=3)
    from_data = calibration_samples(_case(dataset=data))
    assert [s[0].shape for s in from_data] == [torch.Size([2, 3, 8, 8])] * 3
    assert torch.equal(from_data[0][0], data.batch(1, 3).inputs[0])  # batch 0 is evaluation

    from_fn = calibration_samples(_case(input_fn=_seeded_inputs))
    assert [float(s[0][0, 0]) for s in from_fn] == [1003.0 + i for i in range(CALIBRATION_SAMPLES)]

    given = [(torch.zeros(2, 8),), (torch.ones(2, 8),)]
    assert calibration_samples(_case(calibration=functools.partial(list, given))) == given


def _range_over_255(values: torch.Tensor) -> float:
    return (max(float(values.max()), 0.0) - min(float(values.min()), 0.0)) / 255


def test_output_step_is_the_larger_calibrated_range_over_255():
    torch.manual_seed(0)
    model = nn.Linear(8, 4).eval()
    for spread in (0.1, 10.0):  # the output's range smaller, then larger, than the input's
        with torch.no_grad():
            model.weight.mul_(spread)
        calibration = [(torch.rand(2, 8) * 4 - 2,) for _ in range(4)]
        quantized = quantize_a8w8(model, calibration[0], calibration)
        with torch.no_grad():
            outputs = torch.cat([model(*sample) for sample in calibration])
        inputs = torch.cat([sample[0] for sample in calibration])
        expected = max(_range_over_255(outputs), _range_over_255(inputs))
        assert output_scales(quantized) == (pytest.approx(expected, rel=0.02),)


class LinearAndArgmax(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(10, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.linear(x)
        return y, torch.argmax(y, dim=-1)


def test_an_output_left_unquantized_has_no_scale():
    sample = (torch.rand(2, 10),)
    logits, indices = output_scales(quantize_a8w8(LinearAndArgmax().eval(), sample, [sample]))
    assert logits is not None and logits > 0
    assert indices is None
    # the ENN quantizer leaves topk's outputs in float: both are unscaled
    assert output_scales(quantize_a8w8(TopK(3, -1).eval(), sample, [sample])) == (None, None)


def _train_to_scale(steps: list, scale: float, prepared: torch.fx.GraphModule) -> None:
    """A case's `qat`: records what it was given, trains the fake-quantized model for a few
    steps on inputs of `scale` (its observers follow them), and leaves it in eval mode."""
    from torchao.quantization.pt2e import move_exported_model_to_eval, move_exported_model_to_train

    steps.append([type(m).__name__ for m in prepared.modules() if "FakeQuantize" in type(m).__name__])
    move_exported_model_to_train(prepared)
    optimizer = torch.optim.SGD(prepared.parameters(), lr=1e-3)
    for step in range(4):
        sample = torch.rand(2, 8, generator=torch.Generator().manual_seed(step)) * scale
        prepared(sample).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    move_exported_model_to_eval(prepared)


def test_quantization_aware_training_replaces_calibration():
    """A case's `qat` gets the model prepared for QAT (fake-quantized, as upstream's
    `setup_quant_params(..., is_qat=True)` makes it) and trains it; calibration samples are not
    run, and the converted model's scales are the training data's."""
    torch.manual_seed(0)
    model = nn.Linear(8, 4).eval()
    calibration = [(torch.full((2, 8), 1000.0),)]  # would give a step of ~4 if it were run
    seen: list = []
    quantized = quantize_a8w8(model, (torch.rand(2, 8),), calibration,
                              train=functools.partial(_train_to_scale, seen, 2.0))
    assert len(seen) == 1 and seen[0], "QAT trains a fake-quantized model"
    (step,) = output_scales(quantized)
    assert 0.001 < step < 0.05  # from inputs in [0, 2), not from the 1000s of the calibration
    post_training = output_scales(quantize_a8w8(model, (torch.rand(2, 8),), calibration))
    assert post_training[0] > 1.0
