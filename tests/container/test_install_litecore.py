"""scripts/install-litecore.sh on FAKE SDKs (tests/container/fake_litecore.py): the tarball as
downloaded (any top folder, or none) is installed; a folder unpacked the upstream way
(`tar --strip-components=1`, any name) is verified; a wrong version, a wrong layout, a
missing header or library, a non-x86-64 library or a bad checksum is refused with one clear
line and exit 3. The download path runs against a local server that, like the SDK portal,
answers only to the right `apikey`."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.container import fake_litecore
from tests.container.conftest import served_with_key

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-litecore.sh"


def install(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The single error line of a refusal (notes before it are `using ...` lines)."""
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("install-litecore: using ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


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


@pytest.mark.parametrize(("top", "name", "version_file"), [
    ("ai_litecore_sdk", None, "1.1.0"),            # any top folder; version from the file name
    ("exynos-ai-litecore-v1.1.0", "sdk.tgz", "1.1.0"),  # version from the top folder
    (None, None, "1.1.0"),                         # the SDK's folders at the top
    ("whatever", "sdk.tar.gz", None),              # no version anywhere: accepted, noted
])
def test_the_tarball_as_downloaded_is_installed_whatever_its_top_folder(tmp_path, top, name, version_file):
    tarball = fake_litecore.make_tarball(tmp_path / "in", top=top, name=name)
    dest = tmp_path / "sdk"
    done = install("--tarball", str(tarball), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    assert (dest / "include" / "common-types.h").is_file()
    assert (dest / "lib" / "x86_64-linux" / "libgraph_wrapper.so").is_file()
    marker = dest / ".litecore-version"
    assert (marker.read_text().strip() if marker.exists() else None) == version_file
    if version_file is None:
        assert "does not say its version" in done.stderr
    assert install("--verify", str(dest)).returncode == 0


def test_a_folder_unpacked_the_upstream_way_is_verified(tmp_path):
    """ExecuTorch CI: `tar -C DIR --strip-components=1 -xzf ai-litecore-...tar.gz`."""
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    root = tmp_path / "exynos_ai_lite_core"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "--strip-components=1", "-xzf", str(tarball)], check=True)
    done = install("--verify", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(root)
    assert "does not say its version" in done.stderr


def test_a_folder_unpacked_without_stripping_is_refused_with_the_way_out(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    root = tmp_path / "unpacked"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "-xzf", str(tarball)], check=True)
    line = one_error_line(install("--verify", str(root)))
    assert f"{root} is not an SDK root" in line
    assert f"but {root}/exynos-ai-litecore-v1.1.0 is" in line and "--strip-components=1" in line


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        ({"version": "1.0"}, "sdk.tar.gz (exynos-ai-litecore-v1.0) is version 1.0, need 1.1.0"),
        ({"drop": "lib/x86_64-linux/libgraph_wrapper.so"},
         "is incomplete: missing lib/x86_64-linux/libgraph_wrapper.so"),
        ({"drop": "include/graphgen_c.h"}, "is incomplete: missing include/graphgen_c.h"),
        ({"drop": "include/common-types.h"}, "is incomplete: missing include/common-types.h"),
        ({"machine": fake_litecore.AARCH64}, "libgraphgen_api.so is not an x86-64 library"),
    ],
)
def test_wrong_sdk_is_refused_with_one_line(tmp_path, make, expected):
    tarball = fake_litecore.make_tarball(tmp_path / "in", name="sdk.tar.gz", **make)
    dest = tmp_path / "sdk"
    assert expected in one_error_line(install("--tarball", str(tarball), "--dest", str(dest)))
    assert not dest.exists() or not any(dest.iterdir())


def test_a_tarball_that_is_no_sdk_is_refused(tmp_path):
    import io
    import tarfile

    tarball = tmp_path / "other.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for name in ("a/readme.txt", "b/readme.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"x\n"))
    line = one_error_line(install("--tarball", str(tarball), "--dest", str(tmp_path / "sdk")))
    assert "has several top folders (a b) and no include/ or lib/: not a LITECORE SDK" in line


def test_checksum_mismatch_is_refused(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    done = install("--tarball", str(tarball), "--dest", str(tmp_path / "sdk"), "--sha256", "0" * 64)
    assert "checksum mismatch" in one_error_line(done)


def test_verify_refuses_other_version(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    dest = tmp_path / "sdk"
    assert install("--tarball", str(tarball), "--dest", str(dest)).returncode == 0
    done = install("--verify", str(dest), "--version", "1.2.0")
    assert "is version 1.1.0, need 1.2.0" in one_error_line(done)


def test_no_source_is_a_clear_error(tmp_path):
    done = install("--dest", str(tmp_path / "sdk"), "--apikey-file", str(tmp_path / "absent"),
                   "--url", "http://127.0.0.1:9/x.tar.gz")
    assert "no LITECORE source" in one_error_line(done)


# in CI (scripts/setup installs curl) a missing curl fails the test instead
@pytest.mark.skipif(shutil.which("curl") is None and not os.environ.get("CI"),
                    reason="curl is not installed (scripts/setup installs it)")
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
