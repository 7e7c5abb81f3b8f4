"""Boards from a labgrid lab: a real coordinator and exporter on loopback (tests/pool/labgrid_lab.py)
export two virtual boards as places tagged soc=e9955; `hil run --labgrid` reserves, acquires,
runs, and gives them back. One lab for the module; each test leaves every place free."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from hil.board.labgrid_spec import parse_labgrid_spec
from hil.cases import load_suite
from hil.devicefarm.session import slug
from hil.interrupts import Stop
from hil.lower.cache import default_cache_dir
from hil.pool.labgrid import Coordinator, LabgridSource, place_rows
from hil.run import Run, RunOptions
from tests.devicefarm.conftest import df, poll_assigned
from tests.pool.labgrid_lab import LabgridLab, ser2net_available
from tests.processes import stop_process
from tests.results_schema import assert_valid_results

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny.yaml"

pytestmark = [
    pytest.mark.slow,
    # in CI (scripts/setup installs ser2net) a missing ser2net fails the module instead
    pytest.mark.skipif(not ser2net_available() and not os.environ.get("CI"),
                       reason="ser2net not installed (scripts/setup installs it)"),
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabgridLab]:
    the_lab = LabgridLab(tmp_path_factory.mktemp("labgrid"))
    try:
        yield the_lab
    finally:
        the_lab.stop()


@pytest.fixture(autouse=True)
def places_freed(lab: LabgridLab) -> Iterator[None]:
    """Whatever a failed test left held or reserved is given back, so the next one starts clean."""
    yield
    coordinator = Coordinator(lab.address, "cleanup", "pytest")
    try:
        places, _ = coordinator.snapshot()
        for name, place in places.items():
            if place["acquired"]:
                coordinator.release_from(name, place["acquired"])
        for reservation in coordinator.reservations():
            coordinator.cancel(reservation.token)
    finally:
        coordinator.close()


def _env(lab_host: str, lease_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LG_", "ANDROID_ADB_SERVER"))}
    env.update(LG_HOSTNAME=lab_host, HIL_LEASE_DIR=str(lease_dir), HIL_CACHE_DIR=str(default_cache_dir()))
    return env


def _hil_run(lab: LabgridLab, out: Path, *args: str, host: str = "ci-1",
             background: bool = False) -> Any:
    out.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "hil", "run", "--labgrid", lab.address, "--out", str(out), *args]
    env = _env(host, out / "leases")
    if background:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=(out / "stdout").open("wb"),
                                stderr=(out / "stderr").open("wb"), start_new_session=True)
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _all_free(lab: LabgridLab) -> None:
    """Every place released, no reservation left."""
    rows = place_rows(lab.address)
    assert [r["holder"] for r in rows] == [None] * len(lab.places), rows
    assert [r["reservation"] for r in rows] == [None] * len(lab.places), rows
    assert _reservations(lab) == []


def _reservations(lab: LabgridLab) -> list[str]:
    """Every reservation's owner, as the coordinator lists them."""
    coordinator = Coordinator(lab.address, "check", "pytest")
    try:
        return [r.owner for r in coordinator.reservations()]
    finally:
        coordinator.close()


def _finished(process: subprocess.Popen[bytes], out: Path) -> subprocess.CompletedProcess[str]:
    """A background run's end, as subprocess.run would give it."""
    try:
        process.wait(timeout=300)
    finally:
        stop_process(process)
    return subprocess.CompletedProcess(process.args, process.returncode, (out / "stdout").read_text(),
                                       (out / "stderr").read_text())


def _results(out: Path) -> dict[str, Any]:
    assert_valid_results(out / "results.json")
    return json.loads((out / "results.json").read_text())


def test_smoke_runs_on_both_places_and_gives_them_back(lab: LabgridLab, tmp_path: Path) -> None:
    done = _hil_run(lab, tmp_path, "--board", "labgrid:soc=e9955*2", "--suite", "smoke")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = _results(tmp_path)
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * 7
    boards = {b["name"]: b for b in doc["run"]["boards"]}
    assert set(boards) == set(lab.places)
    for name, board in boards.items():
        assert board["labgrid"]["place"] == name
        assert board["labgrid"]["exporter"] == "lab1" and board["labgrid"]["host"] == "127.0.0.1"
        assert board["labgrid"]["coordinator"] == lab.address
        assert re.fullmatch(r"ci-1/.+\.hil-\d+", board["labgrid"]["holder"])
        assert board["labgrid"]["reservation"]
    assert {c["board"] for c in doc["cases"]} <= set(lab.places)
    # the console came through the exporter's ser2net (RFC 2217): the runner lines are there
    consoles = "".join((tmp_path / "console" / f"{p}.log").read_text(errors="replace") for p in lab.places)
    assert "runner pid" in consoles
    _all_free(lab)
    # and as labgrid's own client sees it: both places there, no holder, no reservation
    places = lab.client("-v", "places")
    assert all(f"Place '{p}'" in places for p in lab.places), places
    assert places.count("acquired: None") == len(lab.places), places
    assert "Reservation" not in lab.client("reservations")


