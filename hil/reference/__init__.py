"""docs/reference/, generated from the code: the CLI from the argparse parser and the help
records, the action's inputs and outputs from action.yml, results.json from its JSON Schema,
manifest and inventory fields from their field tables, verdicts and exit codes from
hil/verdict.py and the help records, the upstream catalogue from hil/cases/upstream_reference.json,
the suites' `upstream:` tags and the installed delegation (hil/cases/upstream_page.py).
`python -m hil.reference` writes every page;
`python -m hil.reference --check` names the pages that differ from what it would write (the
drift test runs the same check)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

FOLDER = Path("docs") / "reference"
"""Where the pages go, relative to the repository."""


def pages(root: Path) -> dict[str, str]:
    """Every generated page's file name and text, for the repository at `root` (action.yml is
    read from there; everything else from the imported hil)."""
    from hil.cases import upstream_page
    from hil.reference import action_page, cli_pages, schema_page, verdicts_page, yaml_pages

    writers: dict[str, Callable[[], str]] = {
        "cli.md": cli_pages.cli_page,
        "action.md": lambda: action_page.action_page(root / "action.yml"),
        "results-json.md": schema_page.results_page,
        "manifest.md": yaml_pages.manifest_page,
        "inventory.md": yaml_pages.inventory_page,
        "verdicts.md": verdicts_page.verdicts_page,
        "exit-codes.md": cli_pages.exit_codes_page,
        "upstream-catalogue.md": upstream_page.page,
    }
    return {name: write() for name, write in writers.items()}


def stale(root: Path) -> list[str]:
    """The pages under `root`/docs/reference that differ from what would be generated now (or
    are missing)."""
    folder = root / FOLDER
    found = []
    for name, text in pages(root).items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            found.append(str(FOLDER / name))
    return found


def write(root: Path) -> list[str]:
    """Write every page under `root`/docs/reference; the pages that changed."""
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in pages(root).items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(str(FOLDER / name))
    return changed
