"""results.json's JSON Schema (results.schema.json beside this module): every field hil
writes, with its meaning. docs/reference/results-json.md is generated from it and the tests
validate the documents of real runs against it; `load_results` stays the reader (it accepts
unknown fields, as every reader must)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_FILE = Path(__file__).with_name("results.schema.json")


@cache
def load_schema() -> dict[str, Any]:
    """The schema, parsed."""
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
