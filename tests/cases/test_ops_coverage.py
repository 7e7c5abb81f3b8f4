"""The ops suite covers every op of the ENN op-support table and of the 1.5.1 test tree, at
fp32 and at A8W8; the op list itself matches the reference."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hil.cases import load_suite
from hil.cases.ops import OPS, coverage_gaps

REFERENCE = next(
    (folder / "shared" / "reference" / "exynos-backend.md" for folder in Path(__file__).resolve().parents
     if (folder / "shared" / "reference" / "exynos-backend.md").is_file()),
    Path(__file__).resolve().parents[3] / "shared" / "reference" / "exynos-backend.md",
)
"""The project's notes on upstream's op table, beside the checkout (or a worktree's checkout)."""


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
    assert all(c.expect_delegated for c in ops_suite if c.expect is None)
    assert [c.key for c in ops_suite if c.expect is not None] == ["ops.a8w8.group_norm"]
    a8w8 = [c for c in ops_suite if c.precision == "a8w8"]
    assert all(c.atol_scale_steps > 0 and c.tolerance.min_sqnr_db for c in a8w8)


def _reference_ops(text: str) -> set[str]:
    table = re.search(r"Op-support table:(.*?); the 1\.5\.1 test tree also has(.*?)\.\n", text, re.S)
    assert table, "the op list's wording in the reference changed"
    names = set()
    for chunk in (table.group(1), table.group(2)):
        for item in re.split(r",(?![^(]*\))", " ".join(chunk.split())):
            item = item.strip()
            if item.startswith("quantize/dequantize"):
                names |= {f"{d}_{kind}" for d in ("quantize", "dequantize")
                          for kind in ("per_tensor", "per_channel")}
            elif item:
                names.add(item)
    return names


def test_op_list_matches_the_reference():
    if not REFERENCE.exists():
        if os.environ.get("CI"):  # CI must check it: a quiet skip there hides a drifted table
            pytest.fail(f"no reference at {REFERENCE} (CI needs the project's shared/ notes)")
        pytest.skip(f"no reference at {REFERENCE}")
    assert _reference_ops(REFERENCE.read_text()) == set(OPS)


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
