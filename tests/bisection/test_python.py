"""`hil bisect --wheels`: the Python side, each candidate in its own uv environment made from
local wheels and layered on hil's, its cases lowered there.

The wheels are versions of the test rig's lowering package (hil/lower/rig.py), built here with
`pip wheel` from sources the test writes: version 1 lowers as ExecuTorch does, versions 2 and
3 scale every constant of the program by 1.05 after its references are computed (its numbers
come out wrong: FAIL_MISMATCH). The nights are `hil run`s in this process with a wheel on
sys.path (a wheel is a zip Python imports from)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hil.errors import UsageError
from hil.lower import cache as artifact_cache
from hil.lower.rig import RIG_DISTRIBUTION, RIG_MODULE
from hil.virtual.launcher import VirtualBoardProcess
from tests.bisection import SUITE, bisect, inventory, night

pytestmark = pytest.mark.slow

SETTINGS = {1: "", 2: "perturb,rel=0.05", 3: "perturb,rel=0.05"}


def _wheels(root: Path) -> Path:
    """`root/wheels/hil_rig_lowering-N-py3-none-any.whl` for every version of SETTINGS."""
    wheels = root / "wheels"
    builds = []
    for version, setting in SETTINGS.items():
        source = root / f"src-{version}"
        (source / RIG_MODULE).mkdir(parents=True)
        (source / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
            f'[project]\nname = "{RIG_DISTRIBUTION}"\nversion = "{version}"\n'
            f'[tool.setuptools]\npackages = ["{RIG_MODULE}"]\n')
        (source / RIG_MODULE / "__init__.py").write_text(f'"""The lowering rig, version {version}."""\n'
                                                          f"SETTING = {setting!r}\n")
        builds.append(subprocess.Popen([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                                        "--no-build-isolation", "-w", str(wheels), str(source)]))
    assert [build.wait(300) for build in builds] == [0] * len(SETTINGS)
    return wheels


@contextmanager
def _installed(wheel: Path) -> Iterator[None]:
    """The rig's wheel importable in this process (and its version in the cache's key)."""
    sys.path.insert(0, str(wheel))
    importlib.invalidate_caches()
    artifact_cache._environment_digest.cache_clear()
    try:
        yield
    finally:
        sys.path.remove(str(wheel))
        sys.modules.pop(RIG_MODULE, None)
        importlib.invalidate_caches()
        artifact_cache._environment_digest.cache_clear()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _wheels(tmp_path_factory.mktemp("rig"))


@pytest.fixture(scope="module")
def nights(boards: list[VirtualBoardProcess], wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """GOOD lowered with the rig's version 1, BAD with its version 3 (on boards without an
    earlier test's firmware faults)."""
    for board in boards:
        board.control("fault clear", applied_within=30)
    root = tmp_path_factory.mktemp("python-nights")
    files = {int(p.name.split("-")[1]): p for p in wheels.glob("*.whl")}
    found = []
    for name, version in (("good", 1), ("bad", 3)):
        with _installed(files[version]):
            found.append(night(boards, None, root / name))
    return found


@contextmanager
def _index(wheels: Path, root: Path) -> Iterator[str]:
    """A package index (PEP 503's simple layout) of the wheels, served over HTTP on 127.0.0.1."""
    import functools
    import http.server
    import shutil
    import threading

    project = root / "simple" / RIG_DISTRIBUTION
    project.mkdir(parents=True)
    links = []
    for wheel in sorted(wheels.glob("*.whl")):
        shutil.copy(wheel, project / wheel.name)
        links.append(f'<a href="{wheel.name}">{wheel.name}</a><br>')
    (project / "index.html").write_text("<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip and uv ask the test's index only (not the indexes and wheel folders configured here)."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    for name in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL",
                 "UV_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)


def test_a_package_indexs_versions_between_good_and_bad_are_the_candidates(
        wheels: Path, tmp_path: Path, local_only: None) -> None:
    """`--index-url URL --package NAME`: the versions pip lists, from GOOD's to BAD's, each
    installed from the index by uv into its own environment."""
    from hil.bisect.python_env import IndexVersions

    with _index(wheels, tmp_path / "index") as url:
        side = IndexVersions(url, RIG_DISTRIBUTION, {RIG_DISTRIBUTION: "1"}, {RIG_DISTRIBUTION: "3"},
                             tmp_path / "store", {})
        assert [c.label for c in side.candidates] == [f"{RIG_DISTRIBUTION} {v}" for v in (1, 2, 3)]
        assert side._environment(side.candidates[1]) is None  # noqa: SLF001 - the environment alone
        venv = side.folder(side.candidates[1]) / "venv"
        probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import importlib.metadata as m; "
                                f"print(m.version({RIG_DISTRIBUTION!r}))"], capture_output=True, text=True, check=True)
        assert probe.stdout.strip() == "2"
        with pytest.raises(UsageError, match="9 is not there"):
            IndexVersions(url, RIG_DISTRIBUTION, {RIG_DISTRIBUTION: "1"}, {RIG_DISTRIBUTION: "9"}, tmp_path, {})


