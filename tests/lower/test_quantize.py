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
