"""The built-in `smoke` suite: a handful of fp32 ops and one small multi-op model.

Small enough to lower and run in seconds, broad enough to exercise every stage. Its modules
are named (`ModuleRef`), not imported: loading the suite imports no torch, so a run whose
cases are all in the artifact cache never imports it (about 4 s of CPU a `hil run`).
"""

from __future__ import annotations

import functools
from typing import Any

from hil.cases.case import Case, InputSpec, ModuleRef, definition_site
from hil.verdict import Tolerance

_MODULES = "hil.cases.smoke_modules"


def _seeded(module: ModuleRef, *args: object, **kwargs: object) -> Any:
    """Build a module with weights from a fixed seed, so every run tests the same numbers."""
    import torch

    torch.manual_seed(0)
    return module.resolve()(*args, **kwargs).eval()


def _case(
    case_id: str,
    factory: functools.partial[Any],
    *shapes: tuple[int, ...],
    expect: tuple[str, ...] = (),
    tolerance: Tolerance | None = None,
) -> Case:
    file, line = definition_site()
    return Case(
        id=case_id,
        suite="smoke",
        factory=factory,
        inputs=tuple(InputSpec(shape) for shape in shapes),
        tolerance=tolerance or Tolerance(atol=1e-4, rtol=1e-4),
        expect_delegated=expect,
        file=file,
        line=line,
    )


def cases() -> list[Case]:
    """The smoke suite (fp32 only)."""
    return [
        _case(
            "conv2d_3x3",
            functools.partial(_seeded, ModuleRef("torch.nn", "Conv2d"), 3, 8, 3, padding=1),
            (1, 3, 16, 16),
            expect=("convolution",),
        ),
        _case(
            "linear",
            functools.partial(_seeded, ModuleRef("torch.nn", "Linear"), 32, 16),
            (4, 32),
            expect=("linear",),
        ),
        _case("add", functools.partial(_seeded, ModuleRef(_MODULES, "Add")), (1, 8, 8), (1, 8, 8),
              expect=("add",)),
        _case("softmax", functools.partial(_seeded, ModuleRef(_MODULES, "Softmax")), (2, 10),
              expect=("softmax",)),
        _case(
            "max_pool2d",
            functools.partial(_seeded, ModuleRef("torch.nn", "MaxPool2d"), 2, 2),
            (1, 4, 8, 8),
            expect=("max_pool2d",),
        ),
        _case(
            "avg_pool2d",
            functools.partial(_seeded, ModuleRef("torch.nn", "AvgPool2d"), 2, 2),
            (1, 4, 8, 8),
            expect=("avg_pool2d",),
        ),
        _case(
            "tiny_cnn",
            functools.partial(_seeded, ModuleRef(_MODULES, "TinyCnn")),
            (1, 3, 32, 32),
            expect=("convolution", "linear"),
        ),
    ]
