"""The SDK check imports both ENN wrapper modules for real, in a fresh Python with the SDK's
library folder on LD_LIBRARY_PATH. A FAKE SDK and a FAKE wrapper (tests/container/
fake_litecore.py) stand in for LITECORE: the fake modules load the SDK's (real, minimal)
shared libraries by bare name, so they import only where the loader was started with that
path, as the pybind modules do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hil import sdk
from hil.errors import UsageError
from tests.container import fake_litecore

REPO = Path(__file__).resolve().parents[1]
ENN = "executorch.backends.samsung.python.PyEnnWrapperAdaptor"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A complete FAKE SDK (EXYNOS_AI_LITECORE_ROOT) and a FAKE built wrapper first on
    PYTHONPATH; LD_LIBRARY_PATH as an ordinary shell has it (without the SDK)."""
    root = fake_litecore.make_sdk(tmp_path / "sdk")
    tree = fake_litecore.make_wrapper(tmp_path / "checkout")
    monkeypatch.setenv("EXYNOS_AI_LITECORE_ROOT", str(root))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tree), str(REPO)]))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    return {"root": root, "tree": tree}


def _import(module: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                          text=True, env=dict(os.environ, **env), timeout=60)


def test_both_modules_import_only_with_the_sdk_library_path(fake):
    without = _import(ENN)
    assert without.returncode != 0
    assert "ImportError: libgraph_wrapper.so: cannot open shared object file" in without.stderr
    check = sdk.check_wrapper()
    assert check.ok, check
    assert check.library_path.split(":")[0] == str(fake["root"] / "lib" / "x86_64-linux")
    assert sdk.enn_adaptor_available()
    sdk.require_enn_adaptor()  # no error
    # the fix hint for your own Python works: the same import with that library path
    assert _import(ENN, LD_LIBRARY_PATH=check.library_path).returncode == 0


def test_no_sdk_is_not_available_and_says_how_to_install(monkeypatch):
    monkeypatch.delenv("EXYNOS_AI_LITECORE_ROOT", raising=False)
    check = sdk.check_wrapper()
    assert not check.ok and check.error == "EXYNOS_AI_LITECORE_ROOT is not set"
    assert "scripts/install-litecore.sh --dest DIR --sha256 HEX --tarball" in check.fixes[0]
    assert not sdk.enn_adaptor_available()
    with pytest.raises(UsageError, match="^LITECORE SDK not found: set EXYNOS_AI_LITECORE_ROOT"):
        sdk.require_enn_adaptor()


def test_an_sdk_without_common_types_h_is_incomplete(fake):
    (fake["root"] / "include" / "common-types.h").unlink()
    check = sdk.check_wrapper()
    assert not check.ok
    assert check.error.endswith("is incomplete: missing include/common-types.h")
    with pytest.raises(UsageError, match="missing include/common-types.h"):
        sdk.require_enn_adaptor()


def test_a_missing_graph_wrapper_module_is_not_available(fake, tmp_path, monkeypatch):
    """find_spec of PyEnnWrapperAdaptor alone would say yes: both are imported."""
    tree = fake_litecore.make_wrapper(tmp_path / "half", modules=("PyEnnWrapperAdaptor",))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tree), str(REPO)]))
    check = sdk.check_wrapper()
    assert not check.ok
    assert check.module == "executorch.backends.samsung.python.PyGraphWrapperAdaptor"
    assert check.error == ("ModuleNotFoundError: No module named "
                           "'executorch.backends.samsung.python.PyGraphWrapperAdaptor'")
    assert check.fixes[0].startswith(
        f"build the wrapper against this SDK: scripts/build-enn.sh --sdk {fake['root']} "
        "--build x86_64 --out OUT")
    assert "cp OUT/python/Py*.so " in check.fixes[1] and "PYTHONPATH=CHECKOUT/.." in check.fixes[1]
    with pytest.raises(UsageError) as raised:
        sdk.require_enn_adaptor()
    message = str(raised.value)
    assert "\n" not in message
    assert "No module named 'executorch.backends.samsung.python.PyGraphWrapperAdaptor'" in message
    assert "fix: build the wrapper against this SDK: scripts/build-enn.sh --sdk" in message


