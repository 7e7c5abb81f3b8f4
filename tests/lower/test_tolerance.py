"""Judging lowered artifacts: the A8W8 atol from the output's quantization step, and the
delegation rule on flow `enn` (PASS_UNDELEGATED, or a failure when the case requires it)."""

from pathlib import Path

import numpy as np
import pytest
from torch import nn

from hil.board.execution import Execution
from hil.cases.case import Case, InputSpec
from hil.judge import judge
from hil.lower.artifact import Artifact, TensorMeta
from hil.verdict import Tolerance, Verdict


def _case(**fields) -> Case:
    base = {"id": "add", "suite": "t", "factory": nn.Identity, "inputs": (InputSpec((4,)),),
            "precision": "a8w8", "tolerance": Tolerance(atol=1e-3, rtol=0.0)}
    return Case(**{**base, **fields})


def _judge(tmp_path: Path, case: Case, error: float, flow: str = "xnnpack", scale: float | None = 0.05,
           delegated: tuple[str, ...] = ("aten.add.Tensor",)):
    reference = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32)
    (tmp_path / "reference_0.bin").write_bytes(reference.tobytes())
    artifact = Artifact(tmp_path, flow, (TensorMeta("float32", (4,)),), (TensorMeta("float32", (4,)),),
                        pte_bytes=1, delegated_calls=1, delegated_ops=delegated,
                        output_scales=(scale,) if scale is not None else ())
    execution = Execution(exit_code=0, stdout="", stderr="", timed_out=False, logs=(),
                          outputs=((reference + np.float32(error)).tobytes(),), timings_s={},
                          latency_ms=None)
    return judge(case, artifact, execution)


def test_a8w8_atol_grows_with_the_quantization_step(tmp_path):
    case = _case(atol_scale_steps=2.0)
    ok = _judge(tmp_path, case, error=0.09)  # < 1e-3 + 2 x 0.05
    assert ok.verdict is Verdict.PASS
    (record,) = ok.output_records()
    assert record["atol"] == pytest.approx(0.101)
    assert record["atol_rule"] == "0.001 + 2 x quantization step 0.05"
    ref = np.array([0.5, -1.0, 2.0, 0.25])
    expected = ref @ (ref + 0.09) / (np.linalg.norm(ref) * np.linalg.norm(ref + 0.09))
    assert record["cosine"] == pytest.approx(expected, rel=1e-6) and expected < 0.999
    bad = _judge(tmp_path, case, error=0.11)
    assert bad.verdict is Verdict.FAIL_MISMATCH and "atol 0.101" in bad.message


def test_an_unquantized_output_keeps_the_case_atol(tmp_path):
    judged = _judge(tmp_path, _case(atol_scale_steps=2.0), error=0.09, scale=None)
    assert judged.verdict is Verdict.FAIL_MISMATCH
    assert judged.output_records()[0]["atol_rule"] == "case atol"


def test_delegation_is_required_on_enn_only_and_fails_when_the_case_says_so(tmp_path):
    case = _case(expect_delegated=("add", "mul"))
    assert _judge(tmp_path, case, 0.0, flow="xnnpack").verdict is Verdict.PASS
    warned = _judge(tmp_path, case, 0.0, flow="enn")
    assert warned.verdict is Verdict.PASS_UNDELEGATED and warned.message.endswith(": mul")
    strict = _judge(tmp_path, _case(expect_delegated=("add", "mul"), require_delegation=True), 0.0, flow="enn")
    assert strict.verdict is Verdict.FAIL_LOWER
    assert strict.message == "not delegated on enn (the case requires it): mul"
    both = ("aten.add.Tensor", "aten.mul.Tensor")
    assert _judge(tmp_path, case, 0.0, flow="enn", delegated=both).verdict is Verdict.PASS