def test_each_wheel_lowers_in_its_own_venv_and_the_first_bad_version_is_named(
        boards: list[VirtualBoardProcess], wheels: Path, nights: list[Path], tmp_path: Path) -> None:
    good, bad = (json.loads(path.read_text()) for path in nights)
    assert (good["run"]["packages"][RIG_DISTRIBUTION], bad["run"]["packages"][RIG_DISTRIBUTION]) == ("1", "3")
    assert [c["verdict"] for c in good["cases"] + bad["cases"]] == ["PASS", "FAIL_MISMATCH"]

    boards_yaml = inventory(tmp_path / "boards.yaml", boards[:1])
    code, doc = bisect("--good", str(nights[0]), "--bad", str(nights[1]), "--suite", str(SUITE),
                       "--wheels", str(wheels), "--inventory", str(boards_yaml), "--out", str(tmp_path / "out"))
    answer = doc["answer"]
    assert (code, answer["kind"], doc["factor"]) == (0, "culprit", "python"), answer["message"]
    assert (answer["culprit"]["label"], answer["parent"]["label"]) == (
        f"{RIG_DISTRIBUTION} 2", f"{RIG_DISTRIBUTION} 1")
    assert answer["confidence"]["culprit_failed"] == answer["confidence"]["culprit_runs"] == 3
    # every candidate: its own environment, layered on this one, with its own version of the rig
    store = Path(artifact_cache.default_cache_dir()) / "bisect" / "python"
    versions, ptes = {}, {}
    for row in doc["candidates"]["python"]:
        venv = store / row["key"] / "venv"
        assert (venv / "pyvenv.cfg").is_file() and list(venv.glob("lib/python3*/site-packages/_hil_base.pth"))
        probe = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import importlib.metadata as m, importlib.util as u; "
             f"print(m.version({RIG_DISTRIBUTION!r}), u.find_spec('torch').origin, u.find_spec('hil').origin)"],
            capture_output=True, text=True, check=True)
        version, torch_file, hil_file = probe.stdout.split()
        versions[row["label"]] = version
        assert not torch_file.startswith(str(venv)) and not hil_file.startswith(str(venv))  # layered
        ptes[version] = {p.read_bytes() for p in (store / row["key"] / "artifacts").rglob("model.pte")}
    assert versions == {f"{RIG_DISTRIBUTION} {v}": str(v) for v in SETTINGS}
    assert ptes["1"] and ptes["1"].isdisjoint(ptes["2"]) and ptes["2"] == ptes["3"]  # lowered apart
    culprit_runs = [run for run in doc["board_runs"] if run["builds"]["python"]["label"].endswith(" 2")]
    assert {run["verdicts"]["bisect.fp32.mlp"] for run in culprit_runs} == {"FAIL_MISMATCH"}


@pytest.mark.full
def test_the_same_bisection_from_a_package_index(boards: list[VirtualBoardProcess], wheels: Path,
                                                 nights: list[Path], tmp_path: Path, local_only: None) -> None:
    with _index(wheels, tmp_path / "index") as url:
        boards_yaml = inventory(tmp_path / "boards.yaml", boards[:1])
        code, doc = bisect("--good", str(nights[0]), "--bad", str(nights[1]), "--suite", str(SUITE),
                           "--index-url", url, "--package", RIG_DISTRIBUTION, "--inventory", str(boards_yaml),
                           "--out", str(tmp_path / "out"))
    assert (code, doc["answer"]["culprit"]["label"]) == (0, f"{RIG_DISTRIBUTION} 2")
    assert [c["source"] for c in doc["changed"]] == ["--index-url"]
