"""docs/reference/ is what `python -m hil.reference` writes now (the drift test), and the drift
test fails when an option or an action input is added without regenerating (shown in a copy of
the repository). Also: the field tables the pages come from are the ones validation reads."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hil.board import images, inventory
from hil.board.inventory_fields import ADB_ENTRY_FIELDS, BOARD_FIELDS, LABGRID_ENTRY_FIELDS
from hil.cases import manifest
from hil.cases.manifest_fields import CASE_FIELDS, LATENCY_FIELDS, TOP_FIELDS
from hil.errors import UsageError
from hil.fields import names
from hil.latency_plan import _DECLARED_KEYS
from hil.reference import FOLDER, pages, stale

REPO = Path(__file__).resolve().parents[1]
NAV = ("cli.md", "action.md", "results-json.md", "manifest.md", "inventory.md", "verdicts.md",
       "exit-codes.md", "upstream-catalogue.md")
"""The reference pages the docs site lists."""


def test_the_reference_is_up_to_date() -> None:
    assert stale(REPO) == [], "run `python -m hil.reference` and commit docs/reference/"


def test_the_reference_has_exactly_the_pages_the_site_lists() -> None:
    assert tuple(pages(REPO)) == NAV
    assert sorted(p.name for p in (REPO / FOLDER).glob("*.md")) == sorted(NAV)


def test_generation_is_deterministic_and_independent_of_the_environment(monkeypatch) -> None:
    first = pages(REPO)
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("HIL_RUNNER", "/opt/somewhere/enn_executor_runner")
    monkeypatch.setenv("HIL_CACHE_DIR", "/var/cache/elsewhere")
    assert pages(REPO) == first


def test_relative_links_between_reference_pages_resolve() -> None:
    """What `mkdocs build --strict` checks of these pages: every relative link names a page of
    the folder, and every #anchor a heading of that page."""
    texts = pages(REPO)

    def anchors(text: str) -> set[str]:
        return {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", text, re.M)}

    for name, text in texts.items():
        for target in re.findall(r"\]\(([^)]+)\)", text):
            if "://" in target:  # a source upstream (the catalogue's, pinned to a commit)
                continue
            page, _, anchor = target.partition("#")
            linked = texts[page] if page else text
            assert page in texts or not page, (name, target)
            if anchor:
                assert anchor in anchors(linked), (name, target)


def _copy(tmp_path: Path) -> Path:
    """The parts of the repository the generator reads, copied."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "hil", copy / "hil", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / FOLDER, copy / FOLDER)
    shutil.copy2(REPO / "action.yml", copy / "action.yml")
    return copy


def _check(copy: Path) -> subprocess.CompletedProcess:
    """`python -m hil.reference --check` with the copy's hil (the current folder comes first
    on sys.path)."""
    return subprocess.run([sys.executable, "-m", "hil.reference", "--check"], cwd=copy,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def clean_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = _copy(tmp_path_factory.mktemp("reference"))
    done = _check(copy)
    assert done.returncode == 0, done.stderr  # the copy itself is up to date
    return copy


def test_an_option_added_without_regenerating_fails_the_drift_check(clean_copy: Path, tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    cli = copy / "hil" / "cli.py"
    anchor = '    groups = RunGroups.of(run)\n'
    text = cli.read_text()
    assert anchor in text
    cli.write_text(text.replace(anchor, anchor + '    run.add_argument("--newly-added", '
                                                  'help="an option nobody documented")\n'))
    done = _check(copy)
    assert done.returncode == 1
    assert done.stderr.strip() == "docs/reference/cli.md: out of date: run `python -m hil.reference`"
    regenerated = subprocess.run([sys.executable, "-m", "hil.reference"], cwd=copy,
                                 capture_output=True, text=True, timeout=300)
    assert regenerated.stdout == "wrote docs/reference/cli.md\n"
    assert "--newly-added" in (copy / FOLDER / "cli.md").read_text()
    assert _check(copy).returncode == 0


def test_an_action_input_added_without_regenerating_fails_the_drift_check(clean_copy: Path,
                                                                          tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    action = copy / "action.yml"
    text = action.read_text()
    assert "\ninputs:\n" in text
    action.write_text(text.replace("\ninputs:\n", "\ninputs:\n  newly-added:\n    description: x\n"
                                                  "    required: false\n    default: \"\"\n", 1))
    done = _check(copy)
    assert done.returncode == 1
    assert done.stderr.strip() == "docs/reference/action.md: out of date: run `python -m hil.reference`"


def test_a_changed_exit_code_reaches_cli_and_exit_codes_pages(clean_copy: Path, tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    manual = copy / "hil" / "commands" / "manual.py"
    text = manual.read_text()
    old = '(EXIT_OK, "the cases are listed"),'
    assert old in text
    manual.write_text(text.replace(old, '(EXIT_OK, "the cases are listed, one per line"),'))
    done = _check(copy)
    assert done.returncode == 1
    assert done.stderr.split() == ["docs/reference/cli.md:", "out", "of", "date:", "run", "`python",
                                   "-m", "hil.reference`", "docs/reference/exit-codes.md:", "out", "of",
                                   "date:", "run", "`python", "-m", "hil.reference`"]


def test_manifest_validation_reads_the_documented_tables(tmp_path: Path) -> None:
    assert manifest._CASE_FIELDS == names(CASE_FIELDS)
    assert manifest._TOP_FIELDS == names(TOP_FIELDS)
    assert set(_DECLARED_KEYS) == names(LATENCY_FIELDS)
    bad = tmp_path / "bad.yaml"
    bad.write_text("cases:\n  - id: a\n    module: 'x:y'\n    undocumented: 1\n")
    with pytest.raises(UsageError, match="undocumented: unknown field"):
        manifest.load_manifest(bad)


def test_inventory_validation_reads_the_documented_tables() -> None:
    assert inventory._FIELDS == ADB_ENTRY_FIELDS
    assert inventory._LABGRID_FIELDS == LABGRID_ENTRY_FIELDS <= names(BOARD_FIELDS)
    assert set(images.FIELDS) <= names(BOARD_FIELDS)
