"""Shared fixtures: a private adb server and virtual boards, real processes stopped by PID."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import adbutils
import pytest

from hil.adbaddress import SERVER_ENV
from hil.adbserver import AdbServer
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full", action="store_true", default=False,
        help="full-size variants (the 3,000-case soak, the whole ops-delegation derivation, the "
             "from-scratch image build): ./scripts/test --full and the nightly workflow; CI runs "
             "smaller versions that prove the same guarantees",
    )


LONG_TESTS: dict[str, int] = {
    "tests/container/": 3600,  # the image built from an empty data root, the action's container runs
    "tests/cases/test_models_e2e.py": 1800,  # lowers the models suite at both precisions
    "tests/scripts/test_soak.py": 1200,  # the soak's own run of hil, with its recoveries and probation
    "tests/board/test_lease.py": 900,  # whole `hil run`s waiting on each other's leases
    "tests/workflow/": 900,  # the action's steps, each a whole `hil run` (module fixtures)
    "tests/provision/": 900,  # reboots into the bootloader and back, fastboot's waits
    "tests/docs/test_getting_started.py": 900,  # the page's every command: a cold lowering, runs
    "tests/pool/test_labgrid": 900,  # a coordinator, exporters (over sshd too) and whole `hil run`s
}
"""Per-test limits (seconds) above pytest-timeout's default (pyproject.toml: 300 s) for the
tests known to be long, by path prefix; a `full` variant gets FULL_LIMIT_S. The limit covers a
test's fixtures too: a module's expensive fixture counts against its first test."""
FULL_LIMIT_S = 3600


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "full: runs only with --full (a full-size variant of a CI test)")


def _long_limit(item: pytest.Item) -> int | None:
    """The limit LONG_TESTS (or FULL_LIMIT_S) gives `item`, None for the default."""
    path = Path(str(item.path)).resolve().relative_to(Path(__file__).resolve().parents[1]).as_posix()
    limits = [seconds for prefix, seconds in LONG_TESTS.items() if path.startswith(prefix)]
    if item.get_closest_marker("full") is not None:
        limits.append(FULL_LIMIT_S)
    return max(limits, default=None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        limit = _long_limit(item)
        if limit is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(limit))
    if config.getoption("--full"):
        return
    skip = pytest.mark.skip(reason="full-size variant: ./scripts/test --full")
    for item in items:
        if item.get_closest_marker("full") is not None:  # the marker, not an id that says full
            item.add_marker(skip)


@pytest.fixture(scope="session")
def full_size(request: pytest.FixtureRequest) -> bool:
    """True under --full: tests that have a full-size variant run it."""
    return bool(request.config.getoption("--full"))


KEPT_ARTIFACTS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "exynos-hil" / "test-artifacts"
"""Lowered artifacts kept between test sessions for the costliest lowering (the models suite's
reduced models: minutes of CPU): the artifact cache's key is the case's definition and source,
the flow, the chipset, torch's, ExecuTorch's and the SDK's versions and hil's lowering code, so a
change to any of them lowers again. `--full` (the nightly job) always lowers from scratch."""


@pytest.fixture(scope="session")
def kept_artifact_cache(full_size: bool, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """KEPT_ARTIFACTS, or a fresh folder under --full."""
    if full_size:
        return tmp_path_factory.mktemp("artifacts-from-scratch")
    KEPT_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return KEPT_ARTIFACTS


@pytest.fixture(scope="session", autouse=True)
def isolated_artifact_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every run in the tests uses one fresh artifact cache, never the user's."""
    patch = pytest.MonkeyPatch()
    patch.setenv("HIL_CACHE_DIR", str(tmp_path_factory.mktemp("artifact-cache")))
    yield
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def isolated_leases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Board leases of the tests' runs live in the session's own folder, not the host's, and
    no test inherits a lab adb server from the environment."""
    patch = pytest.MonkeyPatch()
    patch.setenv("HIL_LEASE_DIR", str(tmp_path_factory.mktemp("leases")))
    for name in SERVER_ENV:
        patch.delenv(name, raising=False)
    yield
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def isolated_adb_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every adb server the tests start (in this process, in `hil` children, in
    tests/adb_lab.py) keeps its files (`.android/adb.<port>`, `adbkey`) in the session's own
    folder, not the user's: HOME for Debian's adb 29, ANDROID_USER_HOME for newer ones. What
    else reads HOME keeps the user's: caches (XDG_CACHE_HOME) and docker's config."""
    real = Path.home()
    home = tmp_path_factory.mktemp("home")
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME") or str(real / ".cache"))
    if not os.environ.get("DOCKER_CONFIG") and (real / ".docker").is_dir():
        patch.setenv("DOCKER_CONFIG", str(real / ".docker"))
    patch.setenv("HOME", str(home))
    patch.setenv("ANDROID_USER_HOME", str(home / ".android"))
    yield
    patch.undo()


@pytest.fixture(scope="session")
def adb_server() -> Iterator[AdbServer]:
    """A private adb server (never on 5037) for the whole session."""
    with AdbServer(socket_timeout=30.0) as server:
        yield server


@pytest.fixture(scope="session")
def virtual_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualBoardProcess]:
    """A virtual E9955 board with its root in a temporary folder."""
    board = start_virtual_board(tmp_path_factory.mktemp("board"), "E9955", "hil-test-e9955")
    with board:
        yield board


@pytest.fixture(scope="session")
def board_device(adb_server: AdbServer, virtual_board: VirtualBoardProcess) -> adbutils.AdbDevice:
    """The virtual board as an adbutils device of the private server."""
    return adb_server.connect(virtual_board.address, timeout=30.0)
