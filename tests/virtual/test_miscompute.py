"""The `miscompute,op=NAME[,rel=R]` fault: the op names a program executes are read from the
program (its kernels and its XNNPACK delegate's nodes), and only a program executing the op
comes back perturbed, by exactly R x its outputs' RMS (real ExecuTorch programs, in-process
virtual runner)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hil.errors import UsageError
from hil.lower.flows import lower_program
from hil.runner.pte import read_program
from hil.verdict import sqnr_db
from hil.virtual.faults import FaultPlan, parse_fault
from hil.virtual.program_ops import program_op_names
from hil.virtual.runner import RunnerFaults, execute_request

WORKDIR = "/data/local/tmp/m"


class ConvHardswishAdd(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.hardswish(self.conv(x))
        return y + y.mean()


class ConvOnly(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def test_miscompute_specs() -> None:
    fault = parse_fault("miscompute,op=hardswish,rel=0.25")
    assert (fault.kind, fault.on, fault.op, fault.rel, fault.times) == ("miscompute", "exec", "hardswish", 0.25, 0)
    assert (parse_fault("miscompute").op, parse_fault("miscompute").rel) == ("", 0.5)
    plan = FaultPlan([parse_fault("miscompute,op=add")])
    assert [len(plan.fire("exec")) for _ in range(3)] == [1, 1, 1]  # every exec, not once
    for spec, error in [("miscompute,op=hard-swish", "not an op name"), ("miscompute,rel=0", r"\(0, 100\]"),
                        ("miscompute,rel=x", r"\(0, 100\]"), ("miscompute,on=push", "unknown option")]:
        with pytest.raises(UsageError, match=error):
            parse_fault(spec)


@pytest.fixture(scope="module")
def programs() -> dict[str, bytes]:
    torch.manual_seed(0)
    example = (torch.rand(1, 3, 8, 8),)
    found = {}
    for name, module in (("model", ConvHardswishAdd()), ("conv", ConvOnly())):
        exported = torch.export.export(module.eval(), example)
        found[f"{name}-xnnpack"] = lower_program(exported, "xnnpack", "E9955").buffer
    found["model-portable"] = lower_program(torch.export.export(ConvHardswishAdd().eval(), example),
                                            "portable", "E9955").buffer
    return found


@pytest.mark.slow
def test_delegated_ops_are_read_from_the_xnnpack_payload(programs: dict[str, bytes]) -> None:
    xnnpack = programs["model-xnnpack"]
    assert not any("hardswish" in op for op in read_program(xnnpack).operators)  # inside the delegate
    names = program_op_names(xnnpack)
    assert {"hardswish", "add", "convolution"} <= names
    assert "hardswish" not in program_op_names(programs["conv-xnnpack"])
    assert "add" in program_op_names(programs["model-portable"])  # portable kernels: the operator list


@pytest.mark.slow
def test_only_programs_executing_the_op_come_back_perturbed_by_rel(tmp_path: Path, programs: dict[str, bytes]) -> None:
    workdir = tmp_path / WORKDIR.lstrip("/")
    (workdir / "out").mkdir(parents=True)
    x = torch.rand(1, 3, 8, 8)
    (workdir / "input_0.bin").write_bytes(x.numpy().tobytes())

    def run(model: str, miscompute: tuple[tuple[str, float], ...]) -> np.ndarray:
        (workdir / "model.pte").write_bytes(programs[model])
        result = execute_request(["--model", "model.pte", "--input", "input_0.bin", "--output_path", "out"],
                                 WORKDIR, fs_root=tmp_path, faults=RunnerFaults(miscompute=miscompute))
        assert result.exit_code == 0, result.stderr
        return np.fromfile(workdir / "out" / "output_0.bin", dtype=np.float32)

    clean = run("model-xnnpack", ())
    assert np.array_equal(run("model-xnnpack", (("softmax", 0.25),)), clean)
    assert np.array_equal(run("conv-xnnpack", (("hardswish", 0.25),)), run("conv-xnnpack", ()))
    perturbed = run("model-xnnpack", (("hardswish", 0.25),))
    assert sqnr_db(clean, perturbed) == pytest.approx(20 * np.log10(1 / 0.25), abs=0.01)
    assert sqnr_db(clean, run("model-xnnpack", (("", 0.5),))) == pytest.approx(6.02, abs=0.01)  # every program
