"""The final files streamed from disk say what the in-memory writer said: results.json, JUnit,
the step summary, the GitHub annotations and groups and the console table of one run equal
the fixtures `tests/fixtures/streaming/` written by the in-memory code (main at 8bb37c6,
before the streaming writer) for the same records; files of schema 3 and 4 both load in
report, merge and compare; a run killed mid-way leaves valid files."""

from __future__ import annotations

import copy
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import junit_xml
import pytest

from hil.cli import main
from hil.report import console
from hil.report.console import make_console, render_table
from hil.report.github import annotations, log_groups
from hil.report.junit import _testcase, _testsuite, suite_name, write_junit
from hil.report.results import VERSION, CaseStream, case_texts, load_results, save_results
from hil.report.summary import render_summary
from hil.run.recorder import Recorder
from tests.junit_schema import assert_valid_junit

from . import RUN
from .many_cases import many_cases

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "streaming"


def _fixture_run(out: Path) -> Recorder:
    """The fixture's records through the run's recorder, as the fixture was made."""
    given = json.loads((FIXTURES / "records.json").read_text(encoding="utf-8"))
    recorder = Recorder(out / "results.json", out / "junit.xml", copy.deepcopy(given["run"]))
    recorder.update_run(boards=given["boards"], usable_boards=2)
    for record in given["records"]:
        recorder.add(copy.deepcopy(record))
    return recorder


def _comparable(document: dict[str, Any]) -> dict[str, Any]:
    """A results document without what differs between the two writers by design."""
    document = copy.deepcopy(document)
    for key in ("version", "case_lines"):
        document.pop(key, None)
    document["run"].pop("finished")
    return document


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("streamed")
    _fixture_run(out).close("complete")
    return out


def test_results_json_has_the_in_memory_writers_content(streamed: Path) -> None:
    written = json.loads((streamed / "results.json").read_text(encoding="utf-8"))
    fixture = json.loads((FIXTURES / "results.json").read_text(encoding="utf-8"))
    assert written["version"] == VERSION == 5 and written["case_lines"] is True
    assert fixture["version"] == 3 and "case_lines" not in fixture
    assert _comparable(written) == _comparable(fixture)
    assert [json.loads(text) for text in case_texts(streamed / "results.json")] == fixture["cases"]


def test_junit_is_the_in_memory_writers_byte_for_byte(streamed: Path) -> None:
    assert (streamed / "junit.xml").read_bytes() == (FIXTURES / "junit.xml").read_bytes()
    assert_valid_junit(streamed / "junit.xml")
    assert [p.name for p in streamed.iterdir() if p.name.startswith(".")] == []  # no spool left


def test_summary_annotations_groups_and_table_read_from_disk_are_unchanged(tmp_path: Path) -> None:
    recorder = _fixture_run(tmp_path)
    recorder.close("complete")
    results = recorder.results()  # the cases read back from results.json as they are iterated
    assert not isinstance(results["cases"], list) and len(results["cases"]) == 12
    finished = json.loads((FIXTURES / "results.json").read_text(encoding="utf-8"))["run"]["finished"]

    def fixture(name: str) -> str:  # as if the fixture's run had ended when this one did
        return (FIXTURES / name).read_text(encoding="utf-8").replace(finished, results["run"]["finished"])

    assert render_summary(results) == fixture("summary.md")
    github = "\n".join(annotations(results)) + "\n" + "\n".join(log_groups(results)) + "\n"
    token = re.compile(r"(?<=::)[0-9a-f]{32}(?=::)|(?<=::stop-commands::)[0-9a-f]{32}")
    assert token.sub("TOKEN", github) == token.sub("TOKEN", fixture("github.txt"))
    table = io.StringIO()
    render_table(results, make_console(table))
    assert table.getvalue() == fixture("table.txt")


def test_a_run_killed_mid_way_leaves_valid_files_with_the_cases_of_its_last_checkpoint(
        tmp_path: Path) -> None:
    given = json.loads((FIXTURES / "records.json").read_text(encoding="utf-8"))
    recorder = Recorder(tmp_path / "results.json", tmp_path / "junit.xml", copy.deepcopy(given["run"]))
    for record in given["records"][:9]:
        recorder.add(copy.deepcopy(record))
    # killed here (nothing closes the recorder): what is on disk is all there is
    on_disk = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert on_disk["run"]["status"] == "running" and 0 < len(on_disk["cases"]) <= 9
    assert_valid_junit(tmp_path / "junit.xml")
    junit_ids = [(t.get("classname"), t.get("name")) for t in ET.parse(tmp_path / "junit.xml").iter("testcase")]
    assert sorted(junit_ids) == sorted((c["classname"], c["id"]) for c in on_disk["cases"])
    assert len(load_results(tmp_path / "results.json")["cases"]) == 9  # the journal has them all


