"""action.yml with boards, run by the FAKE runner (tests/container/action_runner.py) in the
session's image, in `host-adb` mode against a lab adb server on this host (a real adb server
started by the test; its port reaches the container as ANDROID_ADB_SERVER_PORT, passed by
name, so hil in the container is a client of the host's server).

- The smoke suite on a virtual board that the lab `adb connect`ed: passes in the container
  and leaves the lab's server as it was (same pid, the board still listed).
- The `on-no-board` table for given boards: it applies only when none was usable at the
  start (results.json run.usable_boards == 0); infrastructure errors on a board that ran
  keep the step red whatever the policy, and a real board's results are never overwritten.
  (No board given at all: tests/container/test_action.py.)

One real container run per outcome (passed; no usable board; infrastructure errors after a
board ran, each with on-no-board: fail, where the action leaves hil's files as they are).
Every policy of each outcome is then checked with a STUB of the docker step
(action_runner.STUB_HIL) that replays what the real run wrote and returned: the policies
are action.yml's bash after the container exits, and a container adds nothing to them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hil.virtual.launcher import start_virtual_board
from tests.adb_lab import LabServer
from tests.container.action_runner import ActionResult, Replay, launcher_env, run_action, stub_launcher
from tests.container.conftest import REPO, ActionRun, timed

pytestmark = pytest.mark.slow
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, action_runner_temp: Path) -> Iterator[dict[str, Any]]:
    """A lab server with three virtual boards: `good` (connected by the lab), `bare` (no
    ENN vendor library: preflight refuses it) and `sick` (every runner exec drops the link:
    infrastructure errors once it is in use)."""
    root = tmp_path_factory.mktemp("action-lab")
    with LabServer() as server, \
            start_virtual_board(root / "good", "E9955", "act-good", trusted_keys=[server.public_key]) as good, \
            start_virtual_board(root / "bare", "E9955", "act-bare", ["--no-vendor-lib"],
                                trusted_keys=[server.public_key]) as bare, \
            start_virtual_board(root / "sick", "E9955", "act-sick", ["--fault", "drop,on=exec,times=0"],
                                trusted_keys=[server.public_key]) as sick:
        server.connect(good.address)
        yield {"server": server, "good": good, "bare": bare, "sick": sick,
               "runner_temp": action_runner_temp}


@dataclass
class Outcome:
    result: ActionResult
    workspace: Path

    def results(self, relative: str = "hil-out/results.json") -> dict[str, Any]:
        return json.loads((self.workspace / relative).read_text())


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for name in ("tiny.yaml", "user_models.py"):
        shutil.copy(FIXTURES / name, workspace / name)
    return workspace


def run(engine, host_image, lab, tmp_path: Path, boards: str, policy: str,
        suite: str = "tiny.yaml") -> Outcome:
    """The action with `boards` and `on-no-board: policy`, in the container (real); one
    launcher venv for the module."""
    workspace = _workspace(tmp_path)
    env = dict(launcher_env(), DOCKER_HOST=engine.host,
               ANDROID_ADB_SERVER_PORT=str(lab["server"].port))
    with timed(f"action with boards ({policy})"):
        result = run_action(REPO, {"boards": boards, "on-no-board": policy, "suite": suite,
                                   "image": host_image.tag}, workspace, lab["runner_temp"], env)
    return Outcome(result, workspace)


def replay_of(outcome: Outcome) -> Replay:
    """What the container's `hil run` returned and wrote in a real run with on-no-board: fail
    (the action exits with hil's code and leaves its files)."""
    return Replay(outcome.result.exit_code, (outcome.workspace / "hil-out/results.json").read_bytes(),
                  (outcome.workspace / "hil-out/junit.xml").read_bytes())


def stubbed(tmp_path: Path, boards: str, policy: str, board: Replay, virtual: Replay) -> tuple[Outcome, list[str]]:
    """The action with `boards` and `on-no-board: policy`, its docker step a stub replaying
    `board` (and `virtual` for a virtual fallback); also the replicate calls it made."""
    workspace = _workspace(tmp_path)
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    env = dict(launcher_env(), **stub_launcher(temp, board, virtual, REPO))
    result = run_action(REPO, {"boards": boards, "on-no-board": policy, "suite": "tiny.yaml",
                               "image": "exynos-hil:host-stub"}, workspace, temp, env)
    calls = (temp / "calls").read_text().splitlines() if (temp / "calls").exists() else []
    return Outcome(result, workspace), calls


def container_runs(calls: list[str]) -> list[str]:
    """The stubbed `hil replicate ... -- run ...` calls (not --print)."""
    return [call for call in calls if " -- run " in call and not call.startswith("--print")]


@pytest.fixture(scope="module")
def virtual_replay(action_smoke_run: ActionRun) -> Replay:
    """The session's real virtual run in the container (the action with no board, on-no-board:
    virtual): what the stub replays for a virtual fallback."""
    out = action_smoke_run.workspace / "hil-out"
    return Replay(action_smoke_run.result.exit_code, (out / "results.json").read_bytes(),
                  (out / "junit.xml").read_bytes())


@pytest.fixture(scope="module")
def no_usable_board(engine, host_image, lab, tmp_path_factory) -> Outcome:
    """The one real container run of "no usable board at the start": the `bare` board
    (no ENN vendor library: preflight refuses it), on-no-board: fail."""
    return run(engine, host_image, lab, tmp_path_factory.mktemp("no-usable"), lab["bare"].address, "fail")


@pytest.fixture(scope="module")
def infra_errors(engine, host_image, lab, tmp_path_factory) -> Outcome:
    """The one real container run of "a board was usable, then infrastructure errors": the
    `sick` board (every runner exec drops the link), on-no-board: fail."""
    return run(engine, host_image, lab, tmp_path_factory.mktemp("infra"), lab["sick"].address, "fail")


def shown(outcome: Outcome) -> str:
    return outcome.result.stdout[-4000:] + outcome.result.stderr[-4000:]


def test_smoke_in_the_container_through_the_hosts_lab_server(engine, host_image, lab, tmp_path):
    server, good = lab["server"], lab["good"]
    pid = server.pid
    outcome = run(engine, host_image, lab, tmp_path, good.address, "skip", suite="smoke")
    assert outcome.result.exit_code == 0, shown(outcome)
    results = outcome.results()
    assert results["run"]["usable_boards"] == 1
    (board,) = results["run"]["boards"]
    assert board["adb_server"] == server.address  # the host's server, not a private one
    assert len(results["cases"]) == 7 and {c["verdict"] for c in results["cases"]} == {"PASS"}
    assert int(outcome.result.outputs["passed"]) == 7
    assert "no usable board" not in outcome.result.stdout + outcome.result.summary
    assert server.pid == pid and server.alive()
    assert server.devices() == {good.address: "device"}
    assert "ANDROID_ADB_SERVER_PORT" in outcome.result.summary  # the docker run line passes it


def test_no_usable_board_in_the_container_is_exit_2_with_usable_boards_0(no_usable_board, lab):
    outcome, result = no_usable_board, no_usable_board.result
    assert result.exit_code == 2, shown(outcome)
    assert "::error title=exynos-hil: no usable board::none of the boards was usable" in result.stdout
    results = outcome.results()
    assert results["run"]["usable_boards"] == 0
    assert "vendor library" in results["run"]["boards"][0]["error"]
    assert lab["server"].devices() == {lab["good"].address: "device"}  # hil's connection undone


def test_infra_errors_in_the_container_are_exit_2_with_the_boards_results(infra_errors, lab):
    outcome, result = infra_errors, infra_errors.result
    assert result.exit_code == 2, shown(outcome)
    assert "::error title=exynos-hil: infrastructure errors::" in result.stdout
    results = outcome.results()
    assert results["run"]["usable_boards"] == 1
    assert {c["verdict"] for c in results["cases"]} == {"ERROR_INFRA"}
    assert {b["name"] for b in results["run"]["boards"]} == {lab["sick"].address}
    assert int(result.outputs["errors"]) == len(results["cases"])
    assert lab["server"].devices() == {lab["good"].address: "device"}  # hil's connection undone


@pytest.mark.parametrize("policy", ["fail", "skip", "virtual"])
def test_no_usable_board_at_the_start(no_usable_board, virtual_replay, lab, tmp_path, policy):
    """Every policy on what the real container run returned (stubbed docker step)."""
    bare = lab["bare"].address
    outcome, calls = stubbed(tmp_path, bare, policy, replay_of(no_usable_board), virtual_replay)
    result = outcome.result
    runs = container_runs(calls)
    assert f"--board {bare}" in runs[0]
    if policy == "fail":
        assert result.exit_code == 2, shown(outcome)
        assert "::error title=exynos-hil: no usable board::none of the boards was usable" in result.stdout
        assert outcome.results()["run"]["usable_boards"] == 0
        assert len(runs) == 1
    elif policy == "skip":
        assert result.exit_code == 0, shown(outcome)
        assert "::warning title=exynos-hil: no usable board::" in result.stdout
        assert "NOT run" in result.stdout
        assert "**Not run: no usable board** (on-no-board: skip)" in result.summary
        assert outcome.results()["run"]["usable_boards"] == 0
        assert len(runs) == 1
    else:
        assert result.exit_code == 0, shown(outcome)
        assert "running on a VIRTUAL board instead (on-no-board: virtual)" in result.stdout
        assert "**No usable board**" in result.summary and "VIRTUAL board instead" in result.summary
        kept = outcome.results("hil-out/no-usable-board/results.json")  # the boards' own record
        assert kept["run"]["usable_boards"] == 0
        assert "vendor library" in kept["run"]["boards"][0]["error"]
        assert (outcome.workspace / "hil-out/no-usable-board/junit.xml").is_file()
        virtual = outcome.results()
        assert virtual["run"]["virtual"] is True
        assert {c["verdict"] for c in virtual["cases"]} == {"PASS"}
        assert len(runs) == 2  # the fallback: the same run without the boards, on a virtual board
        assert bare not in runs[1] and runs[1].endswith("--board virtual")
        assert "--suite tiny.yaml" in runs[1]
        assert "--board virtual" in result.summary  # the reproduce line is the virtual run
        assert bare not in result.summary.split("Reproduce this run locally")[1]


@pytest.mark.parametrize("policy", ["fail", "skip", "virtual"])
def test_infra_errors_on_a_board_that_ran_stay_red(infra_errors, virtual_replay, lab, tmp_path, policy):
    """Every policy on what the real container run returned (stubbed docker step)."""
    sick = lab["sick"].address
    outcome, calls = stubbed(tmp_path, sick, policy, replay_of(infra_errors), virtual_replay)
    result = outcome.result
    assert result.exit_code == 2, shown(outcome)
    assert "::error title=exynos-hil: infrastructure errors::" in result.stdout
    assert "VIRTUAL board instead" not in result.stdout + result.summary
    assert "Not run" not in result.summary
    results = outcome.results()  # the sick board's own results, not overwritten
    assert results["run"]["usable_boards"] == 1 and results["run"]["virtual"] is True
    assert {c["verdict"] for c in results["cases"]} == {"ERROR_INFRA"}
    assert {b["name"] for b in results["run"]["boards"]} == {sick}
    assert not (outcome.workspace / "hil-out" / "no-usable-board").exists()
    assert int(result.outputs["errors"]) == len(results["cases"])
    runs = container_runs(calls)
    assert len(runs) == 1 and f"--board {sick}" in runs[0]  # no second run
