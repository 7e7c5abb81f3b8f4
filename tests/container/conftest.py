"""A real docker engine for the container tests: installed with apt when missing, started
with its own data root, sockets and pid file under a temporary folder (no bridge, no
iptables changes), and stopped by PID at the end of the session, even after a failure.

Also: the offline base image (debootstrap → docker import, once per session), a wheelhouse
of the image's Python stack served on 127.0.0.1 (built once per machine with `pip wheel`
from the host's local wheels and index, reused while the requirements are unchanged),
and the `host` image built from this checkout.

The engine's data root (images, layer cache) is kept between sessions in a machine cache
folder keyed by a hash of what the image is made of (DOCKER_CACHE_INPUTS: the Dockerfile,
pyproject's pins, the base-image script, the image's requirements): while they are unchanged,
CI reuses the base image and the Python layers; when one changes, the next session starts
from an empty root (a from-scratch build), and so does every `--full` session (the nightly
job). At the end of a cached session everything but its base and `host` images is removed.
HIL_DOCKER_DATA_ROOT=DIR uses DIR as the data root instead (kept, never pruned; not with --full).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.server
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import tomllib

from tests.container.action_runner import ActionResult, run_action
from tests.https_lab import LoopbackCA, Request, make_ca, serve

REPO = Path(__file__).resolve().parents[2]
BASE_IMAGE = "local/debian:bookworm"
TORCH_SPEC = "torch==2.13.0"
"""The CPU torch in the host's wheel cache; PyPI's torchvision does not import beside
it, so this image has no `models` suite (docs/guides/local.md)."""
BUILDKIT_CLI = "/usr/bin/docker"
"""Debian's docker.io client: the one that drives BuildKit against Debian's daemon."""
EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
MACHINE_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "exynos-hil"
WHEELHOUSE = MACHINE_CACHE / "wheelhouse"
DOCKER_CACHE = MACHINE_CACHE / "docker"
"""Kept engine data roots, one folder per DOCKER_CACHE_INPUTS hash (only the newest is kept)."""
DOCKER_CACHE_INPUTS = ("Dockerfile", ".dockerignore", "pyproject.toml", "scripts/offline-base-image.sh")
"""What the cached layers are made of, besides image_requirements() and the extra CAs."""
WHEELHOUSE_PORT = 47153
KEPT_PORTAL_CA = MACHINE_CACHE / "test-portal-ca"
"""The test SDK portal's CA (`portal_ca`), kept like the data roots."""
TIMINGS: dict[str, float] = {}
"""Wall times of the expensive steps, printed at the end of the session (never asserted)."""


def pytest_terminal_summary(terminalreporter) -> None:
    """Print what the docker tests cost (the CI time they add)."""
    if TIMINGS:
        figures = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in TIMINGS.items())
        terminalreporter.write_line(f"container tests: {figures}")


@contextlib.contextmanager
def timed(name: str) -> Iterator[None]:
    """Record the wall time of a block in TIMINGS."""
    start = time.monotonic()
    try:
        yield
    finally:
        TIMINGS[name] = TIMINGS.get(name, 0.0) + time.monotonic() - start


