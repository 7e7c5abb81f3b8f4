"""What enn_executor_runner cannot run is FAIL_LOWER, caught before any board sees it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hil.cases.case import Case, InputSpec
from hil.lower import LoweringFailed
from hil.lower.build import build_artifact
from hil.verdict import Verdict


class CountsToo(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        return x + 1, x.shape[0]


@pytest.mark.slow
def test_a_non_tensor_output_is_fail_lower_naming_to_tensor(tmp_path: Path) -> None:
    case = Case(id="counts_too", suite="t", factory=CountsToo, inputs=(InputSpec((2, 3)),))
    with pytest.raises(LoweringFailed) as failed:
        build_artifact(case, "portable", "E9955", tmp_path)
    assert failed.value.verdict is Verdict.FAIL_LOWER
    assert failed.value.message == ("output 1 is of type int, not a tensor: enn_executor_runner calls "
                                    "toTensor() on every output and would abort")
