"""Every ops case that names an upstream test (`upstream:FILE::TEST`) has that test's module
configuration and input shapes, read from the executorch 1.5.1 wheel.

The upstream test files import the SDK-dependent tester (and torchaudio) at the top, so
they are not imported: their `torch.nn.Module` classes are executed from the file's source,
then the test method's statements up to its `self._test(...)` call, which gives the module
and the inputs upstream would lower. Both modules are exported; the graphs must have the
same ops with the same non-tensor arguments (strides, dims, sizes, dtypes), and the inputs
the same shapes and dtypes (values differ: upstream draws `randn`, hil seeded ranges)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
import torch

from hil.cases import load_suite
from hil.lower.build import case_samples, input_leaves

pytestmark = pytest.mark.slow  # exports ~80 modules twice: ~15 s

UPSTREAM = Path(torch.__file__).parents[1] / "executorch" / "backends" / "samsung" / "test" / "ops"

CASES = [c for c in load_suite("ops") if c.precision == "fp32"
         and any(t.startswith("upstream:") for t in c.tags)]


def _upstream(tag: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The module and inputs of upstream test `FILE::TEST`."""
    file, test = tag.removeprefix("upstream:").split("::")
    tree = ast.parse((UPSTREAM / file).read_text(encoding="utf-8"))
    namespace: dict = {"torch": torch, "List": typing.List, "Tuple": typing.Tuple}  # noqa: UP006
    modules = [node for node in tree.body if isinstance(node, ast.ClassDef)
               and not any(getattr(base, "attr", "") == "TestCase" for base in node.bases)]
    exec(compile(ast.Module(body=modules, type_ignores=[]), file, "exec"), namespace)  # noqa: S102
    method = next(node for cls in tree.body if isinstance(cls, ast.ClassDef)
                  for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == test)
    torch.manual_seed(0)
    for statement in method.body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "attr", "").startswith("_test"):
            args = [eval(compile(ast.Expression(arg), file, "eval"), namespace) for arg in call.args]  # noqa: S307
            module = args[0]
            inputs = args[1] if len(args) > 1 and isinstance(args[1], tuple) else module.get_example_inputs()
            return module.eval(), inputs
        exec(compile(ast.Module(body=[statement], type_ignores=[]), file, "exec"), namespace)  # noqa: S102
    raise AssertionError(f"{file}::{test} calls no self._test")


def _signature(module: torch.nn.Module, inputs: tuple) -> list[tuple[str, tuple]]:
    """(op, non-tensor arguments) of every call in the exported graph."""

    def plain(value: object) -> object:
        if isinstance(value, torch.fx.Node):
            return "tensor"
        if isinstance(value, (list, tuple)):
            return tuple(plain(v) for v in value)
        return value

    graph = torch.export.export(module, inputs).graph
    return [(str(node.target), plain(node.args), tuple(sorted((k, plain(v)) for k, v in node.kwargs.items())))
            for node in graph.nodes if node.op == "call_function"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_upstream_module_and_shapes(case) -> None:
    (tag,) = [t for t in case.tags if t.startswith("upstream:")]
    module, inputs = _upstream(tag)
    ours = case_samples(case).inputs
    assert [(tuple(t.shape), t.dtype) for t in input_leaves(ours)] == [
        (tuple(t.shape), t.dtype) for t in input_leaves(tuple(inputs))]
    torch.manual_seed(case.seed)
    assert _signature(case.factory().eval(), ours) == _signature(module, tuple(inputs))


SAME_AS_ANOTHER = {"test_max_pool2d.py::test_fp32_max_pool2d_with_stride"}
"""Upstream tests with no case of their own: `with_stride` passes stride=1, the default, so it
is `test_fp32_max_pool2d` again."""


def test_every_upstream_fp32_op_test_has_a_case() -> None:
    claimed = {t.removeprefix("upstream:") for c in CASES for t in c.tags if t.startswith("upstream:")}
    tests = {f"{path.name}::{node.name}" for path in UPSTREAM.glob("test_*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.FunctionDef) and node.name.startswith("test_fp32")}
    assert claimed <= tests
    assert sorted(tests - claimed) == sorted(SAME_AS_ANOTHER)
