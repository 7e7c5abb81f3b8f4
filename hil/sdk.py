"""LITECORE (Exynos AI LiteCore SDK) discovery, and a check that the ENN wrapper works.

Lowering for the NPU (flow `enn`) needs ExecuTorch's two pybind modules built against
LITECORE (`backends/samsung/build.sh --build x86_64`): `PyEnnWrapperAdaptor` (imported by
`partition/enn_partitioner.py` and `enn_preprocess.py`) and `PyGraphWrapperAdaptor`
(`serialization/enn_graph_schema.py`). They load the SDK's libraries
(`lib/x86_64-linux/libgraph_wrapper.so`, ...) through the dynamic loader, which reads
`LD_LIBRARY_PATH` once, when a process starts: `find_spec` finding the modules proves
nothing. So `check_wrapper()` imports both for real in a fresh Python with the SDK's library
folder on `LD_LIBRARY_PATH`, and hil's lowering gets the same library path
(`export_library_path()`, `hil.lower.pool`). Neither the SDK nor the wrapper exists on hil's
development machines: the tests use a FAKE of both.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from hil.errors import UsageError

SDK_ENV = "EXYNOS_AI_LITECORE_ROOT"
LIBRARY_DIR = "lib/x86_64-linux"
"""The SDK's host libraries, relative to its root (x86_64 Linux only)."""
REQUIRED_FILES = (
    "include/graphgen_c.h",
    "include/graphgen_common.h",
    "include/graph_wrapper_api.h",
    "include/common-types.h",
    f"{LIBRARY_DIR}/libgraphgen_api.so",
    f"{LIBRARY_DIR}/libgraph_wrapper.so",
)
"""What ExecuTorch's Samsung build expects under the SDK root (`graph_wrapper_api.h`
includes `common-types.h`)."""

WRAPPER_MODULES = (
    "executorch.backends.samsung.python.PyEnnWrapperAdaptor",
    "executorch.backends.samsung.python.PyGraphWrapperAdaptor",
)
"""Both modules the ENN flow imports."""
ADAPTOR_MODULE = WRAPPER_MODULES[0]

_STARTUP_LIBRARY_PATH = os.environ.get("LD_LIBRARY_PATH", "")
"""LD_LIBRARY_PATH as this process started with it: what its own loader searches."""

_PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        print(json.dumps({"module": name, "error": f"{type(exc).__name__}: {exc}"}))
        sys.exit(1)
print(json.dumps({"module": "", "error": ""}))
"""
"""Run as `python -c _PROBE MODULE...`: imports each module, reports the first failure."""
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Litecore:
    """A LITECORE installation."""

    root: Path
    missing: tuple[str, ...]
    """Required files absent from `root` (empty when complete)."""

    @property
    def library_dir(self) -> Path:
        """The folder that must be on LD_LIBRARY_PATH."""
        return self.root / LIBRARY_DIR


def find_litecore() -> Litecore | None:
    """The SDK named by EXYNOS_AI_LITECORE_ROOT, or None when the variable is unset."""
    value = os.environ.get(SDK_ENV)
    if not value:
        return None
    root = Path(value)
    return Litecore(root, tuple(f for f in REQUIRED_FILES if not (root / f).is_file()))


def library_path(sdk: Litecore, current: str | None = None) -> str:
    """LD_LIBRARY_PATH with the SDK's library folder first (`current` defaults to the
    environment's)."""
    current = os.environ.get("LD_LIBRARY_PATH", "") if current is None else current
    paths = [p for p in current.split(":") if p and p != str(sdk.library_dir)]
    return ":".join([str(sdk.library_dir), *paths])


@dataclass(frozen=True)
class WrapperCheck:
    """The outcome of importing the ENN wrapper modules for real."""

    ok: bool
    error: str = ""
    """The exact error (`ImportError: libgraph_wrapper.so: cannot open ...`); empty when ok."""
    module: str = ""
    """The module that failed to import, or empty."""
    library_path: str = ""
    """The LD_LIBRARY_PATH the import was tried with."""
    fixes: tuple[str, ...] = field(default_factory=tuple)
    """What to do, in order, when not ok."""


_cache: dict[tuple[str, ...], WrapperCheck] = {}
_cache_lock = threading.Lock()


