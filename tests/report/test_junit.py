"""JUnit XML rendering: a testsuite per (suite, precision, board) with the counts consumers
read, xsd validity, verdict mapping, clean and capped system-out."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped

from hil.report.junit import write_junit
from hil.report.results import TEXT_CAP_BYTES

from . import case, sample_results

XSD = Path(__file__).parents[1] / "fixtures" / "junit-10.xsd"  # Jenkins' schema (MIT), vendored


@pytest.fixture
def junit(tmp_path: Path) -> Path:
    path = tmp_path / "junit.xml"
    write_junit(sample_results(), path)
    return path


def _suites(path: Path) -> dict:
    return {suite.name: suite for suite in JUnitXml.fromfile(str(path))}


def _testcases(path: Path) -> dict:
    return {(tc.classname, tc.name): tc for suite in JUnitXml.fromfile(str(path)) for tc in suite}


def _counts(suite) -> tuple[int, int, int, int]:
    return (suite.tests, suite.failures, suite.errors, suite.skipped)


def test_junitparser_reads_counts_per_suite_precision_and_board(junit: Path) -> None:
    suites = _suites(junit)
    assert list(suites) == [
        "smoke.fp32@virtual-0",
        "smoke.fp32@no-board",
        "models.a8w8@virtual-0",
        "models.a8w8@no-board",
    ]
    assert _counts(suites["smoke.fp32@virtual-0"]) == (3, 1, 0, 0)
    assert _counts(suites["smoke.fp32@no-board"]) == (1, 0, 0, 1)
    assert _counts(suites["models.a8w8@virtual-0"]) == (2, 1, 1, 0)
    assert _counts(suites["models.a8w8@no-board"]) == (1, 0, 1, 0)
    assert [tc.name for tc in suites["smoke.fp32@virtual-0"]] == ["conv2d", "linear", "add"]
    xml = JUnitXml.fromfile(str(junit))
    assert sum(s.tests for s in xml) == 7
    assert sum(s.failures for s in xml) == 2 and sum(s.errors for s in xml) == 2
    assert sum(s.skipped for s in xml) == 1


def test_each_board_gets_its_own_testsuite_with_its_properties(tmp_path: Path) -> None:
    results = sample_results()
    results["run"]["boards"].append(
        {
            "name": "R3CX40ABCD",
            "adb": "R3CX40ABCD",
            "chipset": "E9955",
            "virtual": False,
            "properties": {"ro.build.fingerprint": "samsung/e9955/1.2:user", "ro.secret": "x"},
        }
    )
    results["cases"] = [
        case("smoke", "fp32", "conv2d", "PASS"),
        case("smoke", "fp32", "add", "PASS", board="R3CX40ABCD"),
        case("smoke", "fp32", "linear", "FAIL_MISMATCH", board="R3CX40ABCD", message="off"),
    ]
    path = tmp_path / "junit.xml"
    write_junit(results, path)
    suites = _suites(path)
    assert list(suites) == ["smoke.fp32@virtual-0", "smoke.fp32@R3CX40ABCD"]
    real = suites["smoke.fp32@R3CX40ABCD"]
    assert _counts(real) == (2, 1, 0, 0)
    assert all(tc.classname == "smoke.fp32" for tc in real)
    properties = {p.name: p.value for p in real.properties()}
    assert properties["board"] == "R3CX40ABCD"
    assert properties["board.virtual"] == "false"
    assert properties["board.ro.build.fingerprint"] == "samsung/e9955/1.2:user"
    assert "board.ro.secret" not in properties
    assert real.hostname == "R3CX40ABCD"


def test_xml_validates_against_jenkins_xsd_minus_known_extensions(junit: Path) -> None:
    tree = ET.parse(junit)
    root = tree.getroot()
    for element in [root, *root.iter("testsuite")]:
        element.attrib.pop("disabled", None)
    for element in root.iter("testcase"):
        element.attrib.pop("file", None)
        element.attrib.pop("line", None)
    xmlschema.XMLSchema(str(XSD)).validate(tree)


def test_testcase_attributes_come_from_the_case(junit: Path) -> None:
    root = ET.parse(junit).getroot()
    conv = next(tc for tc in root.iter("testcase") if tc.get("name") == "conv2d")
    assert conv.get("classname") == "smoke.fp32"
    assert float(conv.get("time")) == pytest.approx(1.25 + 0.01 + 0.02 + 0.01)
    assert (conv.get("file"), conv.get("line")) == ("hil/cases/smoke.py", "10")


def test_failure_carries_message_type_and_detail(junit: Path) -> None:
    add = _testcases(junit)[("smoke.fp32", "add")]
    (result,) = add.result
    assert isinstance(result, Failure)
    assert "max abs error 0.5 exceeds tolerance" in result.message
    assert result.type == "FAIL_MISMATCH"
    assert "worst at [0, 3]" in result.text


def test_errors_and_skips_map_to_their_elements(junit: Path) -> None:
    cases = _testcases(junit)
    (infra,) = cases[("models.a8w8", "resnet18")].result
    assert isinstance(infra, Error)
    assert (infra.type, infra.message) == ("ERROR_INFRA", "board lost: adb offline")
    (skip,) = cases[("smoke.fp32", "relu6")].result
    assert isinstance(skip, Skipped)
    assert skip.message == "flow xnnpack cannot express relu6"


def test_pass_undelegated_passes_with_a_warning_in_system_out(junit: Path) -> None:
    linear = _testcases(junit)[("smoke.fp32", "linear")]
    assert linear.is_passed
    lines = linear.system_out.splitlines()
    assert lines[0] == "WARNING: PASS_UNDELEGATED: aten.linear.default ran on the CPU"
    assert "undelegated ops: aten.linear.default" in lines


def test_system_out_names_the_virtual_board_and_strips_control_characters(junit: Path) -> None:
    out = _testcases(junit)[("models.a8w8", "mobilenet_v2")].system_out
    assert "board: virtual-0 (VIRTUAL: ExecuTorch host runtime, no NPU)" in out
    assert "loading model\nSegmentation fault" in out
    assert not any(ch in out for ch in "\x1b\x00\x07\r")
    assert "[31m" not in out


def test_suite_properties_timestamp_and_hostname(junit: Path) -> None:
    suite = _suites(junit)["smoke.fp32@virtual-0"]
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["board"] == "virtual-0"
    assert properties["board.virtual"] == "true"
    assert properties["board.chipset"] == "E9955"
    assert properties["board.runner_profile"] == "hil"
    assert (properties["hil"], properties["torch"], properties["executorch"]) == (
        "0.1.0",
        "2.14.1",
        "1.5.1",
    )
    assert properties["virtual"] == "true"
    assert properties["run_id"] == "20261130-033500-ab12cd"
    assert properties["sdk"] == "none"
    assert (properties["chipset"], properties["flow"], properties["git_sha"]) == (
        "E9955",
        "xnnpack",
        "0123abcd",
    )
    assert suite.timestamp == "2026-11-30T03:35:00Z"
    assert suite.hostname == "virtual-0"


def test_each_megabyte_log_is_capped_on_its_own(tmp_path: Path) -> None:
    results = sample_results()
    results["cases"] = [
        case(
            "smoke",
            "fp32",
            "big",
            "FAIL_RUN",
            message="boom",
            logs={
                "logcat": "l" * 1024 * 1024 + "\nlogcat end",
                "runner": "x" * 1024 * 1024 + "\nrunner end",
                "uart": "u" * 1024 * 1024 + "\nuart end",
            },
        )
    ]
    path = tmp_path / "junit.xml"
    write_junit(results, path)
    out = _testcases(path)[("smoke.fp32", "big")].system_out
    sections = out.split("\n--- ")
    assert [s.split(" log ---")[0] for s in sections[1:]] == ["runner", "uart", "logcat"]
    for section, end in zip(sections[1:], ["runner end", "uart end", "logcat end"], strict=True):
        body = section.split("\n", 1)[1]
        assert len(body.encode()) <= TEXT_CAP_BYTES
        assert "bytes cut by hil" in body
        assert body.endswith(end)
    assert path.stat().st_size < 4 * TEXT_CAP_BYTES


def test_rewrite_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text("old")
    write_junit(sample_results(), path)
    assert [p.name for p in tmp_path.iterdir()] == ["junit.xml"]
    assert len(_suites(path)) == 4
