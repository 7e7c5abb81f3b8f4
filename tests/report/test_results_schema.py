"""results.json's JSON Schema: a valid schema that names every version hil reads and every
verdict, that documents (and so validates) the documents and journal lines hil writes, and
that refuses a field nobody documented. Real runs are validated against it where the tests make
them (tests/results_schema.py: the smoke run, the fault matrix, localization, labgrid)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from hil.report.results import READABLE_VERSIONS, SCHEMA, VERSION, journal_path, load_results
from hil.report.schema import load_schema
from hil.report.writer import ResultsWriter
from hil.verdict import Verdict
from tests.results_schema import assert_valid_results, schema_errors

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "streaming" / "results.json"


def test_the_schema_is_valid_and_matches_the_code() -> None:
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"]["const"] == SCHEMA
    assert tuple(schema["properties"]["version"]["enum"]) == READABLE_VERSIONS
    assert VERSION == max(READABLE_VERSIONS)
    assert schema["$defs"]["verdict"]["enum"] == [v.value for v in Verdict]


def test_every_field_has_a_description() -> None:
    missing = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                refs = [sub, *sub.get("anyOf", [])]
                if not sub.get("description") and not any("$ref" in r for r in refs):
                    missing.append(f"{path}.{name}")
                walk(sub, f"{path}.{name}")
            for key in ("items", "additionalProperties"):
                walk(node.get(key), f"{path}[]")
            for name, sub in node.get("$defs", {}).items():
                walk(sub, f"$defs.{name}")
            for sub in node.get("anyOf", []) + node.get("oneOf", []):
                walk(sub, path)

    walk(load_schema(), "")
    assert missing == []


def test_an_older_version_and_a_merge_validate() -> None:
    document = json.loads(FIXTURE.read_text())
    assert document["version"] == 3 and "case_lines" not in document
    assert_valid_results(document)
    load_results(FIXTURE)  # and hil reads it


def test_a_field_nobody_documented_is_refused() -> None:
    document = json.loads(FIXTURE.read_text())
    document["cases"][0]["latency_ms"]["p42"] = 1.0
    document["run"]["boards"][0]["mood"] = "good"
    errors = schema_errors(document)
    assert len(errors) == 2
    assert errors[0].startswith("cases/0/latency_ms: Additional properties are not allowed ('p42'")
    assert errors[1].startswith("run/boards/0: Additional properties are not allowed ('mood'")


def test_the_journal_lines_hil_writes_validate(tmp_path: Path) -> None:
    fixture = json.loads(FIXTURE.read_text())
    path = tmp_path / "results.json"
    run = {k: v for k, v in fixture["run"].items() if k not in ("status", "finished")}
    writer = ResultsWriter(path, run)
    for case in fixture["cases"]:
        writer.journal(case)
    writer.update_run(usable_boards=1)
    lines = [json.loads(line) for line in journal_path(path).read_text().splitlines()]
    assert [next(iter(line)) for line in lines] == ["journal", *["case"] * len(fixture["cases"]), "run"]
    for line in lines:
        assert schema_errors(line, "journal") == []
    assert schema_errors({"case": {"id": "x"}}, "journal") != []  # a case without its fields
    writer.checkpoint()
    assert_valid_results(path)  # the document of a run still going (status running)
