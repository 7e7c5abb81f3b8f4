"""How far hil's catalogue is behind an upstream Samsung test tree (`scripts/upstream-coverage.py`).

Against a tree (a checkout's or the installed wheel's `backends/samsung/test/`) it lists:
- **gaps**: every op or model test of the tree that no case names (`upstream:VERSION:PATH::TEST`
  tag) and `hil/cases/upstream_reference.json` does not leave out with a reason, and every
  tagged case whose test the tree no longer has although the tree is that version or newer;
- **differences**: every tagged case whose module classes, ops (with their non-tensor
  arguments), input shapes and dtypes, explicit parameters, precision or tolerance differ
  from its test's. Parameters the test draws at random (default initialisations, `randn`
  constants) are not compared by value: the test is read with two seeds, what stays the same
  is explicit and must be equal, what changes is random and must lie in the range it spans.
  Model cases are reduced (their `reduced:` tags say how): only their tolerance is compared.
- **delegation**: what the test's checks state after lowering (an op ends in the delegate or
  not, a delegate exists or not) against the installed partitioner's derivation of the case
  (its `expect_delegated`); a statement of another version the installed one does not
  satisfy must be recorded as that version's in the reference file (`delegation`), and a
  recorded one the tree no longer states is reported too.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Any

from hil.cases.case import Case
from hil.cases.upstream_tree import (
    Lowering,
    UpstreamTest,
    find_test_dir,
    harness_defaults,
    read_tests,
    tree_version,
)

REFERENCE_FILE = Path(__file__).with_name("upstream_reference.json")
"""The project's reference facts about upstream (each with its source)."""
SECOND_SEED = 2
"""The second global seed an upstream test is read with (the first is 1)."""


def load_reference(path: Path = REFERENCE_FILE) -> dict[str, Any]:
    """The reference facts (`hil/cases/upstream_reference.json`)."""
    return json.loads(path.read_text(encoding="utf-8"))


def upstream_tag(case: Case) -> tuple[str, str] | None:
    """(version, `PATH::TEST`) of the case's `upstream:` tag, None when it has none."""
    for tag in case.tags:
        if tag.startswith("upstream:"):
            version, test = tag.removeprefix("upstream:").split(":", 1)
            return version, test
    return None


def newer(a: str, b: str) -> bool:
    """Whether version `a` is newer than `b` (`main` is newer than every release)."""
    def key(v: str) -> tuple[int, ...]:
        return (10**9,) if v == "main" else tuple(int(p) for p in re.findall(r"\d+", v))
    return key(a) > key(b)


@dataclass
class Report:
    """What `coverage` found."""

    tree: Path
    version: str
    gaps: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    compared: int = 0

    @property
    def ok(self) -> bool:
        return not self.gaps and not self.differences

    def lines(self) -> list[str]:
        head = (f"upstream tests in {self.tree} (ExecuTorch {self.version}): {self.compared} case(s) "
                f"compared, {len(self.gaps)} gap(s), {len(self.differences)} difference(s)")
        return ([head] + [f"gap: {g}" for g in self.gaps] + [f"differs: {d}" for d in self.differences]
                + [f"note: {n}" for n in self.notes])


# -- what a module is -----------------------------------------------------------------------


def _plain(value: Any) -> Any:
    import torch

    if isinstance(value, torch.fx.Node):
        return "tensor"
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, float) and math.isfinite(value):
        return round(value, 9)
    return value


@dataclass
class _Graph:
    signature: list[tuple[Any, ...]]
    """(op, non-tensor args, kwargs) of every call, in graph order."""
    constants: list[Any]
    """Parameters, buffers and lifted constants, in the graph's input order."""
    classes: list[str]
    """torch.nn module classes the module holds (containers left out)."""
    shapes: list[tuple[tuple[int, ...], str]]


def _graph(module: Any, inputs: tuple[Any, ...]) -> _Graph:
    import torch
    from torch.export.graph_signature import InputKind

    module = module.eval()
    leaves = [t for t in torch.utils._pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    exported = torch.export.export(module, tuple(inputs))
    signature = [(str(n.target), _plain(n.args), tuple(sorted((k, _plain(v)) for k, v in n.kwargs.items())))
                 for n in exported.graph.nodes if n.op == "call_function"]
    constants = []
    for spec in exported.graph_signature.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            source = exported.constants if spec.target in exported.constants else exported.state_dict
            constants.append(source[spec.target].detach())
    containers = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)
    classes = sorted(type(m).__name__ for m in module.modules()
                     if type(m).__module__.startswith("torch.nn.") and not isinstance(m, containers))
    return _Graph(signature, constants, classes, [(tuple(t.shape), str(t.dtype)) for t in leaves])


