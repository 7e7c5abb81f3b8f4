"""Reading an ExecuTorch Samsung test tree (`backends/samsung/test/` of a checkout or of the
installed wheel): its version, its op and model tests, and what each op test lowers.

An op test is executed, not imported: its file imports the SDK-dependent tester and
compile-spec helpers, so the file's statements run without those imports, with a recording
`SamsungTester` in their place. Each `SamsungTester(module, inputs, ...)` the test builds is
recorded with what the test then asks of it: `quantize()` (an A8W8 test), the checks made
after `to_edge_transform_and_lower()` (its delegation expectations) and the atol/rtol of
`run_method_and_compare_outputs`. A unit test that exports instead (`unit/test_mul.py`)
records its first `torch.export.export(module, inputs)`. `self.subTest(k=v)` names the
records of each subtest (`TEST[k=v]`). Model tests build their models through packages hil
does not install (examples' model zoo, transformers, ultralytics): they are read, not run —
their names and the tolerances written in them.

This runs the test file's code: point it at a checkout you trust (your own clone of
ExecuTorch), as running upstream's tests would.
"""

from __future__ import annotations

import ast
import contextlib
import re
import typing
import unittest
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

TEST_DIR = Path("backends") / "samsung" / "test"
"""Where the Samsung tests live in a checkout (and, under `executorch/`, in the wheel)."""
KINDS = ("ops", "models")
"""The folders whose tests the catalogue must cover (`unit/` tests only when a case names one)."""
DELEGATE = "torch.ops.higher_order.executorch_call_delegate"
EDGE_OP = "executorch_exir_dialects_edge__ops_aten_"
_RUNNABLE_IMPORTS = ("unittest", "typing", "torch", "numpy", "math", "operator")
"""Modules an executed test file may import for real; `executorch.*` names are replaced."""


@dataclass
class Lowering:
    """One `SamsungTester` (or export) an upstream test builds, and what it asks of it."""

    module: Any
    inputs: tuple[Any, ...]
    subtest: str = ""
    """`k=v` of the enclosing `self.subTest(...)`, empty outside one."""
    quantized: bool = False
    """The test calls `quantize()`: upstream's A8W8 (PTQ with EnnQuantizer)."""
    checks: list[tuple[str, str, tuple[Any, ...]]] = field(default_factory=list)
    """(stage, kind, names) of every check: stage `export` or `lowered`; kind `present`,
    `absent` or `count` (names then (name, count) pairs)."""
    compared: bool = False
    """The test compares outputs (`run_method_and_compare_outputs`)."""
    atol: float | None = None
    rtol: float | None = None
    """Given explicitly to the comparison; None: the harness's default."""

    def delegation(self) -> list[tuple[str, bool]]:
        """What the checks after lowering state: (`delegate`, whether there is one) and
        (`op:NAME`, whether NAME ends in the delegate)."""
        stated: list[tuple[str, bool]] = []
        for stage, kind, names in self.checks:
            if stage != "lowered":
                continue
            for item in names:
                name, count = item if kind == "count" else (item, None)
                present = kind == "present" or (kind == "count" and count > 0)
                if name == DELEGATE:
                    stated.append(("delegate", present))
                elif name.startswith(EDGE_OP):
                    op = name.removeprefix(EDGE_OP).rsplit("_", 1)[0]
                    stated.append((f"op:{op}", not present))
        return stated


@dataclass
class UpstreamTest:
    """One upstream test (a subtest counts as a test): `PATH::NAME` or `PATH::NAME[k=v]`."""

    id: str
    kind: str
    """`ops`, `models` or `unit`."""
    lowerings: list[Lowering] = field(default_factory=list)
    """What running it recorded (op and unit tests); empty for a model test."""
    atol: float | None = None
    rtol: float | None = None
    """A model test's tolerances as written in its source."""
    error: str = ""
    """Why the test could not be run, if it could not."""


def find_test_dir(path: Path) -> Path:
    """The Samsung test folder of `path`: a checkout, a site-packages folder, the executorch
    package folder, or the test folder itself; ValueError naming `path` when none."""
    for candidate in (path / TEST_DIR, path / "executorch" / TEST_DIR, path.parent / TEST_DIR, path):
        if (candidate / "ops").is_dir():
            return candidate
    raise ValueError(f"{path}: no {TEST_DIR.as_posix()}/ops folder (not an ExecuTorch checkout or wheel)")