@dataclass(frozen=True)
class Engine:
    """A running dockerd of this session."""

    host: str
    """DOCKER_HOST value (unix socket)."""
    pid: int
    data_root: Path
    cache: str
    """`fresh` (an empty data root, removed at the end), `cold` (an empty kept root: the
    DOCKER_CACHE_INPUTS changed or the cache was empty), `warm` (a kept root from an
    earlier session) or `given` (HIL_DOCKER_DATA_ROOT)."""

    @property
    def env(self) -> dict[str, str]:
        """The environment for docker clients of this engine."""
        return dict(os.environ, DOCKER_HOST=self.host)

    def client(self):  # -> docker.DockerClient
        import docker

        return docker.DockerClient(base_url=self.host, timeout=600)

    def cli(self, *args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        """Debian's docker client against this engine."""
        return subprocess.run([BUILDKIT_CLI, *args], env=self.env, check=check, capture_output=True,
                              **kwargs)


KEPT_IMAGES: set[str] = set()
"""Images a cached data root keeps for the next session (the base and `host` images)."""


def missing_parts() -> str:
    """What the docker tests need and this machine lacks, in words ('' when nothing): root (they
    start their own dockerd) and what scripts/setup installs (docker.io: dockerd and Debian's
    client BUILDKIT_CLI; debootstrap)."""
    packages = []
    if not (shutil.which("dockerd") and Path(BUILDKIT_CLI).exists()):
        packages.append("docker.io")
    if not shutil.which("debootstrap"):
        packages.append("debootstrap")
    missing = ([] if os.geteuid() == 0 else ["root (they start their own dockerd)"]) + packages
    if packages:
        missing.append(f"(scripts/setup installs {' and '.join(packages)})")
    return " ".join(missing)


def docker_cache_key(repo: Path = REPO, ca_certs: tuple[Path, ...] | None = None) -> str:
    """The hash of what the cached layers are made of: the DOCKER_CACHE_INPUTS files, the
    image's requirements and the extra CA certificates copied into it."""
    digest = hashlib.sha256()
    for name in DOCKER_CACHE_INPUTS:
        path = repo / name
        digest.update(f"{name}\0".encode())
        digest.update(path.read_bytes() if path.is_file() else b"<none>")
    digest.update("\n".join(image_requirements(repo)).encode())
    for cert in extra_ca_certs() if ca_certs is None else ca_certs:
        digest.update(cert.name.encode() + b"\0" + cert.read_bytes())
    return digest.hexdigest()[:16]


def _locked(path: Path) -> int | None:
    """An exclusive lock on `path` (a file descriptor, kept open for the session), or None
    when another session holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _cached_data_root(key: str) -> tuple[Path, str, int] | None:
    """DOCKER_CACHE/KEY, locked for this session, with `cold` or `warm`; older keys' roots
    that no session holds are removed. None when another session holds this key's root."""
    DOCKER_CACHE.mkdir(parents=True, exist_ok=True)
    fd = _locked(DOCKER_CACHE / f"{key}.lock")
    if fd is None:
        return None
    for other in DOCKER_CACHE.glob("*.lock"):
        if other.stem == key:
            continue
        other_fd = _locked(other)
        if other_fd is not None:  # no session uses it: the inputs changed since
            subprocess.run(["rm", "-rf", "--one-file-system", str(DOCKER_CACHE / other.stem)], check=False)
            other.unlink()
            os.close(other_fd)
    root = DOCKER_CACHE / key
    state = "warm" if (root / "image").is_dir() else "cold"
    return root, state, fd


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory, full_size: bool) -> Iterator[Engine]:
    """dockerd for this session; stopped by PID afterwards."""
    missing = missing_parts()
    if missing:  # in CI (.ci/run: CI set, as root, scripts/setup installed them) a failure
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"the docker tests need {missing}")
    folder = tmp_path_factory.mktemp("dockerd")
    lock_fd = None
    if full_size:  # the nightly job: the image from scratch
        data_root, cache = folder / "data", "fresh"
    elif os.environ.get("HIL_DOCKER_DATA_ROOT"):
        data_root, cache = Path(os.environ["HIL_DOCKER_DATA_ROOT"]), "given"
    else:
        kept = _cached_data_root(docker_cache_key())
        if kept is None:  # another session on this host uses it: not shared
            data_root, cache = folder / "data", "fresh"
        else:
            data_root, cache, lock_fd = kept
    host = f"unix://{folder}/docker.sock"
    log_path = folder / "dockerd.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            ["dockerd", "--data-root", str(data_root), "--exec-root", str(folder / "x"),
             "--pidfile", str(folder / "dockerd.pid"), "--host", host,
             "--storage-driver", "overlay2", "--bridge", "none", "--iptables=false",
             "--ip-masq=false"],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    start = time.monotonic()
    engine = Engine(host, process.pid, data_root, cache)
    try:
        deadline = time.monotonic() + 60
        while subprocess.run([BUILDKIT_CLI, "info"], env=dict(os.environ, DOCKER_HOST=host),
                             capture_output=True).returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        TIMINGS[f"dockerd start ({cache} data root)"] = time.monotonic() - start
        yield engine
        if cache in ("cold", "warm"):
            with timed("pruning the kept data root"):
                _prune(engine)
    finally:
        with timed("dockerd stop"):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            _unmount_under(folder)  # dockerd leaves its netns mount behind
        if cache == "fresh":
            with timed("engine data removal"):  # rm is several times faster than rmtree here
                subprocess.run(["rm", "-rf", "--one-file-system", str(data_root)], check=False)
        if lock_fd is not None:
            os.close(lock_fd)