def _parameters(ours: list[Any], first: list[Any], second: list[Any]) -> list[str]:
    """Explicit parameters (the same under both seeds) must be equal; random ones must lie in
    the range upstream's two draws span (widened by a quarter of it)."""
    import torch

    if [tuple(t.shape) for t in ours] != [tuple(t.shape) for t in first]:
        return [f"parameter shapes {[tuple(t.shape) for t in ours]}, upstream "
                f"{[tuple(t.shape) for t in first]}"]
    found = []
    for index, (mine, a, b) in enumerate(zip(ours, first, second, strict=True)):
        if not mine.is_floating_point():
            if not torch.equal(mine, a) and torch.equal(a, b):
                found.append(f"parameter {index}: {mine.flatten()[:4].tolist()}..., "
                             f"upstream {a.flatten()[:4].tolist()}...")
            continue
        if torch.equal(a, b):
            if not torch.allclose(mine.float(), a.float(), rtol=1e-6, atol=1e-7, equal_nan=True):
                found.append(f"parameter {index} {tuple(a.shape)}: explicit value "
                             f"{a.flatten()[:3].tolist()}..., the case has {mine.flatten()[:3].tolist()}...")
            continue
        low, high = float(torch.minimum(a, b).min()), float(torch.maximum(a, b).max())
        margin = (high - low) / 4
        if float(mine.min()) < low - margin or float(mine.max()) > high + margin:
            found.append(f"parameter {index} {tuple(a.shape)}: upstream draws it in [{low:.3g}, {high:.3g}], "
                         f"the case's lies in [{float(mine.min()):.3g}, {float(mine.max()):.3g}]")
    return found


# -- a case against its test ----------------------------------------------------------------


def _tolerance(case: Case, atol: float | None, rtol: float | None, defaults: tuple[float, float]) -> str:
    want = (atol if atol is not None else defaults[0], rtol if rtol is not None else defaults[1])
    have = (case.tolerance.atol, case.tolerance.rtol)
    if not all(math.isclose(w, h, rel_tol=1e-9, abs_tol=1e-12) for w, h in zip(want, have, strict=True)):
        return f"tolerance atol {have[0]:g} rtol {have[1]:g}, upstream atol {want[0]:g} rtol {want[1]:g}"
    return ""


def _hil_graph(case: Case) -> _Graph:
    import torch

    from hil.lower.build import case_samples

    torch.manual_seed(case.seed)
    return _graph(case.factory(), case_samples(case).inputs)


def compare_case(case: Case, first: Lowering, second: Lowering, defaults: tuple[float, float]) -> list[str]:
    """How `case` differs from upstream's lowering (read with two seeds: `first`, `second`)."""
    ours = _hil_graph(case)
    theirs = _graph(first.module, first.inputs)
    found = []
    if first.quantized and case.precision != "a8w8":
        found.append("upstream quantizes the module (A8W8), the case is fp32")
    if ours.shapes != theirs.shapes:
        found.append(f"inputs {ours.shapes}, upstream {theirs.shapes}")
    if ours.classes != theirs.classes:
        found.append(f"module classes {ours.classes}, upstream {theirs.classes}")
    if ours.signature != theirs.signature:
        found.append(f"ops {ours.signature}, upstream {theirs.signature}")
    if ours.constants or theirs.constants:
        found += _parameters(ours.constants, theirs.constants, _graph(second.module, second.inputs).constants)
    if first.compared and not first.quantized and case.precision == "fp32":
        found += [t for t in [_tolerance(case, first.atol, first.rtol, defaults)] if t]
    return found


def satisfied(statement: tuple[str, bool], case: Case, edge_ops: Callable[[], set[str]]) -> bool | None:
    """Whether the case's derived delegation (`expect_delegated`) satisfies an upstream
    statement; None when the statement says nothing about the case: that an op ends in the
    delegate, of an op its edge graph (`edge_ops()`) does not have (upstream's check then
    holds whatever the partitioner does)."""
    subject, delegated = statement
    if subject == "delegate":
        return bool(case.expect_delegated) == delegated
    op = subject.removeprefix("op:")
    if (op in case.expect_delegated) == delegated:
        return True
    return None if delegated and op not in edge_ops() else False


