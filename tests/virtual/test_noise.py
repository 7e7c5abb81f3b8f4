"""The `noise` fault: its SPEC, and noise of the asked size on float outputs only, seeded."""

from __future__ import annotations

import pytest
import torch

from hil.errors import UsageError
from hil.verdict import sqnr_db
from hil.virtual.faults import Fault, FaultPlan, parse_fault
from hil.virtual.noise import add_noise


def test_noise_spec_fires_on_runner_execs() -> None:
    assert parse_fault("noise,rel=0.1") == Fault("noise", on="exec", rel=0.1)
    assert parse_fault("noise,rel=2,seed=7,times=0") == Fault("noise", on="exec", rel=2.0, seed=7, times=0)
    plan = FaultPlan([parse_fault("noise,rel=0.1,after=1")])
    assert plan.fire("exec") == [] and [f.kind for f in plan.fire("exec")] == ["noise"]
    for spec, message in [("noise", r"rel=\?: a multiple"), ("noise,rel=0", r"rel=0: a multiple"),
                          ("noise,rel=x", r"rel=x"), ("noise,on=push,rel=1", r"unknown option 'on=push'")]:
        with pytest.raises(UsageError, match=message):
            parse_fault(spec)


@pytest.mark.parametrize("rel", [0.01, 0.1, 1.0])
def test_noise_has_rel_times_the_outputs_spread(rel: float) -> None:
    output = torch.randn(64, 1000, generator=torch.Generator().manual_seed(1)) * 5 + 3
    noisy = add_noise(output, 0, rel, 0)
    ratio = float((noisy - output).double().std() / output.double().std())
    assert ratio == pytest.approx(rel, rel=0.02)
    assert sqnr_db(output.numpy(), noisy.numpy()) == pytest.approx(
        10 * torch.log10((output.double() ** 2).mean() / (rel * output.double().std()) ** 2).item(), abs=0.2)


def test_noise_is_seeded_and_spares_indices_and_constants() -> None:
    values, indices, constant = torch.randn(8, 8), torch.arange(8), torch.ones(4)
    first, second = add_noise(values, 0, 0.5, 3), add_noise(values, 0, 0.5, 3)
    assert torch.equal(first, second) and not torch.equal(first, values)
    assert add_noise(indices, 1, 0.5, 3) is indices and add_noise(constant, 2, 0.5, 3) is constant
    assert not torch.equal(add_noise(values, 0, 0.5, 4), first)
    assert not torch.equal(add_noise(values, 1, 0.5, 3), first)
