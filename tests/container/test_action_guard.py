"""action.yml's own guards, run by the FAKE runner (tests/container/action_runner.py) with a
crafted event (GITHUB_EVENT_NAME, GITHUB_EVENT_PATH) and no docker: a pull request from a
fork is refused with one line unless allow-untrusted says otherwise; an input's value is never
echoed inside a workflow command and cannot add lines to GITHUB_OUTPUT; the container gets no
host network when its boards do not need it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.container.action_runner import launcher_env, run_action
from tests.container.conftest import REPO

BASE = "lab/exynos-ci"


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace, temp = tmp_path / "ws", tmp_path / "runner-temp"
    workspace.mkdir()
    temp.mkdir()
    return workspace, temp


def _event(tmp_path: Path, name: str, head: str | None) -> dict[str, str]:
    payload = {"pull_request": {"head": {"repo": {"full_name": head} if head else None}}} if head != "" else {}
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return {**launcher_env(), "GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(path),
            "GITHUB_REPOSITORY": BASE}


def _errors(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("::error")]


@pytest.mark.parametrize("event", ["pull_request", "pull_request_target"])
def test_a_fork_pull_request_is_refused_with_one_line(dirs, tmp_path, event):
    workspace, temp = dirs
    result = run_action(REPO, {"boards": "virtual"}, workspace, temp, _event(tmp_path, event, "stranger/exynos-ci"))
    assert result.exit_code == 1
    (line,) = _errors(result.stdout)
    assert line.startswith("::error title=exynos-hil: untrusted pull request::refused: a " + event)
    assert "stranger/exynos-ci" in line and "allow-untrusted: true" in line
    assert "::group::" not in result.stdout and result.outputs["junit-path"] == ""  # nothing else ran


def test_a_deleted_fork_is_refused_too(dirs, tmp_path):
    workspace, temp = dirs
    result = run_action(REPO, {"boards": "virtual"}, workspace, temp, _event(tmp_path, "pull_request", None))
    assert result.exit_code == 1 and "from an unknown repository" in _errors(result.stdout)[0]


@pytest.mark.parametrize(("event", "head", "inputs"), [
    ("pull_request", BASE, {}),                                   # a branch of the repository
    ("push", "", {}),                                             # not a pull request
    ("pull_request", "stranger/exynos-ci", {"allow-untrusted": "true"}),  # told to
])
def test_trusted_runs_pass_the_guard(dirs, tmp_path, event, head, inputs):
    workspace, temp = dirs
    result = run_action(REPO, inputs, workspace, temp, _event(tmp_path, event, head))  # no board: next guard
    assert result.exit_code == 1
    assert _errors(result.stdout) == ["::error title=exynos-hil: no board::no boards and no inventory given "
                                      "(on-no-board: fail)"]
    if inputs:
        assert "::warning title=exynos-hil: untrusted pull request::running a pull request from stranger" in result.stdout


@pytest.mark.parametrize(("inputs", "message"), [
    ({"on-no-board": "maybe::warning title=x::y"}, "on-no-board must be fail, skip or virtual"),
    ({"board-access": "all$(id)"}, "board-access must be host-adb or usb"),
    ({"allow-untrusted": "yes please"}, "allow-untrusted must be true or false"),
    ({"timeout-minutes": "a[$(touch pwned)]"}, "timeout-minutes must be a whole number of minutes"),
    ({"junit-path": "out/junit.xml\nvirtual=true"}, "junit-path must be one line"),
])
def test_a_bad_input_is_named_never_echoed(dirs, tmp_path, inputs, message):
    workspace, temp = dirs
    result = run_action(REPO, {"boards": "virtual", **inputs}, workspace, temp, _event(tmp_path, "push", ""))
    assert result.exit_code == 1
    (line,) = _errors(result.stdout)
    assert line == f"::error title=exynos-hil::{message}"
    assert not (workspace / "pwned").exists()
    plan = temp / "output-2"
    assert not plan.exists() or plan.read_text() == ""  # the plan wrote nothing to GITHUB_OUTPUT


@pytest.mark.parametrize(("boards", "access"), [
    ("virtual", "none"),
    ("virtual:2 10.0.0.7:5555", "network"),
    ("10.0.0.7:5555,lab-board.example:5555", "network"),
    ("R3CX40ABCDE", "host-adb"),             # a USB board: the host's adb server
    ("127.0.0.1:5555", "host-adb"),          # on the host's loopback
])
def test_the_container_gets_the_least_network_its_boards_need(dirs, tmp_path, boards, access):
    workspace, temp = dirs
    # `launcher: none-such` stops the action right after the plan: only the plan is looked at
    result = run_action(REPO, {"boards": boards, "launcher": "none-such"}, workspace, temp,
                        _event(tmp_path, "push", ""))
    assert "launcher must be pip, wheelhouse or image" in result.stdout
    plan = (temp / "output-2").read_text()  # the plan step's GITHUB_OUTPUT
    assert f"access={access}\n" in plan