def tree_version(test_dir: Path) -> str:
    """The ExecuTorch version the tree is: a wheel's `executorch/version.py` or a checkout's
    `version.txt` when it names a release (`1.5.1`), else `main` (a checkout of a branch, whose
    version names the next release as `1.6.0a0`)."""
    root = test_dir.parents[2]
    text = ""
    if (root / "version.py").is_file():
        found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", (root / "version.py").read_text())
        text = found.group(1) if found else ""
    elif (root / "version.txt").is_file():
        text = (root / "version.txt").read_text().strip()
    release = re.fullmatch(r"(\d+\.\d+\.\d+)(\+\w+)?", text)
    return release.group(1) if release else "main"


def harness_defaults(test_dir: Path) -> tuple[float, float]:
    """The default atol and rtol of `run_method_and_compare_outputs` in the tree's test
    harness (`backends/test/harness/tester.py`); (1e-3, 1e-3) when the tree has none."""
    tester = test_dir.parents[1] / "test" / "harness" / "tester.py"
    if tester.is_file():
        for node in ast.walk(ast.parse(tester.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "run_method_and_compare_outputs":
                names = [a.arg for a in node.args.args][-len(node.args.defaults):]
                values = {n: d.value for n, d in zip(names, node.args.defaults, strict=True)
                          if isinstance(d, ast.Constant)}
                return float(values.get("atol", 1e-3)), float(values.get("rtol", 1e-3))
    return 1e-3, 1e-3


def test_files(test_dir: Path, kinds: tuple[str, ...] = KINDS) -> list[Path]:
    """The `test_*.py` files of the tree's `kinds` folders, sorted."""
    return sorted(p for kind in kinds for p in (test_dir / kind).glob("test_*.py"))


def _test_methods(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    """(class name, method) of every `test_*` method of a TestCase class."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
                getattr(base, "attr", getattr(base, "id", "")) == "TestCase" for base in node.bases):
            found += [(node.name, item) for item in node.body
                      if isinstance(item, ast.FunctionDef) and item.name.startswith("test_")]
    return found


def _compare_keywords(method: ast.FunctionDef) -> tuple[float | None, float | None]:
    """atol and rtol written in the method's `run_method_and_compare_outputs(...)` call."""
    for node in ast.walk(method):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "run_method_and_compare_outputs":
            values = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            return values.get("atol"), values.get("rtol")
    return None, None


def _runnable(tree: ast.Module, kind: str) -> bool:
    """Whether the reader can run the file: its imports are ones it runs for real or replaces
    (any `executorch` name in an op or unit test; in a model test only the tester's and the
    compile spec's, as a model built through the examples' zoo cannot be had here)."""
    replaceable = (("executorch.",) if kind != "models" else
                   ("executorch.backends.samsung.test.", "executorch.backends.samsung.serialization."))
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            if not (name.split(".")[0] in _RUNNABLE_IMPORTS or name.startswith(replaceable)):
                return False
    return True


class _Recording:
    """Collects the lowerings of one test run (and the subtest in force)."""

    def __init__(self) -> None:
        self.lowerings: list[Lowering] = []
        self.subtest = ""

    def tester(self, module: Any, example_inputs: Any, compile_specs: Any = None) -> _Tester:
        lowering = Lowering(module, tuple(example_inputs), self.subtest)
        self.lowerings.append(lowering)
        return _Tester(lowering)

    @contextlib.contextmanager
    def sub_test(self, msg: Any = None, **params: Any) -> Iterator[None]:
        outer = self.subtest
        self.subtest = ",".join(f"{k}={v}" for k, v in params.items())
        try:
            yield
        finally:
            self.subtest = outer


class _Tester:
    """Upstream's `SamsungTester` chain, recorded instead of lowered."""

    def __init__(self, lowering: Lowering) -> None:
        self.lowering = lowering
        self.stage = "init"

    def quantize(self, *args: Any, **kwargs: Any) -> _Tester:
        self.lowering.quantized = True
        return self

    def export(self, *args: Any, **kwargs: Any) -> _Tester:
        self.stage = "export"
        return self

    def to_edge_transform_and_lower(self, *args: Any, **kwargs: Any) -> _Tester:
        self.stage = "lowered"
        return self

    def to_executorch(self, *args: Any, **kwargs: Any) -> _Tester:
        return self

    def check(self, names: list[str]) -> _Tester:
        self.lowering.checks.append((self.stage, "present", tuple(names)))
        return self

    def check_not(self, names: list[str]) -> _Tester:
        self.lowering.checks.append((self.stage, "absent", tuple(names)))
        return self

    def check_count(self, counts: dict[str, int]) -> _Tester:
        self.lowering.checks.append((self.stage, "count", tuple(counts.items())))
        return self

    def run_method_and_compare_outputs(self, stage: Any = None, inputs: Any = None, num_runs: int = 1,
                                       atol: float | None = None, rtol: float | None = None,
                                       **kwargs: Any) -> _Tester:
        self.lowering.compared = True
        self.lowering.atol, self.lowering.rtol = atol, rtol
        if inputs is not None:
            self.lowering.inputs = tuple(inputs)
        return self


class _Exported(Exception):
    """Raised by the recording `torch.export.export`: a unit test is read up to its export."""


def _namespace(tree: ast.Module, recording: _Recording) -> dict[str, Any]:
    """The file's module namespace: its real imports run, `executorch` names replaced."""
    import torch

    namespace: dict[str, Any] = {"__name__": "upstream_test", "torch": torch, "unittest": unittest,
                                 "typing": typing, "List": typing.List, "Tuple": typing.Tuple}  # noqa: UP006
    kept = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("executorch."):
            for alias in node.names:
                namespace[alias.asname or alias.name] = mock.MagicMock(name=alias.name)
        elif isinstance(node, ast.Import) and any(a.name.startswith("executorch.") for a in node.names):
            continue
        else:
            kept.append(node)
    namespace.update(SamsungTester=recording.tester, gen_samsung_backend_compile_spec=lambda *a, **k: None,
                     TestConfig=SimpleNamespace(chipset="E9955"))
    exec(compile(ast.Module(body=kept, type_ignores=[]), "<upstream test>", "exec"), namespace)  # noqa: S102
    return namespace


def _run(tree: ast.Module, cls: str, method: str, seed: int) -> tuple[list[Lowering], str]:
    """The lowerings test `cls.method` records with the global seed `seed`, or why it failed."""
    import torch

    recording = _Recording()

    def export(module: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        recording.lowerings.append(Lowering(module, tuple(inputs), recording.subtest))
        raise _Exported

    try:
        with torch.random.fork_rng(devices=[]), mock.patch.object(torch.export, "export", export):
            torch.manual_seed(seed)
            case = _namespace(tree, recording)[cls](method)
            case.subTest = recording.sub_test
            case.setUp()
            try:
                getattr(case, method)()
            except _Exported:
                pass
            finally:
                case.tearDown()
    except Exception as exc:  # noqa: BLE001 - an upstream test the reader cannot run is reported
        return recording.lowerings, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return recording.lowerings, ""


def read_tests(test_dir: Path, kinds: tuple[str, ...] = KINDS, seed: int = 1) -> list[UpstreamTest]:
    """Every test of the tree's `kinds` folders (a subtest is a test), op and unit tests run
    (with the global seed `seed`) to record their lowerings."""
    found: list[UpstreamTest] = []
    for path in test_files(test_dir, kinds):
        kind = path.parent.name
        tree = ast.parse(path.read_text(encoding="utf-8"))
        runnable = _runnable(tree, kind)
        for cls, method in _test_methods(tree):
            base = f"{kind}/{path.name}::{method.name}"
            if not runnable:
                atol, rtol = _compare_keywords(method)
                found.append(UpstreamTest(base, kind, atol=atol, rtol=rtol,
                                          error="" if kind == "models" else "imports what hil cannot run"))
                continue
            lowerings, error = _run(tree, cls, method.name, seed)
            subtests = list(dict.fromkeys(lowering.subtest for lowering in lowerings))
            for subtest in subtests or [""]:
                found.append(UpstreamTest(
                    f"{base}[{subtest}]" if subtest else base, kind,
                    [lowering for lowering in lowerings if lowering.subtest == subtest], error=error))
    return found
