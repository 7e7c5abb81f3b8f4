"""`hil doctor` on the test host: real probes (executorch metadata, adb, a bwrap sandbox,
the docker engine), a FAKE LITECORE tree (tests/container/fake_litecore.py) for the SDK
check, and fake runner files that are only ELF headers."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.container import fake_litecore

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install-litecore.sh"


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("EXYNOS_AI_LITECORE_ROOT", "HIL_RUNNER")}
    environment.update(env)
    return subprocess.run([sys.executable, "-m", "hil", "doctor", *args], capture_output=True,
                          text=True, timeout=120, env=environment, cwd=REPO)


def states(output: str) -> dict[str, str]:
    found = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("ok", "missing", "MISSING"):
            found[parts[1]] = parts[0]
    return found


def test_reports_every_component_and_passes_for_a_virtual_run():
    done = doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    found = states(done.stdout)
    assert set(found) == {"executorch", "sdk", "enn-wrapper", "adb", "runner", "bwrap", "docker"}
    assert found["executorch"] == found["adb"] == found["bwrap"] == "ok"
    assert found["sdk"] == "missing"
    assert "fix: scripts/install-litecore.sh" in done.stdout


def test_required_sdk_missing_is_exit_3():
    done = doctor("--require", "sdk")
    assert done.returncode == 3
    assert states(done.stdout)["sdk"] == "MISSING"
    assert "required but not ok: sdk" in done.stderr


def test_installed_sdk_is_found_with_its_version(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    root = tmp_path / "sdk"
    subprocess.run(["bash", str(SCRIPT), "--tarball", str(tarball), "--dest", str(root), "--sha256", "unverified"],
                   check=True, capture_output=True)
    done = doctor("--require", "sdk", EXYNOS_AI_LITECORE_ROOT=str(root))
    assert done.returncode == 0, done.stdout
    assert f"LITECORE 1.1.0 at {root}" in done.stdout
    (root / "lib" / "x86_64-linux" / "libgraph_wrapper.so").unlink()
    broken = doctor("--require", "sdk", EXYNOS_AI_LITECORE_ROOT=str(root))
    assert broken.returncode == 3
    assert "missing lib/x86_64-linux/libgraph_wrapper.so" in broken.stdout


@pytest.mark.parametrize(("machine", "ok"), [(fake_litecore.AARCH64, True), (fake_litecore.X86_64, False)])
def test_runner_must_be_an_aarch64_binary(tmp_path, machine, ok):
    runner = tmp_path / "enn_executor_runner"
    runner.write_bytes(fake_litecore.elf_header(machine) + bytes(100))
    done = doctor("--require", "runner", HIL_RUNNER=str(runner))
    assert (done.returncode == 0) is ok
    assert ("(aarch64 ELF, " in done.stdout) is ok


def test_unreachable_docker_says_how_to_fix(tmp_path):
    done = doctor("--require", "docker", DOCKER_HOST=f"unix://{tmp_path}/none.sock")
    assert done.returncode == 3
    assert "fix: start dockerd (or set DOCKER_HOST)" in done.stdout


def test_unknown_component_is_a_usage_error():
    done = doctor("--require", "gpu")
    assert done.returncode == 3
    assert "--require: unknown component 'gpu'" in done.stderr
    assert "Traceback" not in done.stderr
