#!/usr/bin/env python3
"""Repro, outside hil: ExecuTorch 1.5.1's EnnQuantizer, set up for quantization-aware
training, quantizes `x * weight` to the range of `weight` alone.

EnnQuantizer annotates mul (and add) with one quantization spec shared by the first input,
the second and the output (`annotate_2in1out_with_SharedQuantization`,
executorch/backends/samsung/quantizer/annotator.py; main's too). After calibration (PTQ) the
shared MinMax observer has seen all three. With `setup_quant_params(..., is_qat=True)` the
shared observer is a moving average (`FusedMovingAvgObsFakeQuantize`, averaging constant
0.01): the constant operand is observed first, fixes the range, and the activations move it
by a hundredth per call. MobileBERT's NoNorm (`x * weight + bias`) is this pattern in every
layer, so upstream's QAT of MobileBERT (test_mobilebert_qat.py: 5 training steps) gives a
model whose outputs are the activations clipped to the weights' range: hil's
`models.a8w8.mobilebert_qat` agrees with its fp32 model on one sample in four (its
classifier checker) and expects FAIL_MISMATCH. Upstream's own test compares the lowered
program with the same quantized model, which this does not disturb.

Exit 0 when the bug reproduces (QAT's product far from x * weight, PTQ's close), 1 when not.
"""

import sys

import torch
from executorch.backends.samsung.quantizer.quantizer import EnnQuantizer, Precision
from torchao.quantization.pt2e import move_exported_model_to_eval, move_exported_model_to_train
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


class NoNorm(torch.nn.Module):
    """MobileBERT's NoNorm without its bias: an elementwise weight."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


def sqnr_db(reference: torch.Tensor, actual: torch.Tensor) -> float:
    return float(10 * torch.log10(reference.square().mean() / (reference - actual).square().mean()))


def quantized(qat: bool, batches: list[tuple[torch.Tensor]]) -> torch.nn.Module:
    """NoNorm quantized by PTQ or QAT: prepared, run on `batches` (calibration, or QAT's
    forwards), converted."""
    quantizer = EnnQuantizer()
    quantizer.setup_quant_params(Precision.A8W8, True, qat)
    prepared = prepare_pt2e(torch.export.export(NoNorm().eval(), batches[0]).module(), quantizer)
    if qat:
        move_exported_model_to_train(prepared)
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    if qat:
        move_exported_model_to_eval(prepared)
    return convert_pt2e(prepared)


def main() -> int:
    torch.manual_seed(0)
    batches = [(torch.randn(4, 32, 64),) for _ in range(5)]
    (x,) = batches[0]
    with torch.no_grad():
        ptq = sqnr_db(x, quantized(False, batches)(x))
        qat = sqnr_db(x, quantized(True, batches)(x))
    print(f"x * ones(64), SQNR against the float product: PTQ {ptq:.1f} dB, QAT {qat:.1f} dB")
    if qat < 10 <= ptq:
        print("reproduced: the QAT model's product is clipped to the weight's range")
        return 0
    print("not reproduced: QAT quantizes x * weight as PTQ does; remove the expectation")
    return 1


if __name__ == "__main__":
    sys.exit(main())
