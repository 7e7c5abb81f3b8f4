"""scripts/install-litecore.sh on FAKE SDK tarballs (tests/container/fake_litecore.py): the
right layout is installed and verified; a wrong version, a missing library, a non-x86-64
library or a bad checksum is refused with one clear line and exit 3. The download path runs
against a local server that, like the SDK portal, answers only to the right `apikey`."""

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.container import fake_litecore
from tests.container.conftest import served_with_key

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-litecore.sh"


def install(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_right_layout_is_installed_and_verified(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    dest = tmp_path / "sdk"
    done = install("--tarball", str(tarball), "--dest", str(dest), "--sha256", digest)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(dest)
    for header in fake_litecore.HEADERS:
        assert (dest / "include" / header).is_file()
    assert (dest / ".litecore-version").read_text().strip() == "1.1.0"
    verified = install("--verify", str(dest))
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.strip() == str(dest)


def test_tarball_dir_with_one_tarball_is_used(tmp_path):
    fake_litecore.make_tarball(tmp_path / "ctx")
    (tmp_path / "ctx" / "README.md").write_text("not a tarball\n")
    done = install("--tarball-dir", str(tmp_path / "ctx"), "--dest", str(tmp_path / "sdk"))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        ({"version": "1.0"}, "holds exynos-ai-litecore-v1.0, expected exynos-ai-litecore-v1.1.0"),
        ({"drop": "lib/x86_64-linux/libgraph_wrapper.so"},
         "is incomplete: missing lib/x86_64-linux/libgraph_wrapper.so"),
        ({"drop": "include/graphgen_c.h"}, "is incomplete: missing include/graphgen_c.h"),
        ({"machine": fake_litecore.AARCH64}, "libgraphgen_api.so is not an x86-64 library"),
    ],
)
def test_wrong_sdk_is_refused_with_one_line(tmp_path, make, expected):
    tarball = fake_litecore.make_tarball(tmp_path / "in", name="sdk.tar.gz", **make)
    dest = tmp_path / "sdk"
    done = install("--tarball", str(tarball), "--dest", str(dest))
    assert done.returncode == 3
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    assert not dest.exists() or not any(dest.iterdir())


def test_checksum_mismatch_is_refused(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    done = install("--tarball", str(tarball), "--dest", str(tmp_path / "sdk"), "--sha256", "0" * 64)
    assert done.returncode == 3
    assert "checksum mismatch" in done.stderr


def test_verify_refuses_other_version(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    dest = tmp_path / "sdk"
    assert install("--tarball", str(tarball), "--dest", str(dest)).returncode == 0
    done = install("--verify", str(dest), "--version", "1.2.0")
    assert done.returncode == 3
    assert "is version 1.1.0, need 1.2.0" in done.stderr


def test_no_source_is_a_clear_error(tmp_path):
    done = install("--dest", str(tmp_path / "sdk"), "--apikey-file", str(tmp_path / "absent"),
                   "--url", "http://127.0.0.1:9/x.tar.gz")
    assert done.returncode == 3
    assert "no LITECORE source" in done.stderr


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_download_sends_the_key_as_header_and_never_prints_it(tmp_path):
    key = "dummy-key-for-test-5c1e"
    fake_litecore.make_tarball(tmp_path / "portal")
    key_file = tmp_path / "apikey"
    key_file.write_text(key + "\n")
    with served_with_key(tmp_path / "portal", key) as (url, seen):
        done = install("--dest", str(tmp_path / "sdk"), "--apikey-file", str(key_file),
                       "--url", f"{url}/ai-litecore-ubuntu2204-v1.1.0.tar.gz")
        wrong = tmp_path / "wrong"
        wrong.write_text("not-the-key")
        refused = install("--dest", str(tmp_path / "sdk2"), "--apikey-file", str(wrong),
                          "--url", f"{url}/ai-litecore-ubuntu2204-v1.1.0.tar.gz")
    assert done.returncode == 0, done.stderr
    assert seen[0] == key
    assert key not in done.stdout + done.stderr
    assert refused.returncode == 3
    assert "download of ai-litecore-ubuntu2204-v1.1.0.tar.gz failed" in refused.stderr
    assert "not-the-key" not in refused.stdout + refused.stderr