def test_a_place_and_a_virtual_board_make_one_pool(lab: LabgridLab, tmp_path: Path) -> None:
    """A labgrid place and a board of the command line in one run: both come up in the pool,
    the cases pass, and the place is given back."""
    done = _hil_run(lab, tmp_path, "--board", "labgrid:soc=e9955", "--board", "virtual",
                    "--suite", str(TINY), "--flow", "portable")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = _results(tmp_path)
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * 3
    boards = doc["run"]["boards"]
    assert not [b for b in boards if "error" in b], boards
    assert sorted(bool(b.get("labgrid")) for b in boards) == [False, True]
    assert [b["name"] for b in boards if not b.get("labgrid")] == ["virtual-0"]
    assert doc["run"]["usable_boards"] == 2
    _all_free(lab)


def test_two_hosts_never_share_a_place(lab: LabgridLab, tmp_path: Path) -> None:
    runs = [_hil_run(lab, tmp_path / host, "--board", "labgrid:soc=e9955*2", "--suite", str(TINY),
                     "--flow", "portable", "--board-wait", "120",
                     host=host, background=True)
            for host in ("host-a", "host-b")]
    for process in runs:
        try:
            process.wait(timeout=300)
        finally:
            stop_process(process)
    intervals: dict[str, list[tuple[datetime, datetime, str]]] = {}
    for host, process in zip(("host-a", "host-b"), runs, strict=True):
        out = tmp_path / host
        assert process.returncode == 0, (out / "stderr").read_text()[-3000:]
        doc = _results(out)
        assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * 3
        assert all(b["labgrid"]["holder"].startswith(f"{host}/") for b in doc["run"]["boards"])
        for case in doc["cases"]:
            intervals.setdefault(case["board"], []).append(
                (datetime.fromisoformat(case["started"]), datetime.fromisoformat(case["finished"]), host))
    for place, spans in intervals.items():
        spans.sort()
        for (_, end, host), (start, _, other) in zip(spans, spans[1:], strict=False):
            assert host == other or end <= start, f"{place}: {host} and {other} overlap"
    _all_free(lab)


def test_a_killed_runs_place_is_taken_over_at_once(lab: LabgridLab, tmp_path: Path) -> None:
    victim = _hil_run(lab, tmp_path / "victim", "--board", "labgrid:place=e9955-a", "--suite", str(TINY),
                      "--flow", "portable", "--iterations", "200", host="ci-9", background=True)
    try:
        deadline = time.monotonic() + 120
        while not any(r["place"] == "e9955-a" and (r["holder"] or "").endswith(f".hil-{victim.pid}")
                      for r in place_rows(lab.address)):
            assert victim.poll() is None, (tmp_path / "victim" / "stderr").read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.5)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
    finally:
        stop_process(victim)
        try:
            os.killpg(victim.pid, signal.SIGKILL)  # its adb server and workers
        except ProcessLookupError:
            pass
    # as a hil of host ci-9 sees it: the place is held by a dead run
    listing = subprocess.run([sys.executable, "-m", "hil", "boards", "--labgrid", lab.address], cwd=REPO,
                             env=_env("ci-9", tmp_path / "leases"), capture_output=True, text=True, timeout=60)
    assert re.search(rf"e9955-a\s+soc=e9955\s+ci-9/\S+\.hil-{victim.pid}\s+no \(stale\)", listing.stdout), \
        listing.stdout + listing.stderr
    done = _hil_run(lab, tmp_path / "next", "--board", "labgrid:place=e9955-a", "--suite", str(TINY),
                    "--flow", "portable", "--board-wait", "60", host="ci-9")
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(rf"e9955-a: holder ci-9/\S+\.hil-{victim.pid} is dead", done.stderr), done.stderr
    waited = _results(tmp_path / "next")["run"]["boards"][0]["labgrid"]["waited_s"]
    assert waited < 10, waited
    _all_free(lab)


