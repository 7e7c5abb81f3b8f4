"""action.yml run by a FAKE runner (tests/container/action_runner.py; no GitHub runner can
run here): the no-board policies, the masked key, and a whole run on a virtual board in the
image built by the session (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.container.action_runner import launcher_env, run_action
from tests.container.conftest import ACTION_KEY, REPO


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    return workspace, temp


def test_no_board_fails_by_default(dirs):
    workspace, temp = dirs
    result = run_action(REPO, {}, workspace, temp, launcher_env())
    assert result.exit_code == 1
    assert "::error title=exynos-hil: no board::" in result.stdout
    assert not (temp / "exynos-hil-launcher").exists()  # stopped before any set-up


def test_no_board_skip_is_a_visible_warning_not_a_silent_green(dirs):
    workspace, temp = dirs
    result = run_action(REPO, {"on-no-board": "skip"}, workspace, temp, launcher_env())
    assert result.exit_code == 0
    assert "::warning title=exynos-hil: no board::" in result.stdout
    assert "Not run: no board" in result.summary
    assert result.outputs["passed"] == ""


def test_bad_policy_is_an_error(dirs):
    workspace, temp = dirs
    result = run_action(REPO, {"on-no-board": "maybe"}, workspace, temp, launcher_env())
    assert result.exit_code == 1
    assert "on-no-board must be fail, skip or virtual" in result.stdout


def test_key_is_masked_first_and_never_printed_otherwise(dirs):
    workspace, temp = dirs
    key = "dummy-action-key-3f9a"
    result = run_action(REPO, {"litecore-api-key": key}, workspace, temp, launcher_env())
    assert result.stdout.startswith(f"::add-mask::{key}\n")
    assert key not in result.stdout.replace(f"::add-mask::{key}\n", "", 1) + result.stderr


@pytest.mark.slow
def test_virtual_fallback_runs_in_the_image_and_fills_outputs_and_summary(action_smoke_run, host_image):
    result, workspace = action_smoke_run.result, action_smoke_run.workspace
    assert result.exit_code == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "::notice title=exynos-hil: virtual board::" in result.stdout
    assert (workspace / result.outputs["junit-path"]).is_file()
    assert (workspace / result.outputs["results-path"]).is_file()
    assert int(result.outputs["passed"]) > 0
    assert result.outputs["failed"] == result.outputs["errors"] == "0"
    assert "Reproduce this run locally" in result.summary
    assert f"{host_image.tag} run " in result.summary
    shown = result.stdout.replace(f"::add-mask::{ACTION_KEY}\n", "", 1) + result.stderr + result.summary
    assert ACTION_KEY not in shown
