"""A real docker engine for the container tests: installed with apt when missing, started
with its own data root, sockets and pid file under a temporary folder (no bridge, no
iptables changes), and stopped by PID at the end of the session, even after a failure.

Also: the offline base image (debootstrap → docker import, once per session), a wheelhouse
of the image's Python stack served on 127.0.0.1 (built once per machine with `pip wheel`
from this machine's local wheels and index, reused while the requirements are unchanged),
and the `host` image built from this checkout.

Set HIL_DOCKER_DATA_ROOT=DIR to keep the engine's images and layer cache between sessions
(faster local iterations; CI leaves it unset and builds from scratch).
"""

from __future__ import annotations

import contextlib
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

REPO = Path(__file__).resolve().parents[2]
BASE_IMAGE = "local/debian:bookworm"
TORCH_SPEC = "torch==2.13.0"
"""The CPU torch in this machine's wheel cache; PyPI's torchvision does not import beside
it, so this image has no `models` suite (docs/docker.md)."""
BUILDKIT_CLI = "/usr/bin/docker"
"""Debian's docker.io client: the one that drives BuildKit against Debian's daemon."""
EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
WHEELHOUSE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "exynos-hil" / "wheelhouse"
WHEELHOUSE_PORT = 47153
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


def _apt_install(*packages: str) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    done = subprocess.run(["apt-get", "install", "-y", "-qq", *packages], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *packages], env=env, check=True,
                       capture_output=True)


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """dockerd for this session; stopped by PID afterwards."""
    if os.geteuid() != 0:
        pytest.skip("the docker tests start their own dockerd and need root")
    if not (shutil.which("dockerd") and shutil.which("debootstrap") and Path(BUILDKIT_CLI).exists()):
        _apt_install("docker.io", "debootstrap")
    folder = tmp_path_factory.mktemp("dockerd")
    data_root = Path(os.environ.get("HIL_DOCKER_DATA_ROOT") or folder / "data")
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
    try:
        deadline = time.monotonic() + 60
        while subprocess.run([BUILDKIT_CLI, "info"], env=dict(os.environ, DOCKER_HOST=host),
                             capture_output=True).returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        TIMINGS["dockerd start"] = time.monotonic() - start
        yield Engine(host, process.pid)
    finally:
        with timed("dockerd stop"):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            _unmount_under(folder)  # dockerd leaves its netns mount behind
        if not os.environ.get("HIL_DOCKER_DATA_ROOT"):
            with timed("engine data removal"):  # rm is several times faster than rmtree here
                subprocess.run(["rm", "-rf", "--one-file-system", str(data_root)], check=False)


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
    return BASE_IMAGE


def image_requirements() -> list[str]:
    """What the Dockerfile installs: TORCH_SPEC, pyproject's other dependencies, setuptools."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
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
    """The extra CAs this machine trusts (its TLS-re-signing proxy)."""
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
    TIMINGS["host image build"] = seconds
    return BuiltImage(tag, seconds)


@contextlib.contextmanager
def served_with_key(folder: Path, key: str) -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1 that serves `folder` only to requests whose `apikey`
    header is `key` (like the SDK portal); yields (base URL, the keys it saw)."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            seen.append(self.headers.get("apikey", ""))
            path = folder / self.path.rsplit("/", 1)[-1]
            if self.headers.get("apikey") != key or not path.is_file():
                self.send_response(403 if path.is_file() else 404)
                self.end_headers()
                return
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v1/resource/download-file", seen
    finally:
        server.shutdown()
        server.server_close()


ACTION_KEY = "dummy-action-key-77c2"
"""A dummy litecore-api-key given to the action's smoke run: it must be masked, never shown."""


@dataclass(frozen=True)
class ActionRun:
    """The action's run of the smoke suite on a virtual board, in the session's image."""

    result: ActionResult
    workspace: Path
    seconds: float


@pytest.fixture(scope="session")
def action_smoke_run(engine: Engine, host_image: BuiltImage, tmp_path_factory) -> ActionRun:
    """action.yml (FAKE runner, tests/container/action_runner.py) with no board and
    on-no-board: virtual, i.e. `hil run --board virtual --suite smoke` in the container
    through `hil replicate`, the workspace mounted."""
    workspace = tmp_path_factory.mktemp("action-ws")
    temp = tmp_path_factory.mktemp("runner-temp")
    env = dict(os.environ, DOCKER_HOST=engine.host)
    start = time.monotonic()
    result = run_action(REPO, {"on-no-board": "virtual", "image": host_image.tag, "suite": "smoke",
                               "litecore-api-key": ACTION_KEY}, workspace, temp, env)
    seconds = time.monotonic() - start
    TIMINGS["smoke run through the action (with its launcher venv)"] = seconds
    return ActionRun(result, workspace, seconds)
