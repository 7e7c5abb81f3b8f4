"""The run's recording path: every finished case journaled at once, results.json and JUnit
rewritten together at checkpoints, both written whatever ends the run (a failure of hil
included), and no rendering's garbage left behind."""

from __future__ import annotations

import gc
import json
import socket
import xml.dom.minidom
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hil.board.spec import BoardSpec
from hil.cases import load_suite
from hil.report.results import load_results
from hil.run import Run, RunOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _options(out: Path, **fields: Any) -> RunOptions:
    settings: dict[str, Any] = {
        "cases": (), "boards": (), "flow": "portable", "chipset": "E9955", "out_dir": out,
        "results_path": out / "results.json", "junit_path": out / "junit.xml",
    }
    settings.update(fields)
    return RunOptions(**settings)


def _record(index: int) -> dict[str, Any]:
    return {"suite": "soak", "precision": "fp32", "id": f"c{index:04d}", "classname": "soak.fp32",
            "board": "b", "verdict": "PASS", "message": "", "logs": {"runner": "ok\n" * 40}}


def _junit_ids(path: Path) -> list[str]:
    return [case.get("name") for case in ET.parse(path).getroot().iter("testcase")]


def test_junit_is_rewritten_with_results_json_at_each_checkpoint(tmp_path: Path) -> None:
    run = Run(_options(tmp_path))
    rewrites = 0
    for index in range(120):
        before = run.recorder.writer.checkpoints
        run.recorder.add(_record(index))
        on_disk = [c["id"] for c in json.loads((tmp_path / "results.json").read_text())["cases"]]
        assert _junit_ids(tmp_path / "junit.xml") == on_disk  # the same moment, always
        assert [c["id"] for c in load_results(tmp_path / "results.json")["cases"]] == [
            f"c{i:04d}" for i in range(index + 1)]  # the journal has every case at once
        rewrites += run.recorder.writer.checkpoints - before
    assert rewrites < 30  # not one per case (about log(120) / log(1.25))
    run.recorder.close("complete")
    assert len(_junit_ids(tmp_path / "junit.xml")) == 120
    assert not (tmp_path / "results.json.journal").exists()


def test_no_junit_document_outlives_its_rendering(tmp_path: Path) -> None:
    run = Run(_options(tmp_path))
    gc.collect()
    gc.disable()  # only the run's own collection may free the rendering's reference cycles
    try:
        for index in range(50):
            run.recorder.add(_record(index))
        documents = [o for o in gc.get_objects() if isinstance(o, xml.dom.minidom.Document)]
    finally:
        gc.enable()
    assert documents == []


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on: a network board that never answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield port


def test_a_failure_of_hil_mid_run_leaves_both_files_with_every_finished_case(
    tmp_path: Path, closed_port: int
) -> None:
    cases = tuple(load_suite(str(FIXTURES / "tiny.yaml")))

    def fail_on_the_second(record: dict[str, Any]) -> None:
        if record["id"] == cases[1].id:
            raise RuntimeError("a bug in hil")

    options = _options(tmp_path, cases=cases, boards=(BoardSpec(virtual=False, adb=f"127.0.0.1:{closed_port}"),),
                       idle_timeout_s=1.0)
    run = Run(options, on_record=fail_on_the_second)  # no usable board: every case ERROR_INFRA
    with pytest.raises(RuntimeError, match="a bug in hil"):
        run.execute()
    document = json.loads((tmp_path / "results.json").read_text())  # no journal needed
    assert document["run"]["status"] == "running"  # it did not end as a run ends
    finished = [case.id for case in cases[:2]]
    assert [c["id"] for c in document["cases"]] == finished
    assert _junit_ids(tmp_path / "junit.xml") == finished
