"""scripts/build-enn.sh's own checks. The build itself needs the real LITECORE SDK,
ExecuTorch's source with submodules (GitHub) and NDK r28c, none of which the test hosts
can get: it is NOT run here (docs/explanation/virtual-board.md lists what stays untested)."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.container import fake_litecore

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "build-enn.sh"
INSTALL = REPO / "scripts" / "install-litecore.sh"


def build_enn(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.fixture
def fake_sdk(tmp_path: Path) -> Path:
    """A FAKE LITECORE install (layout only)."""
    root = tmp_path / "sdk"
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    subprocess.run(["bash", str(INSTALL), "--tarball", str(tarball), "--dest", str(root), "--sha256", "unverified"],
                   check=True, capture_output=True)
    return root


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--build is required"),
        (["--build", "arm32"], "--build: unknown target 'arm32'"),
        (["--build", "x86_64"], "--sdk is required"),
        (["--build", "x86_64", "--sdk", "/nonexistent"], "--out is required"),
        (["--build", "x86_64", "--sdk", "/nonexistent", "--out", "o"], "--verify: no such folder"),
        (["--bogus"], "unknown argument: --bogus"),
    ],
)
def test_bad_arguments_are_one_line_exit_3(tmp_path, args, message):
    done = build_enn(*args, cwd=tmp_path)
    assert done.returncode == 3
    assert message in done.stderr


def test_incomplete_sdk_is_refused_before_building(tmp_path, fake_sdk):
    (fake_sdk / "include" / "graph_wrapper_api.h").unlink()
    done = build_enn("--build", "x86_64", "--sdk", str(fake_sdk), "--out", "o", cwd=tmp_path)
    assert done.returncode == 3
    assert "missing include/graph_wrapper_api.h" in done.stderr


def test_a_source_that_is_not_executorch_is_refused(tmp_path, fake_sdk):
    src = tmp_path / "src"
    src.mkdir()
    (src / "README.md").write_text("something else\n")
    done = build_enn("--build", "x86_64", "--sdk", str(fake_sdk), "--out", "o", "--src", str(src),
                     "--work", str(tmp_path / "work"), "--python", sys.executable, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "is not an ExecuTorch checkout" in done.stderr
