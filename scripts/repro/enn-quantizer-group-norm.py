#!/usr/bin/env python3
"""Repro, outside hil: ExecuTorch 1.5.1's EnnQuantizer cannot calibrate a GroupNorm at A8W8.

`annotate_group_norm` (executorch/backends/samsung/quantizer/annotator.py, unchanged on
main) gives the 1-D affine weight (`node.args[2]`) the conv weight spec: a per-channel
observer (`PerChannelMinMaxObserver`, ch_axis 0), which flattens from dimension 1 — a 1-D
tensor has none, so the first calibration batch raises
`IndexError: Dimension out of range (expected to be in range of [-1, 0], but got 1)`.
The same happens in upstream's own `quantize_module` (export_utils.py). hil's
`ops.a8w8.group_norm` case therefore expects FAIL_QUANTIZE.

Exit 0 when the bug reproduces, 1 when GroupNorm quantizes (the expectation can go).
"""

import sys

import torch
from executorch.backends.samsung.quantizer.quantizer import EnnQuantizer, Precision
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


def main() -> int:
    module = torch.nn.GroupNorm(3, 12).eval()  # upstream's test_group_norm.py configuration
    example = (torch.randn(1, 12, 8, 8),)
    quantizer = EnnQuantizer()
    quantizer.setup_quant_params(Precision.A8W8)
    prepared = prepare_pt2e(torch.export.export(module, example).module(), quantizer)
    try:
        prepared(*example)
    except IndexError as error:
        print(f"reproduced: calibration fails: IndexError: {error}")
        return 0
    convert_pt2e(prepared, fold_quantize=False)
    print("not reproduced: GroupNorm quantizes at A8W8; remove the expectation")
    return 1


if __name__ == "__main__":
    sys.exit(main())
