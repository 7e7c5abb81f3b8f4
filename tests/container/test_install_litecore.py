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
from tests.https_lab import LoopbackCA, Request, make_ca, serve

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-litecore.sh"


def install(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env=None if env is None else {**os.environ, **env})


def install_tarball(tarball: Path, dest: Path, *args: str) -> subprocess.CompletedProcess:
    """Install `tarball` into `dest` with its own SHA-256 (what a pinned build passes)."""
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    return install("--tarball", str(tarball), "--dest", str(dest), "--sha256", digest, *args)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The single error line of a refusal (notes before it are `using ...`/`downloading ...`)."""
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    notes = ("install-litecore: using ", "install-litecore: downloading ")
    errors = [line for line in done.stderr.splitlines() if not line.startswith(notes)]
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
    done = install_tarball(tarball, dest)
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
    assert expected in one_error_line(install_tarball(tarball, dest))
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
    line = one_error_line(install_tarball(tarball, tmp_path / "sdk"))
    assert "has several top folders (a b) and no include/ or lib/: not a LITECORE SDK" in line


def test_checksum_mismatch_is_refused(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    done = install("--tarball", str(tarball), "--dest", str(tmp_path / "sdk"), "--sha256", "0" * 64)
    assert "checksum mismatch" in one_error_line(done)


def test_verify_refuses_other_version(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    dest = tmp_path / "sdk"
    assert install_tarball(tarball, dest).returncode == 0
    done = install("--verify", str(dest), "--version", "1.2.0")
    assert "is version 1.1.0, need 1.2.0" in one_error_line(done)


def test_no_source_is_a_clear_error(tmp_path):
    done = install("--dest", str(tmp_path / "sdk"), "--apikey-file", str(tmp_path / "absent"),
                   "--url", "https://127.0.0.1:9/x.tar.gz", "--sha256", "unverified")
    assert "no LITECORE source" in one_error_line(done)


@pytest.fixture(scope="module")
def loopback_ca(tmp_path_factory: pytest.TempPathFactory) -> LoopbackCA:
    return make_ca(tmp_path_factory.mktemp("ca"))


def download(tmp_path: Path, url: str, key: str, ca: LoopbackCA, *args: str) -> subprocess.CompletedProcess:
    """install-litecore.sh's download of `url` with `key`, trusting `ca` (CURL_CA_BUNDLE)."""
    key_file = tmp_path / f"apikey-{len(list(tmp_path.glob('apikey-*')))}"
    key_file.write_text(key + "\n")
    tarball = tmp_path / "portal" / "ai-litecore-ubuntu2204-v1.1.0.tar.gz"
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest() if tarball.is_file() else "unverified"
    dest = tmp_path / f"sdk-{key_file.name}"
    return install("--dest", str(dest), "--apikey-file", str(key_file), "--url", url, "--sha256", digest,
                   *args, env={"CURL_CA_BUNDLE": str(ca.cert)})


# in CI (scripts/setup installs curl) a missing curl fails the test instead
@pytest.mark.skipif(shutil.which("curl") is None and not os.environ.get("CI"),
                    reason="curl is not installed (scripts/setup installs it)")
def test_download_sends_the_key_as_header_and_never_prints_it(tmp_path, loopback_ca):
    key = "dummy-key-for-test-5c1e"
    fake_litecore.make_tarball(tmp_path / "portal")
    with served_with_key(tmp_path / "portal", key, loopback_ca) as (url, seen):
        done = download(tmp_path, f"{url}/ai-litecore-ubuntu2204-v1.1.0.tar.gz", key, loopback_ca)
        refused = download(tmp_path, f"{url}/ai-litecore-ubuntu2204-v1.1.0.tar.gz", "not-the-key", loopback_ca)
    assert done.returncode == 0, done.stderr
    assert seen[0] == key
    assert key not in done.stdout + done.stderr
    assert refused.returncode == 3
    assert "download of ai-litecore-ubuntu2204-v1.1.0.tar.gz failed: HTTP 403" in refused.stderr
    assert "not-the-key" not in refused.stdout + refused.stderr