def _prune(engine: Engine) -> None:
    """Leave only KEPT_IMAGES (and their layers) in a kept data root: no image of a test
    (e.g. the BuildKit one) and no build cache outlives the session. A session that built
    no `host` image (a selection of tests) keeps the ones it found."""
    listed = engine.cli("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", text=True).stdout.split()
    built_host = any(tag.startswith("exynos-hil:host-") for tag in KEPT_IMAGES)
    stale = [tag for tag in listed if tag not in KEPT_IMAGES | {BASE_IMAGE} and not tag.endswith(":<none>")
             and (built_host or not tag.startswith("exynos-hil:host-"))]  # a session without one keeps them
    if stale:
        engine.cli("rmi", "-f", *stale, check=False)
    engine.cli("container", "prune", "-f", check=False)
    engine.cli("image", "prune", "-f", check=False)
    engine.cli("builder", "prune", "-af", check=False)


def _unmount_under(folder: Path) -> None:
    """Unmount whatever is still mounted below `folder`, deepest first."""
    prefix = str(folder.resolve()) + "/"
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)


@pytest.fixture(scope="session")
def base_image(engine: Engine) -> str:
    """The Debian base image, made offline with scripts/offline-base-image.sh."""
    with timed("base image"):
        done = subprocess.run([str(REPO / "scripts/offline-base-image.sh"), "--tag", BASE_IMAGE],
                              env=dict(engine.env, DOCKER=BUILDKIT_CLI), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == BASE_IMAGE
    KEPT_IMAGES.add(BASE_IMAGE)
    return BASE_IMAGE


def image_requirements(repo: Path = REPO) -> list[str]:
    """What the Dockerfile installs: TORCH_SPEC, pyproject's other dependencies, setuptools."""
    deps = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]
    rest = [d for d in deps if not d.startswith(("torch=", "torchvision="))]
    return [TORCH_SPEC, *rest, "setuptools>=68", "wheel"]