def test_no_coordinator_no_place_and_all_held_are_infra_errors(lab: LabgridLab, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = ("--suite", str(TINY), "--flow", "portable")
    closed = _hil_run(lab, tmp_path / "closed", "--labgrid", "127.0.0.1:9", "--board", "labgrid:soc=e9955",
                      *tiny, background=True)
    none = _hil_run(lab, tmp_path / "none", "--board", "labgrid:soc=e9999", *tiny, background=True)
    monkeypatch.setenv("LG_HOSTNAME", "holder-host")
    holder = LabgridSource(lab.address, [parse_labgrid_spec("labgrid:soc=e9955*2")])
    assert len(holder.open(30, Stop())) == 2
    try:
        busy = _hil_run(lab, tmp_path / "busy", "--board", "labgrid:soc=e9955", "--board-wait", "3", *tiny,
                        background=True)
        # SIGTERM while waiting: the reservation is cancelled on the way out
        waiting = _hil_run(lab, tmp_path / "term", "--board", "labgrid:soc=e9955", "--board-wait", "120",
                           *tiny, background=True)
        busy = _finished(busy, tmp_path / "busy")
        try:
            deadline = time.monotonic() + 60
            while not any(o.endswith(f".hil-{waiting.pid}") for o in _reservations(lab)):
                assert waiting.poll() is None and time.monotonic() < deadline
                time.sleep(0.3)
            waiting.send_signal(signal.SIGTERM)
            assert waiting.wait(timeout=30) == 130
        finally:
            stop_process(waiting)
        assert not any(o.endswith(f".hil-{waiting.pid}") for o in _reservations(lab))
    finally:
        holder.close()
    closed, none = (_finished(process, tmp_path / name) for process, name in ((closed, "closed"), (none, "none")))
    for done, out, line in (
        (closed, "closed", r"labgrid coordinator 127\.0\.0\.1:9: unreachable"),
        (none, "none", r"no place has soc=e9999 \(2 place\(s\): e9955-a, e9955-b\)"),
        (busy, "busy", r"no place free within 3 s \(--board-wait\): soc=e9955: e9955-a held by holder-host/"),
    ):
        assert done.returncode == 2, (out, done.stdout[-2000:], done.stderr[-2000:])
        errors = [ln for ln in done.stderr.splitlines() if "ERROR" in ln]
        assert len(errors) == 1 and re.search(line, errors[0]), (out, done.stderr)
        doc = _results(tmp_path / out)
        assert doc["run"]["usable_boards"] == 0
        assert "lowered" not in done.stdout  # nothing lowered in vain
    _all_free(lab)


def test_a_power_fault_climbs_the_ladder_through_labgrid_power(lab: LabgridLab, tmp_path: Path) -> None:
    source = LabgridSource(lab.address, [parse_labgrid_spec("labgrid:place=e9955-a")])
    board = lab.boards[0]
    board.control("fault freeze,on=exec,times=1")
    try:
        out = tmp_path / "out"
        options = RunOptions(
            cases=tuple(load_suite(str(TINY))), boards=(), flow="portable", chipset="E9955",
            out_dir=out, results_path=out / "results.json", junit_path=out / "junit.xml",
            cache_dir=default_cache_dir(), jobs=1, sources=(source,), timeout_s=60.0,
            idle_timeout_s=3.0, boot_timeout_s=30.0, retries=1, board_wait_s=30.0,
        )
        Run(options).execute()
    finally:
        board.control("fault clear")
    doc = json.loads((out / "results.json").read_text())
    chains = ["→".join([a["verdict"] for a in c.get("earlier_attempts") or []] + [c["verdict"]])
              for c in doc["cases"]]
    assert sorted(chains) == ["ERROR_INFRA→PASS", "PASS", "PASS"], chains
    (record,) = doc["run"]["boards"]
    steps = [(s["step"], s["recovered"]) for s in record["recovery"]]
    assert steps[-1] == ("power-cycle", True), record["recovery"]
    assert record["labgrid"]["place"] == "e9955-a"
    _all_free(lab)


def test_devicefarm_cli_holds_a_place_until_released(lab: LabgridLab, tmp_path: Path) -> None:
    """Upstream's -Q / -C / -E "ls /" / -d with HIL_BOARD a labgrid place: the holder reserves
    and acquires it (holder HOST/USER.hil-PID of the holder), -E runs on its board, -d gives the
    place back with no reservation left."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "devicefarm-cli").write_text(f"#!/bin/sh\nexec {sys.executable} -m hil.devicefarm \"$@\"\n")
    (bin_dir / "devicefarm-cli").chmod(0o755)
    env = {**_env("ci-2", tmp_path / "leases"), "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "PYTHONPATH": str(REPO), "HIL_DEVICEFARM_SESSION": "lab-job", "HIL_DEVICEFARM_DIR":
           str(tmp_path / "sessions"), "HIL_BOARD": "labgrid:place=e9955-b", "HIL_LABGRID": lab.address}
    try:
        assert df(env, "-Q").returncode == 0
        assert poll_assigned(env).strip() == "assigned e9955-b"
        holder = json.loads((tmp_path / "sessions" / slug("lab-job") / "holder.json").read_text())
        rows = {r["place"]: r for r in place_rows(lab.address)}
        assert rows["e9955-b"]["holder"].endswith(f".hil-{holder['pid']}"), rows
        assert rows["e9955-a"]["holder"] is None
        ls = df(env, '-E "ls /"')
        assert ls.returncode == 0 and "data" in ls.stdout.split(), ls.stderr
    finally:
        released = df(env, "-d")
    assert released.returncode == 0, released.stderr
    _all_free(lab)


def test_the_pytest_fixture_takes_a_place_with_hil_labgrid(lab: LabgridLab, tmp_path: Path) -> None:
    """`pytest -p hil.pytest --hil-board labgrid:place=NAME --hil-labgrid HOST:PORT`: the user's
    test runs a program on the place's board, which names the place; the place is given back."""
    (tmp_path / "test_user.py").write_text(
        "import torch\n"
        "from executorch.exir import to_edge_transform_and_lower\n\n\n"
        "class Add(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x + 1.5\n\n\n"
        "def test_add(hil_board):\n"
        "    x = torch.arange(6, dtype=torch.float32)\n"
        "    program = to_edge_transform_and_lower(torch.export.export(Add(), (x,))).to_executorch()\n"
        "    (out,) = hil_board.run(program, [x])\n"
        "    assert torch.equal(out, x + 1.5)\n")
    junit = tmp_path / "junit.xml"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "hil.pytest", "-p", "no:cacheprovider", "-q",
         "--hil-board", "labgrid:place=e9955-a", "--hil-labgrid", lab.address, f"--junitxml={junit}",
         "test_user.py"],
        cwd=tmp_path, env={**_env("ci-3", tmp_path / "leases"), "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).iter("property")}
    assert properties["hil_board"] == "e9955-a"
    assert "Model file" in properties["hil_runner_log"]
    _all_free(lab)


def test_a_stale_holder_is_said_released_only_when_the_place_is_free(
        lab: LabgridLab, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The coordinator answers release-from with OK when another holder has the place by then,
    releasing nothing (remote/coordinator.py ReleasePlace). The race made certain: between
    hil's look at the place and its release-from, the dead run's place is released and taken
    by a live one; hil reads the place again and does not say it freed it."""
    monkeypatch.setenv("LG_HOSTNAME", "ci-10")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a PID of this host whose process has ended
    dead = f"ci-10/pytest.hil-{gone.pid}"
    stale = Coordinator(lab.address, "ci-10", f"pytest.hil-{gone.pid}")
    stale.acquire("e9955-a")
    stale.close()
    source = LabgridSource(lab.address, [parse_labgrid_spec("labgrid:place=e9955-a")])
    coordinator = source._coordinator = Coordinator(lab.address, source.host, source.user)
    release = coordinator.release_from
    other = Coordinator(lab.address, "ci-11", f"pytest.hil-{os.getpid()}")

    def taken_first(place: str, holder: str) -> None:
        other.release_from(place, holder)
        other.acquire(place)
        release(place, holder)  # OK from the coordinator, nothing released

    try:
        monkeypatch.setattr(coordinator, "release_from", taken_first)
        with caplog.at_level("WARNING", logger="hil.pool.labgrid"):
            assert source.take_over_stale() == []
        rows = {r["place"]: r for r in place_rows(lab.address)}
        assert rows["e9955-a"]["holder"] == other.holder
        said = [r.getMessage() for r in caplog.records if "e9955-a" in r.getMessage()]
        assert said == [f"labgrid: e9955-a: holder {dead} is dead, but {other.holder} holds the "
                        "place by now: not released"], said
        # and without the race: the dead holder's place is freed, and said so
        other.release_from("e9955-a", other.holder)
        stale = Coordinator(lab.address, "ci-10", f"pytest.hil-{gone.pid}")
        stale.acquire("e9955-a")
        stale.close()
        monkeypatch.setattr(coordinator, "release_from", release)
        caplog.clear()
        with caplog.at_level("WARNING", logger="hil.pool.labgrid"):
            assert source.take_over_stale() == ["e9955-a"]
        assert [r.getMessage() for r in caplog.records] == [
            f"labgrid: e9955-a: holder {dead} is dead (no such process on ci-10): released"]
        assert {r["place"]: r["holder"] for r in place_rows(lab.address)}["e9955-a"] is None
    finally:
        other.close()
        source.close()
