"""The documentation site builds with `mkdocs build --strict` (mkdocs.yml: a missing page, a
broken link or anchor, a missing snippet is an error), into a temporary folder. mkdocs and
mkdocs-material are in the dev extra: without them this test fails, it never skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--config-file", str(REPO / "mkdocs.yml"), "--site-dir", str(folder)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return folder


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "getting-started" / "index.html").is_file()


def test_the_changelog_page_holds_the_changelog(site: Path) -> None:
    """docs/changelog.md pulls CHANGELOG.md in (pymdownx.snippets): the page has its versions."""
    page = (site / "changelog" / "index.html").read_text()
    versions = [line[3:].split("]")[0].lstrip("[") for line in (REPO / "CHANGELOG.md").read_text().splitlines()
                if line.startswith("## [")]
    assert versions and all(f"[{version}]" in page for version in versions)
