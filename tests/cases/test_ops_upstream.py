"""The catalogue against upstream's Samsung tests (scripts/upstream-coverage.py,
hil.cases.upstream_coverage): the installed wheel's tree has no test without a case and no
tagged case that differs from its test; a newer tree's new test, changed parameter and new
delegation expectation are each reported; the reader understands upstream's test shapes
(helpers, subtests, unit tests that export, checks after lowering)."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from hil.cases import load_suite
from hil.cases.case import Case, InputSpec
from hil.cases.op_modules import BatchNorm, seeded
from hil.cases.upstream_coverage import compare_case, newer, satisfied
from hil.cases.upstream_tree import Lowering, find_test_dir, read_tests, tree_version

pytestmark = pytest.mark.slow  # reads and exports upstream's ~110 op tests and hil's cases

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "upstream-coverage.py"
NEWER = REPO / "tests" / "fixtures" / "upstream-newer"
WHEEL = find_test_dir(Path(torch.__file__).resolve().parents[1])


def _coverage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=900)


def test_the_installed_wheel_has_no_test_without_a_case_and_no_case_that_differs() -> None:
    done = _coverage()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    head = done.stdout.splitlines()[0]
    assert head.endswith("0 gap(s), 0 difference(s)") and "(ExecuTorch 1.5.1)" in head, head
    compared = int(head.split(": ")[1].split(" case(s)")[0])
    assert compared >= 170  # every tagged ops and models case whose test the wheel has


def test_a_newer_tree_reports_its_new_test_changed_parameter_and_new_expectation() -> None:
    done = _coverage(str(NEWER))
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and "(ExecuTorch main)" in lines[0]
    assert "gap: ops/test_erf.py::test_fp32_erf: no case" in lines
    assert ("differs: ops.fp32.rms_norm: parameter 0 (196,): explicit value [3.0, 3.0, 3.0]..., "
            "the case has [2.0, 2.0, 2.0]...") in lines
    assert any(line.startswith("differs: ops/test_sigmoid.py::test_fp32_sigmoid: upstream main states that "
                               "sigmoid stays outside the delegate; the installed ExecuTorch 1.5.1") for line in lines)
    # a release's test the tree no longer has is a gap too; a newer version's is only a note
    assert "gap: ops/test_add.py::test_fp32_simple_add: the tree has no such test (cases " \
           "ops.fp32.add_simple)" in lines


def test_a_path_that_is_no_executorch_tree_is_one_line_exit_3(tmp_path: Path) -> None:
    done = _coverage(str(tmp_path))
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"upstream-coverage: error: {tmp_path}: no backends/samsung/test/ops folder (not an ExecuTorch "
        "checkout or wheel)"]


def test_tree_versions() -> None:
    assert tree_version(WHEEL) == "1.5.1"
    assert tree_version(find_test_dir(NEWER)) == "main"  # version.txt 1.6.0a0: a branch, not a release
    assert newer("main", "1.5.1") and newer("1.6.0", "1.5.1") and not newer("1.5.1", "main")


@functools.cache
def _wheel_tests(seed: int) -> dict:
    return {t.id: t for t in read_tests(WHEEL, seed=seed)}


def test_the_reader_records_modules_checks_tolerances_and_a8w8() -> None:
    tests = _wheel_tests(1)
    (topk,) = tests["ops/test_topk.py::test_fp32_topk_dim3"].lowerings
    assert type(topk.module).__name__ == "TopK" and topk.inputs[0].shape == (1, 16, 8, 8)
    assert topk.delegation() == [("op:topk", True), ("delegate", True)]
    (bmm,) = tests["ops/test_bmm.py::test_fp32_bmm"].lowerings
    assert (bmm.atol, bmm.rtol, bmm.quantized) == (0.005, 0.005, False)
    assert tests["ops/test_mul.py::test_a8w8_simple_mul"].lowerings[0].quantized
    model = tests["models/test_mobilenet_v2.py::test_mv2_fp16"]
    assert model.lowerings == [] and (model.atol, model.rtol) == (0.02, None) and not model.error


def test_subtests_and_unit_tests_that_export_are_read(tmp_path: Path) -> None:
    tests = tmp_path / "backends" / "samsung" / "test"
    for kind in ("ops", "models", "unit"):
        (tests / kind).mkdir(parents=True)
    (tests / "models" / "test_primitives.py").write_text(
        "import unittest\nimport torch\n"
        "from executorch.backends.samsung.test.tester import SamsungTester\n"
        "class P(torch.nn.Module):\n    def __init__(self, f):\n        super().__init__()\n        self.f = f\n"
        "    def forward(self, x):\n        return self.f(x)\n"
        "class T(unittest.TestCase):\n    def test_all(self):\n"
        "        for name, f in (('amax', lambda x: torch.amax(x, -1)), ('neg', torch.neg)):\n"
        "            with self.subTest(operator=name):\n"
        "                t = SamsungTester(P(f), (torch.randn(2, 3),), None)\n"
        "                t.export().to_edge_transform_and_lower()\n"
        "                t.check(['torch.ops.higher_order.executorch_call_delegate'])\n")
    (tests / "unit" / "test_scale.py").write_text(
        "import unittest\nimport torch\nfrom executorch.exir import to_edge\n"
        "class Scale(torch.nn.Module):\n    def forward(self, x):\n        return x * 0.5\n"
        "class T(unittest.TestCase):\n    def test_scale(self):\n"
        "        to_edge(torch.export.export(Scale(), (torch.randn(1, 4),)))\n        raise AssertionError\n")
    found = {t.id: t for t in read_tests(tests, ("ops", "models", "unit"))}
    assert sorted(found) == ["models/test_primitives.py::test_all[operator=amax]",
                             "models/test_primitives.py::test_all[operator=neg]", "unit/test_scale.py::test_scale"]
    amax = found["models/test_primitives.py::test_all[operator=amax]"].lowerings[0]
    assert amax.delegation() == [("delegate", True)] and float(amax.module(torch.ones(2, 3))[0]) == 1.0
    scale = found["unit/test_scale.py::test_scale"]
    assert not scale.error and scale.lowerings[0].inputs[0].shape == (1, 4)  # read up to its export


def _case(factory, *shape: int, test: str) -> Case:
    return Case(id="x", suite="ops", factory=factory, inputs=(InputSpec(shape, low=-3, high=3),),
                tags=(f"upstream:1.5.1:{test}",))


def test_explicit_parameters_are_compared_and_random_ones_by_their_range() -> None:
    """hil's rms_norm and batch_norm as they were before upstream's parameters were taken
    (weight 1.0; BatchNorm with its own statistics) differ from upstream's; upstream's
    randomly initialised weights (a conv's) do not make a difference."""
    first, second = _wheel_tests(1), _wheel_tests(2)

    def differences(case: Case, test: str) -> list[str]:
        return compare_case(case, first[test].lowerings[0], second[test].lowerings[0], (1e-3, 1e-3))

    rms = "ops/test_rms_norm.py::test_fp32_rms_norm"
    assert differences(_case(functools.partial(seeded, nn.RMSNorm, [196], eps=1e-5), 1, 196, test=rms), rms) == [
        "parameter 0 (196,): explicit value [2.0, 2.0, 2.0]..., the case has [1.0, 1.0, 1.0]...",
        "tolerance atol 0.0001 rtol 0.0001, upstream atol 0.001 rtol 0.001"]
    bn = "ops/test_batch_norm.py::test_fp32_batch_norm"
    found = differences(_case(functools.partial(seeded, BatchNorm, 16), 4, 16, 32, 32, test=bn), bn)
    # weight U(0.5, 1.5) against upstream's U(-0.1, 0.1); the bias is drawn alike; the
    # running statistics are upstream's defaults (mean 0, variance 1)
    assert [line.split(":")[0] for line in found] == ["parameter 0 (16,)", "parameter 2 (16,)",
                                                      "parameter 3 (16,)", "tolerance atol 0.0001 rtol 0.0001, upstream atol 0.001 rtol 0.001"]
    assert "upstream draws it in [-0.0" in found[0] and "the case's lies in [0.5" in found[0]
    assert "explicit value [0.0, 0.0, 0.0]" in found[1] and "explicit value [1.0, 1.0, 1.0]" in found[2]
    conv = "ops/test_conv2d.py::test_fp32_conv2d_with_bias"
    ours = next(c for c in load_suite("ops") if c.key == "ops.fp32.conv2d_stride2")
    assert differences(ours, conv) == []


def test_a_statement_about_an_op_the_edge_graph_lacks_says_nothing() -> None:
    """Upstream's `check_not` of an edge op that is not in the graph (permute where edge has
    permute_copy) holds whatever the partitioner does: not a difference."""
    case = Case(id="x", suite="ops", factory=nn.Identity, inputs=(), expect_delegated=("permute_copy",))
    edge = functools.cache(lambda: {"permute_copy"})
    assert satisfied(("op:permute", True), case, edge) is None
    assert satisfied(("op:permute_copy", True), case, edge) is True
    assert satisfied(("op:permute_copy", False), case, edge) is False
    assert satisfied(("delegate", False), case, edge) is False
    lowering = Lowering(nn.Identity(), (), checks=[
        ("export", "count", (("torch.ops.aten.topk.default", 1),)),
        ("lowered", "count", (("executorch_exir_dialects_edge__ops_aten_topk_default", 1),)),
        ("lowered", "absent", ("torch.ops.higher_order.executorch_call_delegate",))])
    assert lowering.delegation() == [("op:topk", False), ("delegate", False)]
