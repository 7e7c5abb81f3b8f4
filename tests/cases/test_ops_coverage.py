"""The ops suite covers every op of the ENN op-support table, of the 1.5.1 test tree and of
upstream main's newer tests, at fp32 and at A8W8; the op lists match the project's reference
facts (hil/cases/upstream_reference.json), and those facts match the installed wheel where it
has them."""

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

from hil.cases import load_suite
from hil.cases.ops import ENN_OPS, EXTRA_OPS, NEWER_OPS, OPS, coverage_gaps
from hil.cases.upstream_coverage import load_reference

WHEEL_TESTS = Path(torch.__file__).parents[1] / "executorch" / "backends" / "samsung" / "test" / "ops"


@pytest.fixture(scope="module")
def ops_suite():
    return load_suite("ops")


def test_every_listed_op_has_an_fp32_and_an_a8w8_case(ops_suite):
    assert coverage_gaps(ops_suite) == []


def test_a_missing_case_is_reported(ops_suite):
    without = [c for c in ops_suite if not (c.id.startswith("rsqrt") and c.precision == "a8w8")]
    assert coverage_gaps(without) == ["rsqrt: no a8w8 case"]
    assert coverage_gaps(ops_suite, (*OPS, "erf")) == ["erf: no fp32 case", "erf: no a8w8 case"]


def test_case_ids_and_classnames(ops_suite):
    assert len({c.key for c in ops_suite}) == len(ops_suite)
    assert {c.classname for c in ops_suite} == {"ops.fp32", "ops.a8w8"}
    assert all(c.expect_delegated for c in ops_suite if c.expect is None and not c.skip
               and c.id != "amax_yolo26_scores")  # 1.5.1 has no amax builder: nothing delegated
    assert sorted(c.key for c in ops_suite if c.expect is not None) == [
        "ops.a8w8.group_norm", "ops.a8w8.hardtanh", "ops.fp32.hardtanh"]
    assert all(Path(c.expect.link).is_file() for c in ops_suite if c.expect is not None)
    a8w8 = [c for c in ops_suite if c.precision == "a8w8"]
    assert all(c.atol_scale_steps > 0 and c.tolerance.min_sqnr_db for c in a8w8)


def test_a8w8_variants_that_mean_nothing_are_skipped_with_their_reason(ops_suite):
    skipped = {c.id: c.skip for c in ops_suite if c.skip}
    assert all(c.precision == "a8w8" for c in ops_suite if c.skip)
    assert sorted(skipped) == ["log", "topk_indices_k300", "topk_quantized_both", "topk_quantized_indices",
                               "topk_quantized_values", "topk_yolo26_both", "topk_yolo26_indices"]
    assert "NaN" in skipped["log"] and "tie" in skipped["topk_yolo26_both"]
    assert "quantize/dequantize" in skipped["topk_quantized_values"]


def test_upstream_tags_name_a_version_and_the_main_ones_a_commit(ops_suite):
    reference = load_reference()
    tags = [t for c in ops_suite for t in c.tags if t.startswith("upstream:")]
    versions = {t.split(":")[1] for t in tags}
    assert versions == {"1.5.1", "main"}
    for tag in tags:
        path = tag.split(":", 2)[2].split("::")[0]
        if tag.startswith("upstream:main:"):
            assert len(reference["main_files"].get(path, "")) == 40, f"{tag}: no commit in the reference"
        else:
            assert (WHEEL_TESTS.parent / path).is_file(), tag
    yolo = [c.id for c in ops_suite if "group:yolo26" in c.tags and c.precision == "fp32"]
    assert len(yolo) == 8 and all("yolo26" in i for i in yolo)


def test_op_lists_match_the_reference():
    reference = load_reference()
    table = reference["op_support_table"]
    assert table["source"]["path"] == "docs/source/backends/samsung/samsung-op-support-table.csv"
    assert len(table["source"]["commit"]) == 40
    assert sorted(ENN_OPS) == sorted(table["ops"])
    trees = reference["test_tree_ops"]
    assert sorted(EXTRA_OPS) == sorted(set(trees["1.5.1"]) - set(table["ops"]))
    primitives = reference["model_primitives"]["main"]
    assert sorted(NEWER_OPS) == sorted(set(trees["main"]) - set(trees["1.5.1"]) - set(table["ops"])
                                       | set(primitives))


def test_the_reference_has_the_installed_wheels_test_tree():
    """The facts of the installed release are checked against its wheel (the newer version's,
    read from upstream's repository at the commits named, cannot be here)."""
    installed = version("executorch").split("+")[0]
    tree = load_reference()["test_tree_ops"]
    assert installed in tree, f"record ExecuTorch {installed}'s test tree in hil/cases/upstream_reference.json"
    assert tree[installed] == sorted(p.stem.removeprefix("test_") for p in WHEEL_TESTS.glob("test_*.py"))


def test_no_test_reads_reference_facts_from_outside_the_repository():
    tests = Path(__file__).resolve().parents[1]
    assert not [p for p in tests.rglob("*.py") if "shared/reference" in p.read_text(encoding="utf-8")
                and p.resolve() != Path(__file__).resolve()]


QUANTIZE_OPS = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel",
                "dequantize_per_channel")
FRESH_EXPORT = f"""
import torch
from hil.cases import load_suite
from hil.lower.build import case_samples
cases = [c for c in load_suite("ops") if c.id in {QUANTIZE_OPS!r} and c.precision == "fp32"]
for case in cases:
    torch.export.export(case.factory().eval(), case_samples(case).inputs)
print(len(cases))
"""


def test_the_quantize_op_cases_export_in_a_fresh_interpreter() -> None:
    """`torch.ops.quantized_decomposed` has its ops only once torch's module that defines them
    is imported: a `hil run --suite ops` whose lowering imported nothing else that does (all
    other cases in the artifact cache, say) failed these cases' export (FAIL_EXPORT)."""
    done = subprocess.run([sys.executable, "-c", FRESH_EXPORT], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == str(len(QUANTIZE_OPS))
