"""The results writer: results.json is a valid document at every moment, every finished case
is in the journal at once, the rewrites of results.json cost O(cases) over a run, and a run
killed at any moment leaves every finished case to load_results; load_results rejects
anything else with a one-line UsageError naming the file."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hil.errors import UsageError
from hil.report.results import TEXT_CAP_BYTES, journal_path, load_results
from hil.report.writer import CHECKPOINT_GROWTH, ResultsWriter

from . import CASES, RUN, case, sample_results

REPO = Path(__file__).resolve().parents[2]


def _strict_json(path: Path) -> dict:
    def reject(constant: str) -> None:
        raise AssertionError(f"{constant} in {path}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)


def test_file_is_valid_json_after_each_add_and_every_case_loads(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.json"
    writer = ResultsWriter(path, RUN)
    assert _strict_json(path)["cases"] == []
    for count, record in enumerate(CASES, start=1):
        writer.add(record)
        on_disk = _strict_json(path)  # a checkpoint: valid, maybe a few cases behind
        assert on_disk["run"]["status"] == "running"
        assert sum(on_disk["totals"].values()) == len(on_disk["cases"]) <= count
        document = load_results(path)  # with the journal: every case so far
        assert len(document["cases"]) == count
        assert document["cases"][-1]["id"] == record["id"]
    assert document["totals"] == sample_results()["totals"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.json", "results.json.journal"]
    writer.finish("complete")
    assert _strict_json(path)["totals"] == sample_results()["totals"]
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]  # the journal is gone


def test_results_json_is_rewritten_a_logarithmic_number_of_times(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, RUN)
    cases = 800  # each add costs an fdatasync: milliseconds on a busy disk
    for index in range(cases):
        writer.add(case("soak", "fp32", f"c{index}", "PASS"))
    # each rewrite waits for the journal to grow by CHECKPOINT_GROWTH of the file: geometric
    assert writer.checkpoints <= math.log(cases) / math.log(1 + CHECKPOINT_GROWTH) + 10
    assert len(_strict_json(path)["cases"]) >= cases / (1 + CHECKPOINT_GROWTH) - 1
    assert len(load_results(path)["cases"]) == cases


def test_a_writer_killed_with_sigkill_leaves_every_case_to_load_results(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    script = (
        "import json, os, signal, sys\n"
        "from hil.report.writer import ResultsWriter\n"
        "run, cases = json.loads(sys.stdin.read())\n"
        "writer = ResultsWriter(sys.argv[1], run)\n"
        "for record in cases:\n"
        "    writer.add(record)\n"
        "writer.update_run(flow='portable')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    many = [case("soak", "fp32", f"c{i}", "PASS") for i in range(200)]
    done = subprocess.run([sys.executable, "-c", script, str(path)], input=json.dumps([RUN, many]),
                          text=True, cwd=REPO, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL
    assert len(_strict_json(path)["cases"]) < 200  # the last checkpoint is behind...
    document = load_results(path)  # ...the journal is not
    assert [c["id"] for c in document["cases"]] == [c["id"] for c in many]
    assert document["run"]["status"] == "running"
    assert document["run"]["flow"] == "portable"
    assert document["run"]["recovered_from_journal"] is True


def test_a_torn_last_journal_line_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, RUN)
    writer.add(CASES[0])
    writer.add(CASES[1])
    with open(journal_path(path), "ab") as journal:
        journal.write(b'{"case": {"suite": "smo')  # killed in the middle of a write
    assert [c["id"] for c in load_results(path)["cases"]] == ["conv2d", "linear"]
    os.close(writer._journal)  # type: ignore[arg-type]  # the writer is gone


def test_a_journal_line_that_is_not_an_entry_is_one_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, RUN)
    writer.add(CASES[0])
    with open(journal_path(path), "ab") as journal:
        journal.write(b"[1, 2]\n" + b'{"case": {"suite": "smo')  # a list, then a torn line
    with pytest.raises(UsageError, match=r"line 3 is not a journal entry"):
        load_results(path)
    os.close(writer._journal)  # type: ignore[arg-type]  # the writer is gone


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
    writer.checkpoint()  # what the run does when hil itself fails: no finish()
    os.unlink(journal_path(path))
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
    assert [c["id"] for c in writer.current()["cases"]] == ["conv2d"]


def _write(path: Path, document: object) -> None:
    path.write_text(json.dumps(document))


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (None, None),
        ("{not json", None),
        ([], None),
        ({**sample_results(), "schema": "something/else"}, "schema"),
        ({**sample_results(), "version": 6}, "version"),
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


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_every_earlier_version_stays_readable(tmp_path: Path, version: int) -> None:
    """Version 3 added fields (run.planned, boards' left_out and labgrid), version 4 boards'
    build and flashes, `case_lines` and run.capacity_lost, version 5 the build tuple (run.
    executorch_git, packages, suites, boards' runner); files of earlier versions, which have
    none of them, still load; a version from the future does not."""
    document = sample_results()
    document["version"] = version
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    assert [c["id"] for c in load_results(path)["cases"]] == [c["id"] for c in document["cases"]]
    document["version"] = 6
    path.write_text(json.dumps(document))
    with pytest.raises(UsageError, match="field 'version' is 6"):
        load_results(path)
