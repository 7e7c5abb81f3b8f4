"""Under CI (`CI` set: .ci/run exports it), a part that scripts/setup installs and the tests
need — scipy (a dev dependency), cmake, docker.io and debootstrap — fails the test that needs
it when missing, instead of a skip that a green run would hide; outside CI it is a skip that
names what to install. Each is hidden from one pytest session of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # a few pytest sessions of their own

CASES = {
    "scipy": ("tests/test_latency.py::test_mann_whitney_p_values_match_scipy_exact_and_approximate",
              "scipy"),
    "cmake": ("tests/scripts/test_runner_build.py::test_hil_profile_include_fails_without_the_xnnpack_build",
              "cmake"),
    "docker": ("tests/container/test_image.py::test_doctor_in_the_container_as_a_non_root_user",
               "scripts/setup installs docker.io and debootstrap"),
}


def _session(node: str, part: str, hidden: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    if ci:
        environment["CI"] = "true"
    if part == "scipy":  # a scipy that does not import, first on the path
        (hidden / "scipy").mkdir()
        (hidden / "scipy" / "__init__.py").write_text("raise ModuleNotFoundError('hidden by the test', name='scipy')\n")
        environment["PYTHONPATH"] = os.pathsep.join([str(hidden), str(REPO)])
    else:  # a PATH with the venv's tools and none of the system's
        environment["PATH"] = str(Path(sys.executable).parent)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", node],
                          cwd=REPO, capture_output=True, text=True, timeout=280, env=environment)


@pytest.mark.parametrize("part", sorted(CASES))
def test_a_missing_part_fails_under_ci_and_is_a_named_skip_elsewhere(part: str, tmp_path: Path) -> None:
    node, named = CASES[part]
    for folder in ("ci", "local"):
        (tmp_path / folder).mkdir()
    in_ci = _session(node, part, tmp_path / "ci", ci=True)
    assert in_ci.returncode == 1, in_ci.stdout + in_ci.stderr
    assert "skipped" not in in_ci.stdout.splitlines()[-1] and named in in_ci.stdout, in_ci.stdout
    local = _session(node, part, tmp_path / "local", ci=False)
    assert local.returncode == 0 and "1 skipped" in local.stdout.splitlines()[-1], local.stdout
    assert named in local.stdout, local.stdout
