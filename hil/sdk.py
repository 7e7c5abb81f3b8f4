"""LITECORE (Exynos AI LiteCore SDK) discovery and validation.

Lowering for the NPU (flow `enn`) needs ExecuTorch's `PyEnnWrapperAdaptor`, a pybind module
built from ExecuTorch source against LITECORE (`backends/samsung/build.sh --build x86_64`).
Neither exists on hil's development machines: this module finds them where they are
installed and says plainly when they are not.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from hil.errors import UsageError

SDK_ENV = "EXYNOS_AI_LITECORE_ROOT"
REQUIRED_FILES = (
    "include/graphgen_c.h",
    "include/graphgen_common.h",
    "include/graph_wrapper_api.h",
    "lib/x86_64-linux/libgraphgen_api.so",
    "lib/x86_64-linux/libgraph_wrapper.so",
)
"""What ExecuTorch's Samsung build expects under the SDK root."""

ADAPTOR_MODULE = "executorch.backends.samsung.python.PyEnnWrapperAdaptor"


@dataclass(frozen=True)
class Litecore:
    """A LITECORE installation."""

    root: Path
    missing: tuple[str, ...]
    """Required files absent from `root` (empty when complete)."""


def find_litecore() -> Litecore | None:
    """The SDK named by EXYNOS_AI_LITECORE_ROOT, or None when the variable is unset."""
    value = os.environ.get(SDK_ENV)
    if not value:
        return None
    root = Path(value)
    return Litecore(root, tuple(f for f in REQUIRED_FILES if not (root / f).is_file()))


def enn_adaptor_available() -> bool:
    """True when ExecuTorch's SDK-built ENN wrapper can be imported."""
    try:
        return importlib.util.find_spec(ADAPTOR_MODULE) is not None
    except ModuleNotFoundError:
        return False


def require_enn_adaptor() -> None:
    """Raise a one-line UsageError unless flow `enn` can lower here."""
    if enn_adaptor_available():
        return
    sdk = find_litecore()
    if sdk is None:
        raise UsageError(
            f"LITECORE SDK not found: set {SDK_ENV} to the Exynos AI LiteCore 1.1.0 root and "
            "build ExecuTorch's Samsung wrapper (backends/samsung/build.sh --build x86_64), "
            "or use --flow xnnpack"
        )
    if sdk.missing:
        raise UsageError(f"LITECORE SDK at {sdk.root} is incomplete: missing {sdk.missing[0]}")
    raise UsageError(
        f"LITECORE SDK found at {sdk.root}, but {ADAPTOR_MODULE} is not built: run "
        "backends/samsung/build.sh --sdk $EXYNOS_AI_LITECORE_ROOT --build x86_64"
    )
