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
from tests.container.action_runner import ActionResult, launcher_env, run_action
from tests.container.conftest import REPO, timed

pytestmark = pytest.mark.slow
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A lab server with three virtual boards: `good` (connected by the lab), `bare` (no
    ENN vendor library: preflight refuses it) and `sick` (every runner exec drops the link:
    infrastructure errors once it is in use)."""
    root = tmp_path_factory.mktemp("action-lab")
    with LabServer() as server, \
            start_virtual_board(root / "good", "E9955", "act-good") as good, \
            start_virtual_board(root / "bare", "E9955", "act-bare", ["--no-vendor-lib"]) as bare, \
            start_virtual_board(root / "sick", "E9955", "act-sick",
                                ["--fault", "drop,on=exec,times=0"]) as sick:
        server.connect(good.address)
        yield {"server": server, "good": good, "bare": bare, "sick": sick,
               "runner_temp": tmp_path_factory.mktemp("action-runner-temp")}


@dataclass
class Outcome:
    result: ActionResult
    workspace: Path

    def results(self, relative: str = "hil-out/results.json") -> dict[str, Any]:
        return json.loads((self.workspace / relative).read_text())


def run(engine, host_image, lab, tmp_path: Path, boards: str, policy: str,
        suite: str = "tiny.yaml") -> Outcome:
    """The action with `boards` and `on-no-board: policy`; one launcher venv for the module."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for name in ("tiny.yaml", "user_models.py"):
        shutil.copy(FIXTURES / name, workspace / name)
    env = dict(launcher_env(), DOCKER_HOST=engine.host,
               ANDROID_ADB_SERVER_PORT=str(lab["server"].port))
    with timed(f"action with boards ({policy})"):
        result = run_action(REPO, {"boards": boards, "on-no-board": policy, "suite": suite,
                                   "image": host_image.tag}, workspace, lab["runner_temp"], env)
    return Outcome(result, workspace)


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


@pytest.mark.parametrize("policy", ["fail", "skip", "virtual"])
def test_no_usable_board_at_the_start(engine, host_image, lab, tmp_path, policy):
    outcome = run(engine, host_image, lab, tmp_path, lab["bare"].address, policy)
    result = outcome.result
    if policy == "fail":
        assert result.exit_code == 2, shown(outcome)
        assert "::error title=exynos-hil: no usable board::none of the boards was usable" in result.stdout
        assert outcome.results()["run"]["usable_boards"] == 0
    elif policy == "skip":
        assert result.exit_code == 0, shown(outcome)
        assert "::warning title=exynos-hil: no usable board::" in result.stdout
        assert "NOT run" in result.stdout
        assert "**Not run: no usable board** (on-no-board: skip)" in result.summary
        assert outcome.results()["run"]["usable_boards"] == 0
    else:
        assert result.exit_code == 0, shown(outcome)
        assert "running on a VIRTUAL board instead (on-no-board: virtual)" in result.stdout
        assert "**No usable board**" in result.summary and "VIRTUAL board instead" in result.summary
        kept = outcome.results("hil-out/no-usable-board/results.json")  # the boards' own record
        assert kept["run"]["usable_boards"] == 0
        assert "vendor library" in kept["run"]["boards"][0]["error"]
        virtual = outcome.results()
        assert virtual["run"]["virtual"] is True
        assert {c["verdict"] for c in virtual["cases"]} == {"PASS"}
        assert "--board virtual" in result.summary  # the reproduce line is the virtual run
    assert lab["server"].devices() == {lab["good"].address: "device"}  # hil's connection undone


@pytest.mark.parametrize("policy", ["fail", "skip", "virtual"])
def test_infra_errors_on_a_board_that_ran_stay_red(engine, host_image, lab, tmp_path, policy):
    outcome = run(engine, host_image, lab, tmp_path, lab["sick"].address, policy)
    result = outcome.result
    assert result.exit_code == 2, shown(outcome)
    assert "::error title=exynos-hil: infrastructure errors::" in result.stdout
    assert "VIRTUAL board instead" not in result.stdout + result.summary
    assert "Not run" not in result.summary
    results = outcome.results()  # the sick board's own results, not overwritten
    assert results["run"]["usable_boards"] == 1 and results["run"]["virtual"] is True
    assert {c["verdict"] for c in results["cases"]} == {"ERROR_INFRA"}
    assert {b["name"] for b in results["run"]["boards"]} == {lab["sick"].address}
    assert not (outcome.workspace / "hil-out" / "no-usable-board").exists()
    assert int(result.outputs["errors"]) == len(results["cases"])
    assert lab["server"].devices() == {lab["good"].address: "device"}  # hil's connection undone