def test_files_of_schema_3_and_5_load_in_report_merge_and_compare(
        streamed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v3, v4 = FIXTURES / "results.json", streamed / "results.json"
    assert [load_results(p)["version"] for p in (v3, v4)] == [3, 5]
    for path in (v3, v4):
        assert [json.loads(text)["id"] for text in case_texts(path)] == [
            c["id"] for c in load_results(path)["cases"]]
        assert main(["report", str(path), "--junit", str(tmp_path / "r.xml")]) == 1  # failures
        assert (tmp_path / "r.xml").read_bytes() == (FIXTURES / "junit.xml").read_bytes()
        merged = tmp_path / "merged.json"
        assert main(["merge", str(path), "--out", str(merged)]) == 1  # its failures
        assert load_results(merged)["version"] == 5
        assert len(list(case_texts(merged))) == 12
    assert main(["compare", str(v3), str(v4)]) == 0  # the same run: nothing moved
    assert "conv2d" in capsys.readouterr().out


def _on_disk(tmp_path: Path, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """`cases` saved as a results file and read back as a run's end reads them: one at a time."""
    path = tmp_path / "many.json"
    run = {**copy.deepcopy(RUN), "boards": [{"name": f"b{i}", "virtual": i % 2 == 0} for i in range(4)]}
    save_results({"run": run, "cases": cases}, path)
    return {"run": run, "cases": CaseStream(lambda: case_texts(path), len(cases))}


def test_summary_and_annotations_of_many_cases_keep_the_in_memory_renderings(tmp_path: Path) -> None:
    """Cut to the budget, the worst first, the notice naming the cases left out: as before."""
    results = _on_disk(tmp_path, many_cases())
    assert render_summary(results, limit_bytes=8000) == (FIXTURES / "many_summary_8k.md").read_text()
    assert render_summary(results) == (FIXTURES / "many_summary.md").read_text()
    assert "\n".join(annotations(results)) + "\n" == (FIXTURES / "many_annotations.txt").read_text()


def test_the_table_printed_in_slices_reads_as_one_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = many_cases(40)
    cases[5]["id"] = "a_case_id_long_enough_to_make_the_table_wider_than_the_ci_log_" * 2  # columns shrink
    results = _on_disk(tmp_path, cases)
    printed = []
    for rows in (10**6, 7):
        monkeypatch.setattr(console, "ROWS_PER_TABLE", rows)
        text = io.StringIO()
        render_table(results, make_console(text))
        printed.append(text.getvalue())
    assert printed[0] == printed[1]
    assert len(printed[0].splitlines()) == 1 + 4 + 2 + 40 + 2  # run, boards, head, rows, totals


def test_write_junit_is_junit_xmls_document_whatever_the_strings(tmp_path: Path) -> None:
    """The reference: junit-xml's own `to_xml_report_string` over the same testsuites."""
    cases = many_cases(60)
    for index, text in enumerate(["cr\rin id", "amp & <tag> \"q\"", "tab\tnl\nid", "é ✓ \x85\x86 𝔸", "nul\x00"]):
        cases[index * 7]["id"] = text
        cases[index * 7 + 1]["message"] = text
        cases[index * 7 + 2]["logs"] = {"runner": text * 3, "uart": "\r\n".join([text] * 3)}
    run = {**copy.deepcopy(RUN), "boards": [{"name": f"b{i}", "virtual": i % 2 == 0} for i in range(4)]}
    write_junit({"run": run, "cases": cases}, tmp_path / "junit.xml")
    suites: dict[str, Any] = {}
    for case in cases:
        name = suite_name(case)
        suites.setdefault(name, _testsuite(name, case.get("board"), run)).test_cases.append(_testcase(case, run))
    expected = junit_xml.to_xml_report_string(list(suites.values()))
    assert (tmp_path / "junit.xml").read_bytes().decode("utf-8") == expected
    assert_valid_junit(tmp_path / "junit.xml")