def case_edge_ops(case: Case) -> set[str]:
    """The ops of the case's edge graph as the ENN partitioner sees it."""
    from hil.lower.enn_partition import case_program, edge_ops

    return edge_ops(case_program(case))


def coverage(path: Path, cases: Sequence[Case], reference: dict[str, Any] | None = None) -> Report:
    """Compare the catalogue `cases` with the upstream tree at `path` (see the module doc)."""
    reference = reference or load_reference()
    test_dir = find_test_dir(path)
    report = Report(test_dir, tree_version(test_dir))
    defaults = harness_defaults(test_dir)
    claims: dict[str, list[Case]] = {}
    for case in cases:
        tag = upstream_tag(case)
        if tag:
            claims.setdefault(tag[1], []).append(case)
    kinds = ("ops", "models", "unit") if any(t.startswith("unit/") for t in claims) else ("ops", "models")
    first = {t.id: t for t in read_tests(test_dir, kinds, seed=1)}
    second = {t.id: t for t in read_tests(test_dir, kinds, seed=SECOND_SEED)}
    left_out = reference.get("not_covered", {})
    for test in first.values():
        if test.kind != "unit" and test.id not in claims and test.id not in left_out:
            report.gaps.append(f"{test.id}: no case")
    for test_id, reason in left_out.items():
        if test_id in first:
            report.notes.append(f"{test_id}: left out: {reason}")
    recorded = {(r["test"], r["states"], r["delegated"]) for r in
                reference.get("delegation", {}).get(report.version, [])}
    stated: set[tuple[str, str, bool]] = set()
    installed = installed_version("executorch").split("+")[0]
    for test_id, claimants in sorted(claims.items()):
        test = first.get(test_id)
        if test is None:
            version = upstream_tag(claimants[0])[0]
            if newer(version, report.version):
                report.notes.append(f"{test_id}: in ExecuTorch {version}, not in this tree")
            else:
                report.gaps.append(f"{test_id}: the tree has no such test (cases "
                                   f"{', '.join(c.key for c in claimants)})")
            continue
        for case in claimants:
            report.compared += 1
            report.differences += [f"{case.key}: {d}" for d in _compare(case, test, second[test_id], defaults,
                                                                         report, installed, stated)]
    for test_id, subject, delegated in sorted(recorded - stated):
        if test_id not in first:
            continue  # a test the tree lacks is a gap already
        report.differences.append(f"{test_id}: recorded for {report.version} that "
                                  f"{_said(subject, delegated)}; the tree no longer states it")
    if report.version != installed:
        for test_id, subject, delegated in sorted(stated - recorded):
            report.differences.append(
                f"{test_id}: upstream {report.version} states that {_said(subject, delegated)}; the "
                f"installed ExecuTorch {installed}'s partitioner does not: record it in "
                f"{REFERENCE_FILE.name} (delegation)")
    return report


def _said(subject: str, delegated: bool) -> str:
    if subject == "delegate":
        return "the program has a delegate" if delegated else "the program has no delegate"
    return f"{subject.removeprefix('op:')} {'ends in' if delegated else 'stays outside'} the delegate"


def _compare(case: Case, test: UpstreamTest, again: UpstreamTest, defaults: tuple[float, float],
             report: Report, installed: str, stated: set[tuple[str, str, bool]]) -> list[str]:
    """The differences of one case from its test; collects the test's delegation statements
    the installed derivation does not satisfy into `stated` (when the tree is another version)."""
    if test.kind == "models" and not test.lowerings and not test.error:  # read, not run
        want = "a8w8" if "a8w8" in test.id else "fp32"
        if case.precision != want:
            return []
        return [t for t in [_tolerance(case, test.atol, test.rtol, defaults)] if t]
    if test.error or not test.lowerings:
        return [f"cannot read {test.id}: {test.error or 'it builds no SamsungTester'}"]
    found = compare_case(case, test.lowerings[0], again.lowerings[0], defaults)
    if test.lowerings[0].quantized != (case.precision == "a8w8") or case.skip:
        return found  # hil's A8W8 variant of an fp32 test: upstream states nothing about it
    edge_ops = functools.cache(lambda: case_edge_ops(case))
    for statement in test.lowerings[0].delegation():
        if satisfied(statement, case, edge_ops) is not False:
            continue
        if report.version == installed:
            found.append(f"upstream states that {_said(*statement)}; the derived delegation "
                         f"{list(case.expect_delegated)} does not")
        else:
            stated.add((test.id, *statement))
    return found
