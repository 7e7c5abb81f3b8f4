"""Each ops case's expected delegation is what ExecuTorch 1.5.1's ENN partitioner keeps of its
edge graph (hil.lower.enn_partition), and hil's mirror of the partitioner's support rule
answers as upstream's own `EnnOperatorSupport` does (with the SDK wrapper's constant answer).

Needs no SDK: the partitioner's modules are imported with the SDK-built adaptors faked for
the import only. What cannot be checked here is whether the NPU compiler then accepts each
kept node; that is the SDK's, on flow enn."""

from __future__ import annotations

import json

import pytest
import torch

from hil.cases import load_suite
from hil.cases.ops import DELEGATION_FILE
from hil.lower import case_samples
from hil.lower.enn_partition import (
    case_delegation,
    enn_rules,
    expected_delegation,
    kept_nodes,
    without_sdk,
)

pytestmark = pytest.mark.slow  # derives ~180 cases: about 2.5 minutes on 2 cores

OPS = load_suite("ops")


def test_every_case_expects_what_the_partitioner_keeps() -> None:
    stored = json.loads(DELEGATION_FILE.read_text(encoding="utf-8"))["cases"]
    assert sorted(stored) == sorted(f"{c.precision}.{c.id}" for c in OPS)
    differ = []
    for case in OPS:
        try:
            derived: list[str] | None = list(case_delegation(case))
        except Exception:  # noqa: BLE001 - a case without an edge graph must say why
            assert case.expect is not None, f"{case.key}: no edge graph and no known failure"
            derived = None
        if stored[f"{case.precision}.{case.id}"] != derived or list(case.expect_delegated) != (derived or []):
            differ.append(f"{case.key}: stored {stored[f'{case.precision}.{case.id}']}, derived {derived}")
    assert not differ, "run scripts/derive-ops-delegation.py:\n" + "\n".join(differ)


def test_ops_kept_whole_and_decomposed_as_upstream_says() -> None:
    by_key = {c.key: c for c in OPS}
    assert by_key["ops.fp32.layer_norm"].expect_delegated == ("layer_norm",)  # not native_layer_norm
    assert by_key["ops.fp32.rms_norm"].expect_delegated == ("add", "mean", "mul", "pow", "rsqrt")
    assert set(by_key["ops.a8w8.conv2d_stride2"].expect_delegated) == {
        "convolution", "quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel",
        "dequantize_per_channel"}
    names = {op.name() for op in enn_rules().ops_to_not_decompose(None)[0]}
    assert "aten::layer_norm" in names and "aten::rms_norm" not in names


@pytest.mark.parametrize("key", ["ops.fp32.conv2d_stride2", "ops.a8w8.relu_conv", "ops.fp32.rms_norm",
                                 "ops.fp32.topk_dim3", "ops.fp32.index_axis2", "ops.a8w8.split_with_sizes_copy_chunk"])
def test_the_support_rule_answers_as_upstreams_operator_support(key: str) -> None:
    from hil.lower import calibration_samples
    from hil.lower.quantize import quantize_a8w8

    case = next(c for c in OPS if c.key == key)
    torch.manual_seed(case.seed)
    module, inputs = case.factory().eval(), case_samples(case).inputs
    if case.precision == "a8w8":
        module = quantize_a8w8(module, inputs, calibration_samples(case)[:1], fold_quantize=False)
    exported = torch.export.export(module, inputs)
    with without_sdk():
        from executorch.backends.samsung.partition import enn_partitioner
        from executorch.backends.samsung.serialization.compile_options import (
            gen_samsung_backend_compile_spec,
        )

        specs = [gen_samsung_backend_compile_spec("E9955")]
        upstream = kept_nodes(exported, support=lambda ep: enn_partitioner.EnnOperatorSupport(ep, specs))
    assert kept_nodes(exported) == upstream
    assert expected_delegation(exported) == case.expect_delegated
