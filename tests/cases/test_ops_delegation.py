"""Each ops case's expected delegation is what ExecuTorch 1.5.1's ENN partitioner keeps of its
edge graph (hil.lower.enn_partition), and hil's mirror of the partitioner's support rule
answers as upstream's own `EnnOperatorSupport` does (with the SDK wrapper's constant answer).

Every CI run: every case expects what DELEGATION_FILE stores, and the file's stored hash of
the derivation's inputs (the case definitions, the partitioner mirror, the quantization,
the executorch and torch versions: `delegation_inputs_digest`) matches them, so a change of
an input without re-deriving fails; a sample of the cases is derived afresh. With --full (the
nightly job): all 213 lowered cases derived afresh (~160 s on 2 cores; skipped cases have none).

Needs no SDK: the partitioner's modules are imported with the SDK-built adaptors faked for
the import only. What cannot be checked here is whether the NPU compiler then accepts each
kept node; that is the SDK's, on flow enn."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from concurrent.futures import ProcessPoolExecutor
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

from hil.cases import load_suite
from hil.cases.case import Case
from hil.cases.ops import DELEGATION_FILE
from hil.lower import enn_partition
from hil.lower.build import case_samples
from hil.lower.enn_partition import (
    DELEGATION_INPUTS,
    case_delegation,
    delegation_inputs_digest,
    enn_rules,
    expected_delegation,
    kept_nodes,
    without_sdk,
)

OPS = load_suite("ops")
SAMPLE_STRIDE = 19
"""CI derives every SAMPLE_STRIDE-th case afresh (odd, and a case's fp32 and A8W8 variants are
neighbours: both precisions come up) and every case with a known failure (no edge graph)."""


def _stored() -> dict:
    return json.loads(DELEGATION_FILE.read_text(encoding="utf-8"))


def _derive(case: Case) -> list[str] | str:
    """The case's derived delegation, or why it has no edge graph (in a worker process); a
    skipped case is not lowered."""
    if case.skip:
        return "skipped"
    try:
        return list(case_delegation(case))
    except Exception as exc:  # noqa: BLE001 - a case without an edge graph must say why
        return f"{type(exc).__name__}: {exc}"


def _differences(cases: list[Case], derivations: list[list[str] | str]) -> list[str]:
    stored = _stored()["cases"]
    differ = []
    for case, found in zip(cases, derivations, strict=True):
        derived = found if isinstance(found, list) else None
        assert derived is not None or case.expect is not None or case.skip, f"{case.key}: no edge graph ({found})"
        if stored[f"{case.precision}.{case.id}"] != derived or list(case.expect_delegated) != (derived or []):
            differ.append(f"{case.key}: stored {stored[f'{case.precision}.{case.id}']}, derived {derived}")
    return differ


def test_every_case_expects_the_stored_delegation_of_unchanged_inputs() -> None:
    document = _stored()
    stored = document["cases"]
    assert sorted(stored) == sorted(f"{c.precision}.{c.id}" for c in OPS)
    for case in OPS:
        kept = stored[f"{case.precision}.{case.id}"]
        assert (kept is None) == bool(case.skip) or case.expect is not None, \
            f"{case.key}: no edge graph, no known failure (or an edge graph for a skipped case)"
    assert (document["executorch"], document["torch"]) == (version("executorch"), version("torch")), \
        "run scripts/derive-ops-delegation.py: derived with another executorch or torch"
    assert document["inputs_sha256"] == delegation_inputs_digest(), (
        "run scripts/derive-ops-delegation.py: an ops case, the partitioner mirror or the "
        "quantization changed since the stored delegation was derived")


def test_the_inputs_digest_changes_with_each_input(tmp_path) -> None:
    package = Path(enn_partition.__file__).resolve().parents[1]
    for name in DELEGATION_INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(package / name, tmp_path / name)
    digest = delegation_inputs_digest(tmp_path)
    assert digest == delegation_inputs_digest()
    for name in DELEGATION_INPUTS:
        source = (tmp_path / name).read_text()
        (tmp_path / name).write_text(source + "\n")
        assert delegation_inputs_digest(tmp_path) != digest, name
        (tmp_path / name).write_text(source)


@pytest.mark.slow  # ~12 cases lowered to edge graphs
def test_a_sample_of_cases_derives_as_stored() -> None:
    sample = [c for i, c in enumerate(OPS) if i % SAMPLE_STRIDE == 0 or c.expect is not None]
    assert {c.precision for c in sample} == {"fp32", "a8w8"}
    differ = _differences(sample, [_derive(case) for case in sample])
    assert not differ, "run scripts/derive-ops-delegation.py:\n" + "\n".join(differ)


@pytest.mark.slow
@pytest.mark.full  # derives 213 cases in 2 processes (~160 s)
def test_every_case_expects_what_the_partitioner_keeps() -> None:
    # two spawned workers (the lowering pool's context): the derivation is CPU-bound and
    # the test suite otherwise leaves the second core idle
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        derivations = list(pool.map(_derive, OPS, chunksize=8))
    differ = _differences(OPS, derivations)
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


@pytest.mark.slow  # an export and a quantization each
@pytest.mark.parametrize("key", ["ops.fp32.conv2d_stride2", "ops.a8w8.relu_conv", "ops.fp32.rms_norm",
                                 "ops.fp32.topk_dim3", "ops.fp32.index_axis2", "ops.a8w8.split_with_sizes_copy_chunk"])
def test_the_support_rule_answers_as_upstreams_operator_support(key: str) -> None:
    from hil.lower.build import calibration_samples
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
