#!/usr/bin/env python3
"""Repro, outside hil: ExecuTorch 1.5.1's EnnQuantizer cannot annotate a Hardtanh whose
max_val is the default 1.

`torch.export` leaves a trailing argument equal to its schema default out of the node, so
upstream's `Hardtanh(min_val=0, max_val=1)` (main's ops/test_hardtanh.py) exports as
`aten.hardtanh.default(x, 0)`. `_is_hardtanh_for_relux` (executorch/backends/samsung/quantizer/
annotator.py, unchanged on main) reads `relu_node.args[2]` once `args[1] == 0.0`:
`IndexError: tuple index out of range` in `prepare_pt2e`. Upstream tests this module at fp32
only. hil's `ops.a8w8.hardtanh` case therefore expects FAIL_QUANTIZE.

Exit 0 when the bug reproduces, 1 when the module quantizes (the expectation can go).
"""

import sys

import torch
from executorch.backends.samsung.quantizer.quantizer import EnnQuantizer, Precision
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e


def main() -> int:
    module = torch.nn.Hardtanh(min_val=0, max_val=1).eval()  # upstream's test_hardtanh.py
    example = (torch.randn(1, 3, 16, 16),)
    exported = torch.export.export(module, example)
    node = next(n for n in exported.graph.nodes if n.op == "call_function")
    print(f"exported: {node.target}{tuple(str(a) for a in node.args)}")
    quantizer = EnnQuantizer()
    quantizer.setup_quant_params(Precision.A8W8)
    try:
        prepare_pt2e(exported.module(), quantizer)
    except IndexError as error:
        print(f"reproduced: annotation fails: IndexError: {error}")
        return 0
    print("not reproduced: Hardtanh(0, 1) is annotated at A8W8; remove the expectation")
    return 1


if __name__ == "__main__":
    sys.exit(main())