def test_a_library_the_sdk_lacks_names_it(fake, tmp_path, monkeypatch):
    tree = fake_litecore.make_wrapper(
        tmp_path / "other", libraries={"PyGraphWrapperAdaptor": "libenn_graph_extra.so"})
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tree), str(REPO)]))
    check = sdk.check_wrapper()
    assert not check.ok
    assert check.error == ("ImportError: libenn_graph_extra.so: cannot open shared object file: "
                           "No such file or directory")
    assert check.fixes[0].startswith(
        f"libenn_graph_extra.so is not in {fake['root'] / 'lib' / 'x86_64-linux'}")


def test_no_wrapper_at_all(fake, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    check = sdk.check_wrapper()
    assert not check.ok
    assert check.error.startswith("ModuleNotFoundError: No module named 'executorch.backends.samsung.python")
    # the PYTHONPATH hint works: the built checkout first on the path
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake["tree"]), str(REPO)]))
    assert sdk.check_wrapper().ok


def test_doctor_prints_the_exact_error_and_every_fix(fake, tmp_path):
    tree = fake_litecore.make_wrapper(tmp_path / "half", modules=("PyEnnWrapperAdaptor",))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(REPO)]))
    done = subprocess.run([sys.executable, "-m", "hil", "doctor", "--require", "enn-wrapper"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert done.returncode == 3
    lines = done.stdout.splitlines()
    (line,) = [line for line in lines if "enn-wrapper" in line]
    assert line.startswith("MISSING  enn-wrapper  PyEnnWrapperAdaptor and PyGraphWrapperAdaptor "
                           "do not import (LD_LIBRARY_PATH=")
    assert ("ModuleNotFoundError: No module named "
            "'executorch.backends.samsung.python.PyGraphWrapperAdaptor'") in line
    after = lines[lines.index(line) + 1:]
    assert after[0].split(maxsplit=1)[1].startswith(
        f"build the wrapper against this SDK: scripts/build-enn.sh --sdk {fake['root']} "
        "--build x86_64 --out OUT")
    assert after[1].split(maxsplit=1) == ["then:", after[1].split(maxsplit=1)[1]]
    good = subprocess.run([sys.executable, "-m", "hil", "doctor", "--require", "enn-wrapper,sdk"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert good.returncode == 0, good.stdout
    assert "ok       enn-wrapper  PyEnnWrapperAdaptor and PyGraphWrapperAdaptor import" in good.stdout


def test_lowering_workers_get_the_sdk_library_path(fake, monkeypatch):
    """hil's own process started without the path: enn lowering goes to workers, which
    inherit the exported path (and so can import the wrapper)."""
    from hil.lower import pool

    monkeypatch.setattr(sdk, "_STARTUP_LIBRARY_PATH", "")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/other")
    assert pool._needs_sdk_library_path()
    assert os.environ["LD_LIBRARY_PATH"] == f"{fake['root'] / 'lib' / 'x86_64-linux'}:/opt/other"
    assert _import(ENN).returncode == 0  # a child started now imports it
    monkeypatch.setattr(sdk, "_STARTUP_LIBRARY_PATH", os.environ["LD_LIBRARY_PATH"])
    assert not pool._needs_sdk_library_path()


def test_an_sdk_built_for_a_newer_system_says_which_build_is_needed() -> None:
    # the Ubuntu 24.04 build of LITECORE on Debian 12 (glibc 2.36) fails only at import
    error = ("ImportError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found "
             "(required by /opt/litecore/lib/x86_64-linux/libgraph_wrapper.so)")
    fixes = sdk._fixes(sdk.Litecore(Path("/opt/litecore"), ()), error)
    assert "ai-litecore-ubuntu2204-v1.1.0.tar.gz" in fixes[0] and "Debian 12" in fixes[0]
