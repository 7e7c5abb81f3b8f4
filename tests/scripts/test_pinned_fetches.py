"""What the image build fetches is pinned: ExecuTorch by commit (a tag can move), the NDK and
LITECORE by checksum, each refused without one unless told `unverified`. build-enn.sh
fetches from a real git repository the test makes (file://), as it would from GitHub."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.container import fake_litecore

REPO = Path(__file__).resolve().parents[2]
BUILD_ENN = REPO / "scripts" / "build-enn.sh"
INSTALL = REPO / "scripts" / "install-litecore.sh"
V1_5_1 = "3b60683923245cf472b7323426920e15623ba361"
"""ExecuTorch v1.5.1's commit, as the executorch 1.5.1 wheel records it (version.py)."""


@pytest.fixture
def fake_sdk(tmp_path: Path) -> Path:
    root = tmp_path / "sdk"
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    subprocess.run(["bash", str(INSTALL), "--tarball", str(tarball), "--dest", str(root), "--sha256", "unverified"],
                   check=True, capture_output=True)
    return root


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()


def _upstream(tmp_path: Path) -> tuple[str, str, str]:
    """A git repository standing for ExecuTorch's: two commits, the tag v9 moved to the second
    after the first was pinned. (url, first commit, second commit)."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    (repo / "version.txt").write_text("9.0.0\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "--quiet", "-m", "release")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "version.txt").write_text("9.0.0-moved\n")
    _git(repo, "commit", "--quiet", "-am", "the tag moved here")
    _git(repo, "tag", "v9")
    _git(repo, "config", "uploadpack.allowAnySHA1InWant", "true")  # as GitHub serves commits
    return f"file://{repo}", first, _git(repo, "rev-parse", "HEAD")


def _build_enn(tmp_path: Path, sdk: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(BUILD_ENN), "--build", "x86_64", "--sdk", str(sdk), "--out", "o",
                           "--python", sys.executable, "--work", str(tmp_path / "work"), *args],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_executorch_is_fetched_by_its_commit_not_its_tag(tmp_path: Path, fake_sdk: Path) -> None:
    url, first, second = _upstream(tmp_path)
    done = _build_enn(tmp_path, fake_sdk, "--git", url, "--ref", "v9", "--commit", first)
    assert "fetching ExecuTorch v9 (commit " + first in done.stderr
    assert _git(tmp_path / "work", "rev-parse", "HEAD") == first != second  # not where v9 points now
    assert done.returncode != 0  # it goes on to the build, which this checkout cannot do


def test_another_ref_without_its_commit_and_a_bad_commit_are_refused(tmp_path: Path, fake_sdk: Path) -> None:
    done = _build_enn(tmp_path, fake_sdk, "--ref", "v9")
    assert done.returncode == 3
    assert done.stderr.strip() == "build-enn: --ref v9 needs --commit SHA (ExecuTorch is fetched by commit)"
    done = _build_enn(tmp_path, fake_sdk, "--commit", "v1.5.1")
    assert done.returncode == 3 and "--commit: 'v1.5.1' is not a 40-hex commit" in done.stderr


def test_the_pins_are_the_defaults() -> None:
    script = BUILD_ENN.read_text()
    assert f"pinned_commit={V1_5_1}" in script
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f"ARG EXECUTORCH_COMMIT={V1_5_1}" in dockerfile
    assert "ARG ANDROID_NDK_SHA1=a7b54a5de87fecd125a17d54f73c446199e72a64" in dockerfile
    assert re.search(r"^ARG LITECORE_SHA256=$", dockerfile, re.MULTILINE)  # no known hash: required
    assert "--sha256 \"${LITECORE_SHA256}\"" in dockerfile


def test_an_ndk_download_needs_its_sha1_and_https(tmp_path: Path, fake_sdk: Path) -> None:
    url, first, _ = _upstream(tmp_path)
    common = ("--build", "android", "--git", url, "--ref", "v9", "--commit", first)
    done = subprocess.run(["bash", str(BUILD_ENN), *common, "--sdk", str(fake_sdk), "--out", "o",
                           "--python", sys.executable, "--work", str(tmp_path / "work"),
                           "--ndk-url", "https://127.0.0.1:9/android-ndk-r28c-linux.zip"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 3
    assert "--ndk-url needs --ndk-sha1 HEX" in done.stderr
