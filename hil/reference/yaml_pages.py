"""docs/reference/manifest.md and inventory.md: the fields of the YAML files hil reads, from
the tables their validation reads (hil/cases/manifest_fields.py, hil/board/inventory_fields.py),
and the checkers and dataset kinds a manifest names, from their registries."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable

from hil.fields import Field
from hil.reference.markdown import NOTICE, code, table


def fields_table(fields: Iterable[Field]) -> str:
    """A table of `fields`: name, what it takes, required or its default, meaning."""
    rows = [(code(f.name), f.kind, "required" if f.required else (f.default or "none"),
             f.description) for f in fields]
    return table(("field", "takes", "default", "meaning"), rows)


def _default(field: dataclasses.Field) -> str:  # type: ignore[type-arg]
    return "required" if field.default is dataclasses.MISSING else str(field.default)


def _first_sentence(text: str | None) -> str:
    words = " ".join((text or "").split())
    return words.split(". ")[0].rstrip(".") + "." if words else ""


def manifest_page() -> str:
    """The page for manifests."""
    from hil.cases.datasets import DATASETS
    from hil.cases.manifest_fields import (
        CASE_FIELDS,
        EXPECT_FIELDS,
        INPUT_FIELDS,
        LATENCY_FIELDS,
        TOLERANCE_FIELDS,
        TOP_FIELDS,
    )
    from hil.checkers import CHECKERS

    checkers = [(code(name), ", ".join(f"{key}: {value}" for key, value in checker.defaults.items()))
                for name, checker in CHECKERS.items()]
    datasets = [(code(name), ", ".join(f"{f.name}: {_default(f)}" for f in dataclasses.fields(cls)),
                 _first_sentence(inspect.getdoc(cls)))
                for name, cls in DATASETS.items()]
    return (f"# Manifest fields\n\n{NOTICE}\nA manifest (`hil run --suite FILE.yaml`) declares "
            "cases from your own code. Every error names the file, the case and the field, on one "
            "line (exit 3); a field not listed here is refused. A manifest is code: its "
            "callables are imported and run with the rights of whoever runs hil.\n\n"
            "```yaml\nsuite: my_models\ncases:\n  - id: tiny_mlp\n"
            "    module: \"my_pkg.models:make_mlp\"\n    kwargs: {hidden: 32}\n    inputs:\n"
            "      - shape: [1, 16]\n    precision: all\n    tags: [mlp]\n```\n\n"
            "## Top level\n\n" + fields_table(TOP_FIELDS)
            + "\n## A case (`cases[]`)\n\n" + fields_table(CASE_FIELDS)
            + "\n## An input (`inputs[]`)\n\n" + fields_table(INPUT_FIELDS)
            + "\n## `tolerance`\n\n" + fields_table(TOLERANCE_FIELDS)
            + "\n## `expect`\n\n" + fields_table(EXPECT_FIELDS)
            + "\n## `latency`\n\n" + fields_table(LATENCY_FIELDS)
            + "\n## `checker`\n\nA name, or `{name: NAME, PARAMETER: VALUE, ...}`; the "
            "parameters and their defaults:\n\n" + table(("checker", "parameters (defaults)"), checkers)
            + "\n## `dataset`\n\n`{kind: KIND, PARAMETER: VALUE, ...}`:\n\n"
            + table(("kind", "parameters (defaults)", "what it is"), datasets))


def inventory_page() -> str:
    """The page for inventories."""
    from hil.board.inventory_fields import (
        ADB_ENTRY_FIELDS,
        BOARD_FIELDS,
        LABGRID_ENTRY_FIELDS,
        LABGRID_FIELDS,
        POWER_COMMAND_FIELDS,
        RELAY_FIELDS,
    )

    only_adb = ", ".join(code(name) for name in sorted(ADB_ENTRY_FIELDS - LABGRID_ENTRY_FIELDS))
    return (f"# Inventory fields\n\n{NOTICE}\nAn inventory (`--inventory FILE`) lists a lab's "
            "boards: how to reach, watch, power and provision them. Its top level is one key, "
            "`boards`, a list of entries. Every error names the file, the board and the field "
            "(exit 3); a field not listed here is refused.\n\n"
            "```yaml\nboards:\n  - name: e9955-a\n    adb: R3CX40ABCDE\n    chipset: E9955\n"
            "    console: /dev/ttyUSB0\n    power: {relay: /dev/ttyUSB1, channel: 2}\n"
            "  - name: lab1-a\n    labgrid: {place: lab1-a}\n```\n\n"
            "## A board (`boards[]`)\n\n" + fields_table(BOARD_FIELDS)
            + f"\nAn entry with `labgrid` takes none of {only_adb}: the place's exporter says "
            "the rest.\n\n"
            "## `power`: commands\n\n" + fields_table(POWER_COMMAND_FIELDS)
            + "\nA power block needs `cycle`, or both `on` and `off`.\n\n"
            "## `power`: a USB serial relay\n\n" + fields_table(RELAY_FIELDS)
            + "\n## `labgrid`\n\n" + fields_table(LABGRID_FIELDS))
