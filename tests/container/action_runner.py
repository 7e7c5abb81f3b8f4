"""A FAKE GitHub Actions runner for composite actions: no GitHub runner can run here, so
this runs action.yml's steps the way the runner does for the subset the action uses —
`${{ inputs.X }}`, `${{ github.action_path }}`, `${{ steps.ID.outputs.X }}` in `env:`,
`if: steps.ID.outputs.X == 'V'`, `bash --noprofile --norc -eo pipefail`, `$GITHUB_OUTPUT`,
`$GITHUB_STEP_SUMMARY`, `$RUNNER_TEMP`, `$GITHUB_WORKSPACE` — and stops at the first
failing step. Anything else in an expression is an error, so a new construct in action.yml
cannot pass unnoticed."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

_EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
_IF = re.compile(r"^steps\.([\w-]+)\.outputs\.([\w-]+) == '([^']*)'$")


@dataclass
class ActionResult:
    exit_code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str


def _read_outputs(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        name, sep, value = line.partition("=")
        if sep:
            found[name] = value
    return found


def run_action(action_dir: Path, inputs: dict[str, str], workspace: Path, runner_temp: Path,
               env: dict[str, str]) -> ActionResult:
    """Run the composite action in `action_dir` with `inputs`; stop at the first failing step."""
    action = yaml.safe_load((action_dir / "action.yml").read_text())
    values = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    unknown = set(inputs) - set(values)
    if unknown:
        raise ValueError(f"unknown inputs: {unknown}")
    values.update(inputs)
    steps: dict[str, dict[str, str]] = {}
    summary = runner_temp / "step_summary.md"
    summary.write_text("")

    def evaluate(expression: str) -> str:
        if expression.startswith("inputs."):
            return values[expression.removeprefix("inputs.")]
        if expression == "github.action_path":
            return str(action_dir)
        match = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression)
        if match:
            return steps.get(match.group(1), {}).get(match.group(2), "")
        raise ValueError(f"expression not supported by the fake runner: {expression}")

    stdout, stderr = [], []
    code = 0
    for index, step in enumerate(action["runs"]["steps"]):
        condition = step.get("if")
        if condition:
            match = _IF.match(condition)
            if match is None:
                raise ValueError(f"if: not supported by the fake runner: {condition}")
            if steps.get(match.group(1), {}).get(match.group(2), "") != match.group(3):
                continue
        output_file = runner_temp / f"output-{index}"
        output_file.write_text("")
        step_env = dict(env, GITHUB_OUTPUT=str(output_file), GITHUB_STEP_SUMMARY=str(summary),
                        RUNNER_TEMP=str(runner_temp), GITHUB_WORKSPACE=str(workspace),
                        GITHUB_ACTIONS="true", CI="true")
        for name, value in step.get("env", {}).items():
            step_env[name] = _EXPR.sub(lambda m: evaluate(m.group(1)), str(value))
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                              cwd=workspace, env=step_env, capture_output=True, text=True, timeout=3600)
        stdout.append(done.stdout)
        stderr.append(done.stderr)
        if "id" in step:
            steps[step["id"]] = _read_outputs(output_file)
        if done.returncode != 0:
            code = done.returncode
            break
    outputs = {name: _EXPR.sub(lambda m: evaluate(m.group(1)), spec["value"])
               for name, spec in action["outputs"].items()}
    return ActionResult(code, "".join(stdout), "".join(stderr), outputs, summary.read_text())


def launcher_env() -> dict[str, str]:
    """The environment of a runner's job (this process's, without a docker host override)."""
    return dict(os.environ)


@dataclass(frozen=True)
class Replay:
    """What one real `hil run` in the container left: its exit code and the files it wrote."""

    exit_code: int
    results: bytes
    junit: bytes


STUB_HIL = r'''#!/usr/bin/env bash
# STUB of the action's docker step (tests/container/action_runner.py): `hil replicate
# [OPTIONS] -- ARGS` does not start a container. `-- run ...` replays what a real container
# run of the same outcome wrote (REPLAY_DIR/board or, for `--board virtual`, REPLAY_DIR/virtual:
# exit-code, results.json, junit.xml) at the paths the action asked for; `-- report ...`
# runs hil report on this host; `-- doctor ...` answers as the host image does (no runner:
# exit 3); --print and --build-only behave as hil's. Every call is appended to CALLS.
set -euo pipefail
[ "${1:-}" = replicate ] || { echo "stub hil: only replicate is stubbed, not $1" >&2; exit 99; }
shift
all=("$@")
workspace=$PWD
mode=container
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    --workspace) workspace=$2; shift 2 ;;
    --print) mode=print; shift ;;
    --build-only) mode=build; shift ;;
    --*) shift 2 ;;
    *) shift ;;
  esac
done
printf '%s\n' "${all[*]}" >> "$CALLS"
case "$mode" in
  print) exec env PYTHONPATH="$REPO" "$PY" -m hil replicate "${all[@]}" ;;
  build) echo "exynos-hil:host-stub"; exit 0 ;;
esac
cd "$workspace"
case "${1:-}" in
  report) exec env PYTHONPATH="$REPO" "$PY" -m hil "$@" ;;
  doctor) exit 3 ;;
  run) ;;
  *) echo "stub hil: no replay for $1" >&2; exit 99 ;;
esac
shift
source=board
results= junit=
while [ $# -gt 0 ]; do
  case "$1" in
    --results) results=$2; shift 2 ;;
    --junit) junit=$2; shift 2 ;;
    --board) [ "$2" != virtual ] || source=virtual; shift 2 ;;
    *) shift ;;
  esac
done
mkdir -p "$(dirname "$results")" "$(dirname "$junit")"
cp "$REPLAY_DIR/$source/results.json" "$results"
cp "$REPLAY_DIR/$source/junit.xml" "$junit"
exit "$(cat "$REPLAY_DIR/$source/exit-code")"
'''


def stub_launcher(runner_temp: Path, board: Replay, virtual: Replay, repo: Path) -> dict[str, str]:
    """Install STUB_HIL as the action's launcher in `runner_temp` (the action's set-up step
    then keeps it) replaying `board` for the boards' run and `virtual` for the virtual
    fallback; return the environment variables it needs (CALLS: the replicate calls made)."""
    import sys

    venv = runner_temp / "exynos-hil-launcher" / "bin"
    venv.mkdir(parents=True)
    (venv / "hil").write_text(STUB_HIL)
    (venv / "hil").chmod(0o755)
    (venv / "python").symlink_to(sys.executable)
    replays = runner_temp / "replays"
    for name, replay in (("board", board), ("virtual", virtual)):
        (replays / name).mkdir(parents=True)
        (replays / name / "exit-code").write_text(str(replay.exit_code))
        (replays / name / "results.json").write_bytes(replay.results)
        (replays / name / "junit.xml").write_bytes(replay.junit)
    return {"REPLAY_DIR": str(replays), "CALLS": str(runner_temp / "calls"), "PY": sys.executable,
            "REPO": str(repo)}
