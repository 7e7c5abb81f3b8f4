"""The results writer keeps a valid, loadable results.json at every moment; load_results
rejects anything else with a one-line UsageError naming the file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hil.errors import UsageError
from hil.report.results import TEXT_CAP_BYTES, ResultsWriter, load_results

from . import CASES, RUN, case, sample_results


def _strict_json(path: Path) -> dict:
    def reject(constant: str) -> None:
        raise AssertionError(f"{constant} in {path}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)


def test_file_is_valid_json_after_each_add(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.json"
    writer = ResultsWriter(path, RUN)
    assert _strict_json(path)["cases"] == []
    for count, record in enumerate(CASES, start=1):
        writer.add(record)
        document = _strict_json(path)
        assert len(document["cases"]) == count
        assert document["cases"][-1]["id"] == record["id"]
        assert sum(document["totals"].values()) == count
        assert document["run"]["status"] == "running"
    assert document["totals"] == sample_results()["totals"]
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]


def test_non_finite_floats_are_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, RUN)
    outputs = [
        {
            "index": 0,
            "max_abs": 0.0,
            "max_rel": math.nan,
            "sqnr_db": math.inf,
            "history": (1.5, -math.inf),
        }
    ]
    writer.add(case("smoke", "fp32", "same", "PASS", outputs=outputs))
    (output,) = _strict_json(path)["cases"][0]["outputs"]
    assert output == {
        "index": 0,
        "max_abs": 0.0,
        "max_rel": None,
        "sqnr_db": None,
        "history": [1.5, None],
    }


def test_interrupted_writer_still_leaves_a_loadable_running_file(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, RUN)
    writer.add(CASES[0])
    writer.add(CASES[1])
    del writer  # the run died: finish() never called
    document = load_results(path)
    assert document["run"]["status"] == "running"
    assert document["run"]["finished"] is None
    assert [c["id"] for c in document["cases"]] == ["conv2d", "linear"]


def test_finish_sets_status_and_finished(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, {**RUN, "started": "2026-11-30T03:35:00Z"})
    writer.add(CASES[0])
    writer.finish("interrupted")
    run = load_results(path)["run"]
    assert run["status"] == "interrupted"
    assert run["started"] == "2026-11-30T03:35:00Z"
    assert run["finished"].endswith("Z")
    with pytest.raises(ValueError, match="status"):
        writer.finish("done")


def test_message_is_one_line_and_detail_and_logs_are_capped(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, RUN)
    huge = "é" * (1024 * 1024)
    writer.add(
        case(
            "smoke",
            "fp32",
            "big",
            "FAIL_RUN",
            message="runner died\r\nby SIGSEGV\n",
            detail=huge,
            logs={"runner": huge, "lower": "short"},
        )
    )
    record = load_results(path)["cases"][0]
    assert record["message"] == "runner died by SIGSEGV"
    assert len(record["detail"].encode()) <= TEXT_CAP_BYTES
    assert len(record["logs"]["runner"].encode()) <= TEXT_CAP_BYTES
    assert "bytes cut by hil" in record["logs"]["runner"]
    assert record["logs"]["lower"] == "short"


def test_unfinished_case_is_rejected_and_the_file_kept(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, RUN)
    writer.add(CASES[0])
    with pytest.raises(ValueError, match="not a finished verdict"):
        writer.add(case("smoke", "fp32", "pending", ""))
    assert [c["id"] for c in load_results(path)["cases"]] == ["conv2d"]
    assert [c["id"] for c in writer.document["cases"]] == ["conv2d"]


def _write(path: Path, document: object) -> None:
    path.write_text(json.dumps(document))


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (None, None),
        ("{not json", None),
        ([], None),
        ({**sample_results(), "schema": "something/else"}, "schema"),
        ({**sample_results(), "version": 3}, "version"),
        ({**sample_results(), "run": None}, "run"),
        ({**sample_results(), "cases": [{**CASES[0], "verdict": "MAYBE"}]}, "cases[0].verdict"),
    ],
    ids=["missing", "garbage", "list", "schema", "version", "run", "verdict"],
)
def test_load_results_rejects_bad_files_naming_file_and_field(
    tmp_path: Path, content: object, field: str | None
) -> None:
    path = tmp_path / "results.json"
    if isinstance(content, str):
        path.write_text(content)
    elif content is not None:
        _write(path, content)
    with pytest.raises(UsageError) as caught:
        load_results(path)
    message = str(caught.value)
    assert str(path) in message
    assert "\n" not in message
    if field:
        assert f"'{field}'" in message


def test_load_results_accepts_a_complete_document(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    _write(path, {**sample_results(), "future_field": 1})
    assert load_results(path)["cases"][2]["verdict"] == "FAIL_MISMATCH"
