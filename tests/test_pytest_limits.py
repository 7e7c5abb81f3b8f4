"""The per-test limit (pytest-timeout, configured in pyproject.toml): a hung test fails with
every thread's stack printed, the session goes on to the next test, and the long tests get
their longer limit from tests/conftest.py's LONG_TESTS. Checked on a small tests/ tree run
with the repository's own pytest configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # a pytest session of its own (plugins load: a few seconds)


def test_the_default_limit_is_300_s_with_the_signal_method(pytestconfig: pytest.Config) -> None:
    assert float(pytestconfig.getini("timeout")) == 300
    assert pytestconfig.getini("timeout_method") == "signal"


def test_a_hung_test_fails_with_its_stacks_and_the_session_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_hang.py").write_text(
        "import threading, time\n"
        "def test_hangs():\n"
        "    threading.Thread(target=time.sleep, args=(60,), name='helper', daemon=True).start()\n"
        "    threading.Event().wait()  # waits for an event that never comes\n"
        "def test_after():\n"
        "    pass\n"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path),
         "-p", "no:cacheprovider", "-o", "timeout=3", "-q", str(tmp_path / "test_hang.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=environment,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Timeout" in out and "1 failed, 1 passed" in out
    assert "Stack of helper" in out  # every thread's stack, not only the test's
    assert "test_hang.py:4: " in out  # where the test hung


def test_the_known_long_tests_get_their_longer_limit() -> None:
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("tests_conftest", REPO / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    _long_limit, FULL_LIMIT_S = conftest._long_limit, conftest.FULL_LIMIT_S

    def item(path: str, full: bool = False) -> SimpleNamespace:
        return SimpleNamespace(path=REPO / path,
                               get_closest_marker=lambda name: object() if full and name == "full" else None)

    assert _long_limit(item("tests/container/test_image.py")) == 3600
    assert _long_limit(item("tests/cases/test_models_e2e.py")) == 1800
    assert _long_limit(item("tests/scripts/test_soak.py", full=True)) == FULL_LIMIT_S
    assert _long_limit(item("tests/test_verdict.py")) is None  # the default, 300 s
