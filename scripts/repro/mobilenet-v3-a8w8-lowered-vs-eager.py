#!/usr/bin/env python3
"""Repro: hil's A8W8 MobileNetV3-small, lowered by ExecuTorch 1.5.1 (XNNPACK, and the
portable/quantized kernels), computes something else than the same quantized graph run
eagerly by PyTorch: 75-126 quantization steps apart, 9-12 dB SQNR, where every other model of
the suite stays within 2-20 steps and 22-40 dB.

Only the model is hil's (`hil.cases.models`: seeded random init, rescaled, head fitted); the
quantization is ExecuTorch's own `quantize_module` path (EnnQuantizer A8W8, SDPA pass,
prepare/convert, here `fold_quantize=True` as host flows need), the lowering is ExecuTorch's
XNNPACK recipe (examples/xnnpack/aot_compiler.py) and the runtime is `executorch.runtime`.
Not localized yet (a per-layer bisection is the next step): the divergence sits in feature
directions of small variance, which the fitted head reads (with a head fitted at a high
penalty, reading only the large directions, the same backbone stays within 7 steps).

Exit 0 when the divergence reproduces (SQNR < 20 dB), 1 when it is gone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import executorch.kernels.quantized  # noqa: F401 - quantized kernels for undelegated q/dq
    from executorch.backends.samsung.quantizer.quantizer import EnnQuantizer, Precision
    from executorch.backends.transforms.decompose_sdpa import DecomposeScaledDotProductAttention
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from hil.cases import load_suite

    case = next(c for c in load_suite("models") if c.key == "models.a8w8.mobilenet_v3")
    torch.manual_seed(case.seed)
    model = case.factory().eval()
    inputs = case.dataset.batch(0, case.seed).inputs
    calibration = [case.dataset.batch(i, case.seed).inputs for i in range(1, case.dataset.calibration + 1)]

    quantizer = EnnQuantizer()
    quantizer.setup_quant_params(Precision.A8W8)
    graph = torch.export.export(model, inputs).module(check_guards=False)
    DecomposeScaledDotProductAttention()(graph)
    prepared = prepare_pt2e(graph, quantizer)
    for sample in calibration:
        prepared(*sample)
    quantized = convert_pt2e(prepared, fold_quantize=True)
    with torch.no_grad():
        eager = quantized(*inputs)
    for name, partitioners in (("xnnpack", [XnnpackPartitioner()]), ("portable", [])):
        program = to_edge_transform_and_lower(torch.export.export(quantized, inputs),
                                              partitioner=partitioners).to_executorch()
        lowered = Runtime.get().load_program(program.buffer).load_method("forward").execute(list(inputs))[0]
        noise = float(((lowered - eager) ** 2).mean())
        sqnr = 10 * torch.log10((eager ** 2).mean() / noise).item() if noise else float("inf")
        print(f"{name}: lowered vs eager quantized graph: SQNR {sqnr:.1f} dB, max abs "
              f"{float((lowered - eager).abs().max()):.3f}, top-1 agreement "
              f"{float((lowered.argmax(1) == eager.argmax(1)).float().mean()):.3f}")
        if sqnr >= 20:
            print("not reproduced: remove the expectation of models.a8w8.mobilenet_v3")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