def check_wrapper(python: str | None = None) -> WrapperCheck:
    """Import both wrapper modules in a fresh `python` (default: this interpreter) with the
    SDK's library folder on LD_LIBRARY_PATH. Cached per SDK root, library and Python path."""
    python = python or sys.executable
    sdk = find_litecore()
    if sdk is None:
        return WrapperCheck(False, f"{SDK_ENV} is not set", fixes=(
            "install LITECORE 1.1.0: scripts/install-litecore.sh --dest DIR --sha256 HEX --tarball "
            "ai-litecore-ubuntu2204-v1.1.0.tar.gz (or a folder unpacked with "
            "--strip-components=1: scripts/install-litecore.sh --verify DIR)",
            f"export {SDK_ENV}=DIR",
        ))
    if sdk.missing:
        return WrapperCheck(False, f"LITECORE SDK at {sdk.root} is incomplete: missing "
                            f"{sdk.missing[0]}", fixes=(
            "reinstall LITECORE 1.1.0 with scripts/install-litecore.sh (it checks the layout)",
        ))
    env = dict(os.environ, LD_LIBRARY_PATH=library_path(sdk))
    key = (python, str(sdk.root), env["LD_LIBRARY_PATH"], env.get("PYTHONPATH", ""))
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    try:
        done = subprocess.run([python, "-c", _PROBE, *WRAPPER_MODULES], env=env,
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
        lines = done.stdout.strip().splitlines()
        report = json.loads(lines[-1]) if lines else None
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        done, report = None, {"module": "", "error": f"the import probe did not run: {exc}"}
    if done is not None and done.returncode == 0 and report == {"module": "", "error": ""}:
        result = WrapperCheck(True, library_path=env["LD_LIBRARY_PATH"])
    else:
        if not isinstance(report, dict) or not report.get("error"):
            assert done is not None
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            report = {"module": "", "error": f"the import crashed (exit {done.returncode}): {tail}"}
        error = str(report["error"])
        result = WrapperCheck(False, error, str(report.get("module", "")), env["LD_LIBRARY_PATH"],
                              _fixes(sdk, error))
    with _cache_lock:
        _cache[key] = result
    return result


def _wrapper_folder() -> str:
    """Where the exynos image puts the built modules: the installed ExecuTorch's
    `backends/samsung/python/`."""
    try:
        spec = importlib.util.find_spec("executorch.backends")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return "SITE-PACKAGES/executorch/backends/samsung/python/"
    return f"{next(iter(spec.submodule_search_locations))}/samsung/python/"


def _fixes(sdk: Litecore, error: str) -> tuple[str, ...]:
    """Fix hints for an import error of the wrapper (flags as scripts/build-enn.sh takes them)."""
    build = (f"build the wrapper against this SDK: scripts/build-enn.sh --sdk {sdk.root} "
             "--build x86_64 --out OUT (it clones ExecuTorch v1.5.1 into --work DIR, "
             "default ./executorch, or copies --src CHECKOUT; --python PY: the Python with "
             "torch and executorch)")
    install = (f"install the built modules where Python finds them: cp OUT/python/Py*.so "
               f"{_wrapper_folder()} (what the exynos image does), or put the built checkout "
               "first on the path: export PYTHONPATH=CHECKOUT/.. (upstream CI's way)")
    if any(f"{name}_" in error for name in ("GLIBC", "GLIBCXX", "CXXABI")) and "not found" in error:
        return ("the SDK's libraries were built for a newer system than this one: the Ubuntu 24.04 "
                "build (ai-litecore-ubuntu2404-*, glibc 2.39) loads only there; on Debian 12 (the "
                "exynos image) and Ubuntu 22.04 install the Ubuntu 22.04 build, "
                "ai-litecore-ubuntu2204-v1.1.0.tar.gz, with scripts/install-litecore.sh",
                f"then {build}")
    if "cannot open shared object file" in error:
        library = error.split(":")[1].strip() if error.count(":") >= 2 else "a library"
        return (f"{library} is not in {sdk.library_dir} (it was on LD_LIBRARY_PATH): the SDK "
                "is incomplete or not 1.1.0; reinstall it with scripts/install-litecore.sh",
                f"the wrapper may have been built against another SDK: {build}")
    if "undefined symbol" in error or "incompatible" in error.lower():
        return (f"the wrapper does not match this SDK, torch or executorch: {build}", install)
    if error.startswith("ModuleNotFoundError: No module named 'executorch'"):
        return ("ExecuTorch is not installed for this Python: pip install executorch==1.5.1",)
    if error.startswith("ModuleNotFoundError"):
        return (build, install,
                f"your own Python needs the library path too: export "
                f"LD_LIBRARY_PATH={sdk.library_dir}:$LD_LIBRARY_PATH (hil sets it for its "
                "lowering)")
    return (build, install)


def enn_adaptor_available() -> bool:
    """True when both ENN wrapper modules import for real with the SDK's libraries."""
    return check_wrapper().ok


def require_enn_adaptor() -> None:
    """Raise a one-line UsageError (the exact error and the first fix) unless flow `enn`
    can lower here."""
    check = check_wrapper()
    if check.ok:
        return
    sdk = find_litecore()
    if sdk is None:
        raise UsageError(
            f"LITECORE SDK not found: set {SDK_ENV} to the Exynos AI LiteCore 1.1.0 root and "
            "build ExecuTorch's Samsung wrapper (scripts/build-enn.sh --sdk ROOT --build x86_64 "
            "--out OUT), or use --flow xnnpack; `hil doctor` says more"
        )
    if sdk.missing:
        raise UsageError(check.error)
    with_path = f" (LD_LIBRARY_PATH={check.library_path})" if check.library_path else ""
    raise UsageError(
        f"LITECORE SDK at {sdk.root}, but the ENN wrapper does not import{with_path}: "
        f"{check.error}; fix: {check.fixes[0]}; `hil doctor` lists every fix"
    )


def enn_problem() -> str | None:
    """Why flow `enn` cannot lower here (`require_enn_adaptor`'s one line), or None."""
    try:
        require_enn_adaptor()
    except UsageError as exc:
        return str(exc)
    return None


def library_path_missing(sdk: Litecore) -> bool:
    """True when this process's loader cannot see the SDK's libraries (its LD_LIBRARY_PATH
    at start did not name them): the wrapper must then be imported in a child process."""
    return str(sdk.library_dir) not in _STARTUP_LIBRARY_PATH.split(":")


def export_library_path(sdk: Litecore) -> None:
    """Put the SDK's library folder on LD_LIBRARY_PATH for every child started from now on
    (the lowering workers)."""
    os.environ["LD_LIBRARY_PATH"] = library_path(sdk)