def _redirect(to: str):
    def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
        return 302, {"Location": to + request.path.rsplit("/", 1)[-1]}, b""
    return answer


def _file(folder: Path):
    def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
        path = folder / request.path.rsplit("/", 1)[-1]
        return (200, {}, path.read_bytes()) if path.is_file() else (404, {}, b"")
    return answer


@pytest.mark.skipif(shutil.which("curl") is None and not os.environ.get("CI"),
                    reason="curl is not installed (scripts/setup installs it)")
def test_a_redirect_to_http_never_gets_the_key(tmp_path, loopback_ca):
    """The portal (https://127.0.0.1) answers 302 to http://127.0.0.2: nothing reaches the
    second host, the key least of all; the install stops with one line."""
    key = "dummy-key-for-test-9d41"
    fake_litecore.make_tarball(tmp_path / "elsewhere")
    with serve(_file(tmp_path / "elsewhere"), host="127.0.0.2") as (plain, reached), \
            serve(_redirect(f"{plain}/files/"), tls=loopback_ca) as (portal, asked):
        done = download(tmp_path, f"{portal}/api/ai-litecore-ubuntu2204-v1.1.0.tar.gz", key, loopback_ca)
    assert [request.headers.get("apikey") for request in asked] == [key]  # the portal: the key
    assert reached == []  # http://127.0.0.2 got no request at all
    line = one_error_line(done)
    assert "refusing http://127.0.0.2:" in line and "https only" in line
    assert key not in done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("curl") is None and not os.environ.get("CI"),
                    reason="curl is not installed (scripts/setup installs it)")
def test_a_redirect_to_another_host_is_followed_without_the_key(tmp_path, loopback_ca):
    """A CDN's signed link on another host (https://127.0.0.2) gets the request, not the key;
    a redirect within the portal's own origin keeps it."""
    key = "dummy-key-for-test-0b7e"
    fake_litecore.make_tarball(tmp_path / "cdn")
    with serve(_file(tmp_path / "cdn"), host="127.0.0.2", tls=loopback_ca) as (cdn, reached), \
            serve(_redirect(f"{cdn}/signed/"), tls=loopback_ca) as (portal, asked):
        done = download(tmp_path, f"{portal}/api/ai-litecore-ubuntu2204-v1.1.0.tar.gz", key, loopback_ca,
                        "--sha256", hashlib.sha256(next((tmp_path / "cdn").glob("*.tar.gz")).read_bytes()).hexdigest())
    assert done.returncode == 0, done.stderr
    assert [request.headers.get("apikey") for request in asked] == [key]
    assert [request.headers.get("apikey") for request in reached] == [None]

    fake_litecore.make_tarball(tmp_path / "portal")
    hops: list[str] = []

    def within(request: Request) -> tuple[int, dict[str, str], bytes]:
        hops.append(request.path)
        if request.path.startswith("/api/"):
            return 302, {"Location": "/files/" + request.path.rsplit("/", 1)[-1]}, b""
        return _file(tmp_path / "portal")(request) if request.headers.get("apikey") == key else (403, {}, b"")

    with serve(within, tls=loopback_ca) as (portal, asked):
        done = download(tmp_path, f"{portal}/api/ai-litecore-ubuntu2204-v1.1.0.tar.gz", key, loopback_ca)
    assert done.returncode == 0, done.stderr
    assert [request.headers.get("apikey") for request in asked] == [key, key]


def test_a_sha256_is_required(tmp_path):
    tarball = fake_litecore.make_tarball(tmp_path / "in")
    line = one_error_line(install("--tarball", str(tarball), "--dest", str(tmp_path / "sdk")))
    assert "--sha256 is required" in line and "LITECORE_SHA256" in line
    done = install("--tarball", str(tarball), "--dest", str(tmp_path / "sdk"), "--sha256", "unverified")
    assert done.returncode == 0, done.stderr
    assert "not verified (--sha256 unverified)" in done.stderr
