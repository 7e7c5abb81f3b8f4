"""Whole runs through the real adb server, adbutils and a virtual board."""

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from tests.junit_schema import assert_valid_junit
from tests.results_schema import assert_valid_results

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

pytestmark = pytest.mark.slow


def hil_run(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
    junit, results = tmp / "out.xml", tmp / "r.json"
    done = subprocess.run(
        [sys.executable, "-m", "hil", "run", "--board", "virtual", "--out", str(tmp / "out"),
         "--junit", str(junit), "--results", str(results), *args],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    return done, junit, results


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    return hil_run(tmp_path_factory.mktemp("smoke"), "--suite", "smoke", "--iterations", "3", "--warmup", "1")


def test_smoke_on_a_virtual_board_passes(smoke_run):
    done, junit, results = smoke_run
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(results.read_text())
    assert_valid_results(doc)
    assert doc["run"]["status"] == "complete"
    assert doc["run"]["virtual"] is True and doc["run"]["flow"] == "xnnpack"
    assert [b["chipset"] for b in doc["run"]["boards"]] == ["E9955"]
    assert len(doc["cases"]) >= 6
    for case in doc["cases"]:
        assert case["verdict"] == "PASS", case
        assert case["board"] == "virtual-0"
        assert case["outputs"] and all(o["ok"] for o in case["outputs"])
        latency = case["latency_ms"]
        # 3 invocations, each: 1 warm-up, its 1st run, then the timed sample (tests/runner)
        assert (latency["n"], len(latency["samples"]), len(latency["runner_avg"]), latency["warmup"]) == (3, 3, 3, 1)
        assert latency["first"] > 0 and latency["init"] >= 0 and latency["load"] > 0
        assert all(isinstance(latency[k], float) for k in ("p50", "p90", "p99", "mean", "trimmed", "std"))
        assert latency["unstable"] in (True, False) and latency["cv_limit"] == 0.10
        # the program's memory from the .pte, the runner's peak through the board's `time -v`
        assert case["memory"]["program_bytes"] > 0 and case["memory"]["peak_rss_kib"] > 0
        assert case["board_state"]["hottest_c"] == 38.0  # the virtual board's idle sysfs
        assert case["board_state"]["cooldown"]["cooled"] is True
        assert "VIRTUAL" in case["logs"]["runner"]
    assert doc["version"] == 5
    import executorch.version

    from hil.virtual.runner_front import __file__ as front
    # the build tuple hil bisect reads (schema 5)
    assert doc["run"]["executorch_git"] == executorch.version.git_version
    assert doc["run"]["packages"]["executorch"] == doc["run"]["executorch"]
    assert doc["run"]["suites"]["smoke"]["cases"] == len(doc["cases"])
    assert len(doc["run"]["suites"]["smoke"]["digest"]) == 64
    board = doc["run"]["boards"][0]
    assert board["build"]["after"] == board["properties"]["ro.build.fingerprint"]
    assert board["runner"]["sha256"] == hashlib.sha256(Path(front).read_bytes()).hexdigest()
    assert board["start_s"] > 0  # the executor's warm-up included: the board's start-up
    assert board["runner_profile"] == {"name": "hil", "source": "virtual board",
                                       "description": board["runner_profile"]["description"]}
    assert "VIRTUAL" in done.stdout


def test_smoke_junit_parses_and_validates(smoke_run):
    _, junit, results = smoke_run
    cases = json.loads(results.read_text())["cases"]
    xml = JUnitXml.fromfile(str(junit))
    testcases = [tc for suite in xml for tc in suite]
    assert sorted(tc.name for tc in testcases) == sorted(c["id"] for c in cases)
    assert all(tc.classname == "smoke.fp32" for tc in testcases)
    assert sum(suite.failures + suite.errors for suite in xml) == 0
    out = "\n".join(tc.system_out or "" for tc in testcases)
    assert out.count("latency ms: init ") == out.count("memory: planned ") == len(cases)
    assert out.count("board state: hottest 38.0 °C (BIG)") == len(cases)
    assert_valid_junit(junit)


def test_impossible_tolerance_is_a_mismatch_with_exit_1(tmp_path):
    done, junit, results = hil_run(tmp_path, "--suite", str(FIXTURES / "mismatch.yaml"))
    assert done.returncode == 1, done.stdout + done.stderr
    verdicts = {c["id"]: c for c in json.loads(results.read_text())["cases"]}
    assert verdicts["mlp_ok"]["verdict"] == "PASS"
    bad = verdicts["export_differs"]
    assert bad["verdict"] == "FAIL_MISMATCH"
    assert re.search(r"output 0: max abs error 0\.5 exceeds tolerance \(atol 0\.01", bad["message"])
    failures = [tc for suite in JUnitXml.fromfile(str(junit)) for tc in suite if tc.result]
    assert [tc.name for tc in failures] == ["export_differs"]
    assert "max abs error 0.5" in failures[0].result[0].message
    # the board's outputs are written for the case that did not pass, and only for it
    (written,) = (tmp_path / "out" / "cases").glob("*/output-virtual-0/output_0.bin")
    assert written.parent.parent.name == "c0001" and written.stat().st_size > 0  # export_differs


def test_off_host_mode_passes_and_results_say_so(tmp_path):
    """`--virtual-device-time`: the virtual board replays outputs (hil checks them as ever)
    and the run's records name the mode, so nobody reads its latencies as measurements."""
    done, junit, results = hil_run(tmp_path, "--suite", str(FIXTURES / "tiny.yaml"), "--flow", "portable",
                                   "--iterations", "2", "--virtual-device-time", "20")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(results.read_text())
    (board,) = doc["run"]["boards"]
    assert board["device_time"] == "20" and board["properties"]["ro.hil.virtual.device_time"] == "20"
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * 3
    for case in doc["cases"]:  # the 1st invocation runs the runtime, the 2nd replays: 20 ms
        assert case["latency_ms"]["samples"][-1] >= 20
    assert junit.read_text().count("off-host mode, device time 20") == 3  # each case's board line
    bad = subprocess.run([sys.executable, "-m", "hil", "run", "--virtual-device-time", "fast"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 3 and "--virtual-device-time 'fast'" in bad.stderr
    assert "Traceback" not in bad.stderr
