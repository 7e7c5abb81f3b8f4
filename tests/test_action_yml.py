"""action.yml's "Run the tests" step, run by bash with a fake `hil` that records its
arguments: what a runner given by `runner-path` / `runner-profile` reaches hil as. (The whole
action, image included, is run by tests/container/test_action.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def run_step(tmp_path: Path, inputs: dict[str, str], files: dict[str, bytes]) -> list[list[str]]:
    """Run the step with these inputs and workspace files; every `hil` call's arguments."""
    action = yaml.safe_load((REPO / "action.yml").read_text())
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "run")
    values = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    values.update(inputs)
    workspace = tmp_path / "ws"
    for name, data in files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_bytes(data)
    calls = tmp_path / "calls"
    fake = tmp_path / "hil"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {calls}\necho "-- end" >> {calls}\n')
    fake.chmod(0o755)
    outputs = {"setup.outputs.hil": str(fake), "setup.outputs.python": sys.executable,
               "image.outputs.image": "img:1", "plan.outputs.boards": "R3CX1", "plan.outputs.access": "host-adb",
               "setup.outputs.launcher-image": ""}

    def value(match: re.Match[str]) -> str:
        expression = match.group(1)
        if expression.startswith("inputs."):
            return values[expression.removeprefix("inputs.")]
        return outputs[expression.removeprefix("steps.")]

    env = {**os.environ, "GITHUB_WORKSPACE": str(workspace), "GITHUB_OUTPUT": str(tmp_path / "out"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
    env.update({k: re.sub(r"\$\{\{\s*([^}]*?)\s*\}\}", value, str(v)) for k, v in step["env"].items()})
    subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                   env=env, cwd=workspace, check=False, capture_output=True, timeout=60)
    text = calls.read_text() if calls.exists() else ""
    return [call.strip("\n").split("\n") for call in text.split("-- end\n") if call.strip()]


def test_runner_path_mounts_the_runners_profile_sidecar_and_runner_profile_reaches_hil(tmp_path: Path) -> None:
    calls = run_step(tmp_path, {"runner-path": "bin/enn_executor_runner", "runner-profile": "hil"},
                     {"bin/enn_executor_runner": b"\x7fELF", "bin/enn_executor_runner.profile.json": b"{}"})
    run = next(call for call in calls if "run" in call[call.index("--") + 1:][:1])
    ws = tmp_path / "ws"
    assert f"{ws}/bin/enn_executor_runner:/opt/hil/mounted/enn_executor_runner:ro" in run
    assert (f"{ws}/bin/enn_executor_runner.profile.json:"
            "/opt/hil/mounted/enn_executor_runner.profile.json:ro") in run
    args = run[run.index("--") + 1:]
    assert args[args.index("--runner") + 1] == "/opt/hil/mounted/enn_executor_runner"
    assert args[args.index("--runner-profile") + 1] == "hil"


def test_without_a_sidecar_or_a_profile_hil_decides(tmp_path: Path) -> None:
    calls = run_step(tmp_path, {"runner-path": "bin/enn_executor_runner"},
                     {"bin/enn_executor_runner": b"\x7fELF"})
    run = next(call for call in calls if "run" in call[call.index("--") + 1:][:1])
    assert not any("profile.json" in arg for arg in run)
    assert "--runner-profile" not in run
