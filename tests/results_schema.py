"""results.json's JSON Schema (hil/report/results.schema.json) against documents of real runs:
every field hil writes must be in the schema, so a field added without documenting it fails the
test that produced it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from hil.report.schema import load_schema


def schema_errors(document: dict[str, Any] | Path, definition: str | None = None) -> list[str]:
    """Where `document` (or the file) breaks the schema (or its `$defs/definition`), one line each."""
    if isinstance(document, Path):
        document = json.loads(document.read_text(encoding="utf-8"))
    schema = load_schema()
    if definition is not None:
        schema = {"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]}
    validator = jsonschema.Draft202012Validator(schema)
    found = []
    for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
        # a nullable object is `anyOf: [object, null]`: say what broke the object, not that
        # the value is neither
        causes = [cause for cause in error.context or [] if cause.validator != "type"] or [error]
        found += [f"{'/'.join(map(str, cause.absolute_path)) or '(top)'}: {cause.message[:300]}"
                  for cause in causes]
    return found


def assert_valid_results(document: dict[str, Any] | Path) -> None:
    """The document (or the file) follows the schema; the first errors otherwise."""
    errors = schema_errors(document)
    assert errors == [], "results.json breaks hil/report/results.schema.json:\n" + "\n".join(errors[:20])