@pytest.fixture(scope="session")
def wheelhouse() -> Iterator[str]:
    """The image's wheels, served on http://127.0.0.1:PORT/ for `docker build --network host`."""
    requirements = image_requirements()
    stamp = WHEELHOUSE / ".requirements"
    wanted = hashlib.sha256("\n".join(requirements).encode()).hexdigest()
    if not stamp.is_file() or stamp.read_text() != wanted:
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        with timed("wheelhouse (pip wheel)"):
            subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(WHEELHOUSE),
                            *requirements], check=True, capture_output=True)
        stamp.write_text(wanted)
    handler = partial(_QuietHandler, directory=str(WHEELHOUSE))
    try:  # a stable URL keeps the build arguments, so the layer cache and the tag, stable
        server = http.server.ThreadingHTTPServer(("127.0.0.1", WHEELHOUSE_PORT), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


def extra_ca_certs() -> tuple[Path, ...]:
    """The extra CAs the host trusts (a TLS-re-signing proxy's)."""
    return tuple(sorted(EXTRA_CA_DIR.glob("*.crt"))) if EXTRA_CA_DIR.is_dir() else ()


def host_build_args(base: str, wheels: str) -> tuple[tuple[str, str], ...]:
    """Offline build: the local base image, only the served wheelhouse, a CPU torch."""
    return (("BASE_IMAGE", base), ("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", wheels),
            ("PIP_EXTRA_INDEX_URL", ""), ("TORCH_SPEC", TORCH_SPEC))


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    seconds: float
    """Wall time of the build (printed, never asserted)."""
    log: tuple[str, ...]
    """The build's output (`image ... present: not rebuilt` when a kept root had it)."""
    cache: str
    """The engine's data root: Engine.cache."""


@pytest.fixture(scope="session")
def host_image(engine: Engine, base_image: str, wheelhouse: str) -> BuiltImage:
    """The `host` target of this checkout, built through hil.container (docker SDK)."""
    from hil import container

    spec = container.BuildSpec(context=REPO, target="host",
                               build_args=host_build_args(base_image, wheelhouse),
                               ca_certs=extra_ca_certs(), network_host=True)
    lines: list[str] = []
    start = time.monotonic()
    tag = container.build_image(spec, on_log=lines.append, client=engine.client())
    seconds = time.monotonic() - start
    TIMINGS[f"host image build ({engine.cache} data root)"] = seconds
    KEPT_IMAGES.add(tag)
    return BuiltImage(tag, seconds, tuple(lines), engine.cache)


@contextlib.contextmanager
def served_with_key(folder: Path, key: str, ca: LoopbackCA) -> Iterator[tuple[str, list[str]]]:
    """An HTTPS server on 127.0.0.1 (`ca`'s certificate) that serves `folder` only to
    requests whose `apikey` header is `key` (like the SDK portal); yields (base URL, the keys
    it saw)."""
    seen: list[str] = []

    def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
        seen.append(request.headers.get("apikey", ""))
        path = folder / request.path.rsplit("/", 1)[-1]
        if request.headers.get("apikey") != key or not path.is_file():
            return (403 if path.is_file() else 404), {}, b""
        return 200, {}, path.read_bytes()

    with serve(answer, tls=ca) as (base, _requests):
        yield f"{base}/api/v1/resource/download-file", seen


@pytest.fixture(scope="session")
def portal_ca() -> LoopbackCA:
    """The CA of the test SDK portal's HTTPS, kept between sessions (with the artifacts the
    tests keep): an image built trusting it keeps its layers cached."""
    return make_ca(KEPT_PORTAL_CA, days=3650)


ACTION_KEY = "dummy-action-key-77c2"
"""A dummy litecore-api-key given to the action's smoke run: it must be masked, never shown."""


@dataclass(frozen=True)
class ActionRun:
    """The action's run of the smoke suite on a virtual board, in the session's image."""

    result: ActionResult
    workspace: Path
    seconds: float


@pytest.fixture(scope="session")
def action_runner_temp(tmp_path_factory) -> Path:
    """RUNNER_TEMP of the session's real action runs: like a job's steps, they share the
    launcher venv the action's first run sets up there."""
    return tmp_path_factory.mktemp("runner-temp")


@pytest.fixture(scope="session")
def action_smoke_run(engine: Engine, host_image: BuiltImage, action_runner_temp: Path,
                     tmp_path_factory) -> ActionRun:
    """action.yml (FAKE runner, tests/container/action_runner.py) with no board and
    on-no-board: virtual, i.e. `hil run --board virtual --suite smoke` in the container
    through `hil replicate`, the workspace mounted."""
    workspace = tmp_path_factory.mktemp("action-ws")
    temp = action_runner_temp
    env = dict(os.environ, DOCKER_HOST=engine.host)
    start = time.monotonic()
    result = run_action(REPO, {"on-no-board": "virtual", "image": host_image.tag, "suite": "smoke",
                               "litecore-api-key": ACTION_KEY}, workspace, temp, env)
    seconds = time.monotonic() - start
    TIMINGS["smoke run through the action (with its launcher venv)"] = seconds
    return ActionRun(result, workspace, seconds)
