"""What to test: the `Case` record and its input specification."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hil.expectation import Expectation
from hil.verdict import Tolerance

if TYPE_CHECKING:
    import torch

    from hil.cases.datasets import Dataset
    from hil.checkers import CheckerSpec

PRECISIONS = ("fp32", "a8w8")
"""Every precision a case can be lowered at."""

INPUT_DTYPES = ("float32", "float16", "int64", "int32", "int8", "uint8", "bool")
"""Input dtypes a case (or a manifest) may declare."""

REPO_ROOT = Path(__file__).resolve().parents[2]

A8W8_RULE = Tolerance(atol=1e-3, rtol=0.0, min_sqnr_db=30.0)
A8W8_RULE_STEPS = 2.0
"""The ops suite's A8W8 rule, also a manifest case's default at A8W8: atol = 1e-3 + 2
quantization steps of the output, SQNR >= 30 dB against the quantized model run on the host.
The int8 kernels and the host's quantize/dequantize simulation round differently by up to a
step, and a requantizing op can add one more."""


@dataclass(frozen=True)
class ModuleRef:
    """A class or function named by its module and name, imported when it is used: a suite
    that names its torch modules so can be loaded (and its cases' cache keys computed)
    without importing torch. The artifact cache's key describes it by these names and, for
    hil's own modules, the module file's digest (hil/lower/cache.py)."""

    module: str
    """Where `name` is defined (not a module that imports it: the key hashes this file)."""
    name: str

    def resolve(self) -> Any:
        """The named object (imports its module)."""
        return getattr(importlib.import_module(self.module), self.name)


@dataclass(frozen=True)
class InputSpec:
    """One model input, generated from a seeded generator."""

    shape: tuple[int, ...]
    """Tensor shape."""
    dtype: str = "float32"
    """One of INPUT_DTYPES."""
    low: float = -1.0
    """Lower bound of the uniform distribution (integers: inclusive)."""
    high: float = 1.0
    """Upper bound (integers: exclusive)."""


@dataclass(frozen=True)
class Case:
    """One model at one precision, to lower, run on a board and compare with the host."""

    id: str
    """Unique within its suite and precision; starts with the op or model name."""
    suite: str
    """Name of the suite the case belongs to (`smoke`, `ops`, a manifest's name)."""
    factory: Callable[[], Any]
    """Builds the `torch.nn.Module` (in eval mode or not: lowering calls `.eval()`)."""
    inputs: tuple[InputSpec, ...]
    """The forward method's positional inputs."""
    precision: str = "fp32"
    """`fp32` or `a8w8`."""
    tolerance: Tolerance = field(default_factory=Tolerance)
    """How close board outputs must be to the host reference."""
    expect_delegated: tuple[str, ...] = ()
    """Ops (aten names without namespace, e.g. `convolution`) that must end in a delegate on
    NPU flows; recorded, not required, on host flows."""
    seed: int = 0
    """Seed of the input (and calibration) generator."""
    tags: tuple[str, ...] = ()
    """Free-form labels for filtering and reports."""
    file: str = ""
    """Repo-relative (or manifest) file that defines the case."""
    line: int = 0
    """Line of the definition in `file`."""
    input_fn: Callable[[int], tuple[torch.Tensor, ...]] | None = None
    """Builds the forward inputs from a seed (a user's `pkg.mod:fn`); when set, `inputs` only
    describes them. Must be picklable (a module-level function or a partial of one)."""
    dataset: Dataset | None = None
    """Evaluation samples (and their targets) for the checker; when set, the forward inputs
    are the dataset's batch and calibration uses its other samples."""
    checker: CheckerSpec | None = None
    """Quantization checker run on the board's outputs against the fp32 model's."""
    calibration: Callable[[], list[tuple[torch.Tensor, ...]]] | None = None
    """A8W8 calibration samples given by the suite; default: seeded samples of the inputs."""
    atol_scale_steps: float = 0.0
    """A8W8: output quantization steps added to `tolerance.atol` (atol = atol + k x scale of
    the output's quantize node after convert_pt2e); 0 for fp32."""
    require_delegation: bool = False
    """On NPU flows, an expected op left outside the delegate fails the case (FAIL_LOWER)
    instead of passing as PASS_UNDELEGATED."""
    prefetch: Callable[[], None] | None = None
    """Fetches what the factory needs before any lowering (published weights for
    `--pretrained`); raises UsageError with one line when it cannot."""
    expect: Expectation | None = None
    """A known failure: ending in it is XFAIL, passing is XPASS (hil.expectation)."""
    skip: str = ""
    """Non-empty: the case is not lowered nor run (SKIP with this reason)."""
    tolerance_rule: str = ""
    """Where the tolerance comes from when the case did not give it (e.g. a manifest's
    default A8W8 rule); prefixed to the `atol_rule` of its outputs."""
    qat: Callable[[torch.fx.GraphModule], None] | None = None
    """A8W8 by quantization-aware training instead of calibration: called with the prepared
    (fake-quantized) model, which it trains in place; the converted model is then lowered.
    Must be picklable (a module-level function or a partial of one)."""

    @property
    def classname(self) -> str:
        """The JUnit classname: `suite.precision`."""
        return f"{self.suite}.{self.precision}"

    @property
    def key(self) -> str:
        """`suite.precision.id`, unique within a run."""
        return f"{self.classname}.{self.id}"


def definition_site(depth: int = 2) -> tuple[str, int]:
    """The (repo-relative file, line) of the caller `depth` frames up, for JUnit locations."""
    frame = inspect.stack()[depth]
    path = Path(frame.filename).resolve()
    try:
        shown = path.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        shown = path.as_posix()
    return shown, frame.lineno
