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
