"""Import ExecuTorch's host runtime (`executorch.runtime`) without the exporter.

Upstream's `executorch/extension/pybindings/portable_lib.py` (the runtime's Python face)
imports `executorch.exir._warnings` for one warning class, and Python runs
`executorch/exir/__init__.py` first: the whole exporter (passes, capture, emit), 8-9 s of CPU
here against 3 s for `torch`, which the runtime does need (it loads libtorch.so). The virtual
board never lowers, so it imports the runtime with `executorch.exir` standing as a bare
package during that import only: `_warnings.py` itself (the real file) is executed, nothing
else of `exir`. Both entries leave `sys.modules` afterwards, so a later `import
executorch.exir` in the same process runs the real package. The runtime is the same C++
extension (`_C`) either way.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

_EXIR = "executorch.exir"
_WARNINGS = "executorch.exir._warnings"


def import_runtime() -> Any:
    """`executorch.runtime.Runtime`, imported without running `executorch/exir/__init__.py`
    when neither is imported yet; ImportError when the runtime is missing."""
    if "executorch.runtime" in sys.modules or _EXIR in sys.modules:
        from executorch.runtime import Runtime

        return Runtime
    import torch  # noqa: F401  (portable_lib's own first step: libtorch.so for _C)

    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("executorch is not installed")
    exir_dir = f"{list(spec.submodule_search_locations)[0]}/exir"
    bare = types.ModuleType(_EXIR)
    bare.__path__ = [exir_dir]
    warnings_spec = importlib.util.spec_from_file_location(_WARNINGS, f"{exir_dir}/_warnings.py")
    if warnings_spec is None or warnings_spec.loader is None:
        raise ImportError(f"{exir_dir}/_warnings.py is missing")
    warnings = importlib.util.module_from_spec(warnings_spec)
    sys.modules[_EXIR] = bare
    sys.modules[_WARNINGS] = warnings
    try:
        warnings_spec.loader.exec_module(warnings)
        from executorch.runtime import Runtime
    finally:
        del sys.modules[_WARNINGS]
        del sys.modules[_EXIR]
    return Runtime
