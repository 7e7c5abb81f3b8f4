"""The `ops` suite's yolo26 group: the primitives of upstream's yolo26 detector
(models/test_yolo26_primitives.py of ExecuTorch main, which lowers each and checks its
delegation; hil also runs and compares them, with the test harness's default tolerance). The
detector itself is built by `ultralytics`, AGPL-3.0, which hil does not depend on: only its
primitives are cases."""

from __future__ import annotations

import torch

from hil.cases.case import Case
from hil.cases.op_modules import Binary, Unary, seeded
from hil.cases.ops import TIED_INDICES, P, _op, _w
from hil.cases.upstream_modules import StrideMul, TopKOutput, amax_last, softmax_last


def yolo26_primitives() -> list[Case]:
    """One case per primitive and precision, tagged `group:yolo26`; the topk primitives'
    indices are not compared at A8W8 (SKIP)."""
    test = "main:models/test_yolo26_primitives.py::test_compile_primitives[operator={}]"
    group = ("group:yolo26",)
    found: list[Case] = []
    add = found.extend
    add(_op("softmax", "softmax_yolo26_attention", P(seeded, Unary, softmax_last), [_w(1, 2, 100, 100)],
            test.format("attention_softmax"), tags=group))
    add(_op("bmm", "bmm_yolo26_query_key", P(seeded, Binary, torch.bmm), [_w(2, 100, 32), _w(2, 32, 100)],
            test.format("query_key_bmm"), tags=group))
    add(_op("bmm", "bmm_yolo26_value_attention", P(seeded, Binary, torch.bmm),
            [_w(2, 64, 100), _w(2, 100, 100)], test.format("value_attention_bmm"), tags=group))
    add(_op("amax", "amax_yolo26_scores", P(seeded, Unary, amax_last), [_w(1, 2100, 80)],
            test.format("scores_amax"), tags=group))
    scores = [_w(1, 2100)]
    add(_op("topk", "topk_yolo26_indices", P(seeded, TopKOutput, 300, -1, "indices"), scores,
            test.format("indices_topk"), skip_a8w8=TIED_INDICES, tags=group))
    add(_op("topk", "topk_yolo26_values", P(seeded, TopKOutput, 300, -1, "values"), scores,
            test.format("values_topk"), tags=group))
    add(_op("topk", "topk_yolo26_both", P(seeded, TopKOutput, 300, None), scores,
            test.format("both_topk"), skip_a8w8=TIED_INDICES, tags=group))
    add(_op("mul", "mul_yolo26_stride", P(seeded, StrideMul), [_w(1, 4, 2100)], test.format("stride_mul"),
            tags=group))
    return found
