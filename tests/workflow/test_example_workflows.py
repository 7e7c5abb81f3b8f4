"""The example workflows' `run:` blocks executed as written (bash -eo pipefail, as GitHub
does), job by job, with stub python3/pip/docker and a launcher `hil` that runs the real
merge/report/dashboard (stubs.py), against shard folders with a failing case: the merged
report and the step summary must exist on exactly the nights with failures; the nightly's
dashboard is built from tonight's merged runs and the nights kept, the oldest let go."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from hil.report.results import save_results
from tests.report import case, sample_results

from .stubs import REPO, make_stubs

EXAMPLES = REPO / "examples" / "workflows"
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
VALUES = {
    "needs.image.outputs.image": "exynos-hil:stub", "matrix.shard": "1/2",
    "matrix.board": "e9955-a", "steps.hil.outputs.passed": "1",
    "steps.hil.outputs.failed": "1", "steps.hil.outputs.errors": "0",
    "secrets.SAMSUNG_AI_LITECORE_KEY": "", "secrets.LITECORE_SHA256": "unverified",
    "steps.image.outputs.image": "exynos-hil:stub",
    "inputs.filter": "", "inputs.firmware-builds": "", "inputs.runner-repo": "",
    "inputs.runner-build": "", "inputs.wheels": "",
}
"""What the expressions in the examples' `env:` evaluate to here; any other is an error."""


def _condition(text: str | None, failed: bool, workspace: Path) -> bool:
    """A step's `if:`; the few forms the examples use (anything else is an error)."""
    if text is None:
        return not failed
    result = True
    for term in (t.strip() for t in text.split("&&")):
        hashed = re.fullmatch(r"hashFiles\('([^']+)'\) != ''", term)
        if term == "always()":
            continue
        if hashed:
            result &= (workspace / hashed.group(1)).exists()
        else:
            raise ValueError(f"if: not supported here: {term}")
    return result


def run_job(job: dict, workspace: Path, env: dict[str, str]) -> list[tuple[str, int | None]]:
    """Each step of `job`: (its name, the exit code of its `run:`, None when skipped or not a
    `run:` step)."""
    summary = workspace.parent / "summary.md"
    ran, failed = [], False
    for step in job["steps"]:
        name = step.get("name") or step.get("uses") or "run"
        if not _condition(step.get("if"), failed, workspace) or "run" not in step:
            ran.append((name, None))
            continue
        step_env = dict(env, GITHUB_STEP_SUMMARY=str(summary),
                        GITHUB_OUTPUT=str(workspace.parent / "output"),
                        RUNNER_TEMP=str(workspace.parent / "temp"), GITHUB_WORKSPACE=str(workspace))
        for key, value in (step.get("env") or {}).items():
            step_env[key] = _EXPR.sub(lambda m: VALUES[m.group(1)], str(value))
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                              cwd=workspace, env=step_env, capture_output=True, text=True, timeout=300)
        ran.append((name, done.returncode))
        failed |= done.returncode != 0
    return ran


def _shards(workspace: Path, shards: tuple[str, ...]) -> None:
    for index, shard in enumerate(shards, start=1):
        document = sample_results()
        verdict = "FAIL_MISMATCH" if index == 1 else "PASS"
        document["cases"] = [case("smoke", "fp32", f"c{index}", verdict)]
        document["run"].update(shard=shard, id=f"run-{index}")
        save_results(document, workspace / "shards" / f"shard-{index}" / "results.json")


@pytest.mark.parametrize("shards, merge_code", [(("1/2", "2/2"), 1), (("1/2",), 1)])
def test_the_nightly_merge_reports_the_nights_with_failures(tmp_path, shards, merge_code) -> None:
    workspace = tmp_path / "ws"
    (tmp_path / "temp").mkdir()
    _shards(workspace, shards)
    env = make_stubs(tmp_path / "stubs")
    job = yaml.safe_load((EXAMPLES / "nightly.yml").read_text())["jobs"]["merge"]
    ran = dict(run_job(job, workspace, env))
    assert ran["Merge the shards"] == merge_code  # a failing case (or a lost shard) is red
    assert ran["Report"] == 1  # ... and the report is written all the same
    summary = (tmp_path / "summary.md").read_text()
    assert "## exynos-hil: failed" in summary and (workspace / "merged" / "junit.xml").is_file()
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and all(s.get("if") == "always()" for s in upload)


def test_every_run_block_of_every_example_runs_as_written(tmp_path) -> None:
    """Each job's `run:` steps in order (the nightly merge: the test above), every one exit 0."""
    problems = []
    for path in sorted(EXAMPLES.glob("*.yml")):
        for name, job in yaml.safe_load(path.read_text())["jobs"].items():
            if (path.stem, name) in (("nightly", "merge"), ("nightly", "dashboard")):
                continue  # the tests above and below: they need their own downloads
            workspace = tmp_path / path.stem / name / "ws"
            (workspace.parent / "temp").mkdir(parents=True)
            _shards(workspace, ("1/2", "2/2"))
            env = make_stubs(workspace.parent / "stubs")
            for step, code in run_job(job, workspace, env):
                if code not in (None, 0):
                    problems.append(f"{path.name} {name}: {step} exited {code}")
    assert problems == []


def test_the_nightly_dashboard_shows_tonight_and_keeps_the_last_nights(tmp_path) -> None:
    """Tonight's merged run of each chipset (the downloaded artifacts) joins the nights kept
    (the restored cache), the oldest beyond NIGHTS go, and `hil dashboard` writes the page."""
    workspace = tmp_path / "ws"
    (tmp_path / "temp").mkdir()
    for chipset in ("E9955", "E9965"):
        document = sample_results()
        document["cases"] = [case("smoke", "fp32", "c1", "PASS")]
        document["run"].update(chipset=chipset, started="2030-01-01T02:17:00Z")
        save_results(document, workspace / "tonight" / f"exynos-hil-nightly-{chipset}" / "results.json")
    for day in range(1, 5):  # four nights kept, of which the two oldest go
        document = sample_results()
        document["run"].update(started=f"2020-01-0{day}T02:17:00Z")
        save_results(document, workspace / "nights" / f"2020-01-0{day}" / "E9955" / "results.json")
    job = yaml.safe_load((EXAMPLES / "nightly.yml").read_text())["jobs"]["dashboard"]
    keep = next(step for step in job["steps"] if step.get("name") == "Add tonight, keep the last nights")
    assert keep["env"]["NIGHTS"] == "20"
    keep["env"]["NIGHTS"] = "3"  # tonight and two before it
    ran = dict(run_job(job, workspace, make_stubs(tmp_path / "stubs")))
    assert ran["Add tonight, keep the last nights"] == 0 and ran["Dashboard"] == 0
    kept = sorted(p.name for p in (workspace / "nights").iterdir())
    assert kept[:2] == ["2020-01-03", "2020-01-04"] and len(kept) == 3
    assert sorted(p.name for p in (workspace / "nights" / kept[2]).iterdir()) == ["E9955", "E9965"]
    page = (workspace / "dashboard" / "index.html").read_text()
    assert "3 night(s), 2020-01-03 to 2030-01-01" in page
    saved = [s for s in job["steps"] if s.get("uses", "").startswith(("actions/upload-artifact",
                                                                       "actions/cache/save"))]
    assert len(saved) == 2 and all(s["if"].startswith("always()") for s in saved)


def test_the_pr_check_never_runs_a_forks_pull_request_on_the_lab() -> None:
    job = yaml.safe_load((EXAMPLES / "pr-check.yml").read_text())["jobs"]["hil"]
    assert job["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
