"""Releases: scripts/release-check.py agrees a tag with pyproject.toml and CHANGELOG.md (and
names the file that disagrees), and the release workflow runs it, builds, publishes and moves
the major tag."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "release-check.py"
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
CHANGELOG = """\
# Changelog

## [Unreleased]

### Added
- Something after the release.

## [0.9.0] - 2026-12-05

### Added
- The first release.

### Fixed
- A thing.

## [0.8.0] - 2026-11-01

### Added
- An older one.

[0.9.0]: https://example.invalid/compare/v0.8.0...v0.9.0
"""


def release_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a CHANGELOG in Keep a Changelog form and the real pyproject.toml."""
    (tmp_path / "CHANGELOG.md").write_text(CHANGELOG)
    shutil.copy2(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_a_tag_that_agrees_passes_and_prints_its_section(repo: Path) -> None:
    done = release_check("v0.9.0", "--root", str(repo))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "### Added\n- The first release.\n\n### Fixed\n- A thing.\n"


def test_a_tag_without_a_section_and_another_version_fails_naming_both_files(repo: Path) -> None:
    done = release_check("v0.8.0", "--root", str(repo))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "release-check: pyproject.toml: version is '0.9.0', the tag v0.8.0 says '0.8.0'"]
    done = release_check("v0.9.1", "--root", str(repo))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "release-check: pyproject.toml: version is '0.9.0', the tag v0.9.1 says '0.9.1'",
        "release-check: CHANGELOG.md: no `## [0.9.1]` section for the tag v0.9.1"]
    assert done.stdout == ""


def test_a_pyproject_that_disagrees_fails(repo: Path) -> None:
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.9.0"', 'version = "0.9.0rc1"'))
    done = release_check("v0.9.0", "--root", str(repo))
    assert done.returncode == 1
    assert done.stderr.strip() == "release-check: pyproject.toml: version is '0.9.0rc1', the tag v0.9.0 says '0.9.0'"


@pytest.mark.parametrize("tag", ["0.9.0", "v0.9", "v0.9.0-rc1", "v09.0.0", "release"])
def test_a_tag_that_is_not_vX_Y_Z_fails(repo: Path, tag: str) -> None:
    done = release_check(tag, "--root", str(repo))
    assert done.returncode == 1
    assert "not a release tag vX.Y.Z" in done.stderr


def _steps() -> list[dict]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    (job,) = workflow["jobs"].values()
    return job["steps"]


def test_the_workflow_runs_on_release_tags_with_write_permission() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow[True] == {"push": {"tags": ["v*.*.*"]}}  # YAML 1.1 reads `on:` as True
    assert workflow["permissions"] == {"contents": "write"}
    runs = "\n".join(step.get("run", "") for step in _steps())
    assert "python3 -m build" in runs
    assert 'gh release create "$TAG" dist/*.whl dist/*.tar.gz' in runs
    assert '--notes-file "$RUNNER_TEMP/notes.md"' in runs
    assert 'git tag --force "$MAJOR"' in runs and 'git push --force origin "refs/tags/$MAJOR"' in runs
    names = [step.get("name", step.get("uses")) for step in _steps()]
    assert names.index("Check the tag against pyproject.toml and CHANGELOG.md") < names.index(
        "Build the wheel and the sdist") < names.index("Create the GitHub release")


def _run_check_step(root: Path, tag: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """The workflow's own check step, its script run by bash in `root` as the runner would."""
    (step,) = [s for s in _steps() if s.get("id") == "check"]
    output = tmp_path / "github_output"
    output.write_text("")
    env = dict(os.environ, TAG=tag, RUNNER_TEMP=str(tmp_path), GITHUB_OUTPUT=str(output))
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=root, env=env, capture_output=True,
                          text=True, timeout=60)
    return done, output


def test_the_workflows_check_step_passes_and_gives_the_notes_and_the_major_tag(repo: Path,
                                                                             tmp_path: Path) -> None:
    (repo / "scripts").mkdir()
    shutil.copy2(SCRIPT, repo / "scripts" / SCRIPT.name)
    done, output = _run_check_step(repo, "v0.9.0", tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "notes.md").read_text().startswith("### Added\n- The first release.")
    assert output.read_text() == "version=0.9.0\nmajor=v0\n"
    assert (tmp_path / "notes.md").read_text().strip()
    failed, _ = _run_check_step(repo, "v1.0.0", tmp_path)
    assert failed.returncode == 1 and "CHANGELOG.md: no `## [1.0.0]` section" in failed.stderr


def test_the_workflows_check_step_against_the_repositorys_changelog(tmp_path: Path) -> None:
    """The release of 0.9.0: the repository's own CHANGELOG.md has its section and
    pyproject.toml its version."""
    done, output = _run_check_step(REPO, "v0.9.0", tmp_path)
    assert done.returncode == 0, done.stderr
    assert output.read_text() == "version=0.9.0\nmajor=v0\n"
    assert (tmp_path / "notes.md").read_text().strip()


def test_the_wheel_carries_every_file_the_package_reads(tmp_path: Path) -> None:
    """What the release workflow publishes is a working hil: every file under hil/ that is not
    Python (the delegation table, the upstream reference facts, results.json's schema, the
    dashboard's template) is in the wheel, so an installed hil finds them."""
    import zipfile

    source = tmp_path / "source"  # built from a copy: a build writes build/ into its source
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "hil", source / "hil", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("exynos_hil-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {path.relative_to(REPO).as_posix() for path in (REPO / "hil").rglob("*")
            if path.is_file() and path.suffix not in (".py", ".pyc")}
    assert data and data <= names, sorted(data - names)
