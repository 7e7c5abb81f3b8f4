#!/usr/bin/env python3
"""Repro, outside hil: ExecuTorch 1.5.1's XNNPACK backend cannot lower a Hardtanh whose
max_val is the default 1.

`torch.export` leaves a trailing argument equal to its schema default out of the node, so
upstream's `Hardtanh(min_val=0, max_val=1)` (main's ops/test_hardtanh.py) exports as
`aten.hardtanh.default(x, 0)`. XNNPACK's partitioner takes the node, and `HardTanhVisitor`
(executorch/backends/xnnpack/operators/op_hardtanh.py) reads `node.args[2]` whenever there
is an `args[1]`: `IndexError: tuple index out of range` in preprocess. The ENN builder
(backends/samsung/builders/op_hardtanh.py) reads the default instead, so this fails on the
virtual board's host flow (xnnpack), not on flow enn. hil's `ops.fp32.hardtanh` case
therefore expects FAIL_LOWER.

Exit 0 when the bug reproduces, 1 when the module lowers (the expectation can go).
"""

import sys

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower


def main() -> int:
    module = torch.nn.Hardtanh(min_val=0, max_val=1).eval()  # upstream's test_hardtanh.py
    exported = torch.export.export(module, (torch.randn(1, 3, 16, 16),))
    try:
        to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
    except IndexError as error:
        print(f"reproduced: lowering fails: IndexError: {error}")
        return 0
    print("not reproduced: Hardtanh(0, 1) lowers to XNNPACK; remove the expectation")
    return 1


if __name__ == "__main__":
    sys.exit(main())
