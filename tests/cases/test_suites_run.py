"""ops cases at both precisions and a user's checked manifest, lowered and run on a virtual
board through the real adb server: the per-case metrics reach results.json."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("suites")
    done = subprocess.run(
        [sys.executable, "-m", "hil", "run", "--board", "virtual", "--out", str(tmp / "out"),
         "--cache-dir", str(tmp / "cache"), "--precision", "all",
         "--suite", "ops", "--suite", str(FIXTURES / "checked.yaml"),
         "--filter", "conv2d_stride2", "--filter", "checked.*"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    cases = json.loads((tmp / "out" / "results.json").read_text())["cases"]
    return done, {f"{c['classname']}.{c['id']}": c for c in cases}


def test_everything_passes(run):
    done, cases = run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(cases) == sorted([
        "ops.fp32.conv2d_stride2", "ops.a8w8.conv2d_stride2",
        "checked.fp32.tiny_classifier", "checked.a8w8.tiny_classifier",
        "checked.fp32.add_user_inputs", "checked.a8w8.add_user_inputs",
    ])
    assert {c["verdict"] for c in cases.values()} == {"PASS"}


def test_a8w8_case_records_its_tolerance_rule_and_metrics(run):
    _, cases = run
    conv = cases["ops.a8w8.conv2d_stride2"]
    (output,) = conv["outputs"]
    assert output["atol_rule"].startswith("0.001 + 2 x quantization step ")
    scale = float(output["atol_rule"].rsplit(" ", 1)[1])
    assert output["atol"] == pytest.approx(0.001 + 2 * scale, rel=1e-5) and 0 < scale < 1
    assert output["min_sqnr_db"] == 30.0 and output["cosine"] > 0.999
    assert output["mae"] <= output["max_abs"] <= output["atol"]
    assert conv["lowering_s"]["quantize"] > 0 and conv["lowering_s"]["lower"] > 0
    assert conv["pte_bytes"] > 0
    delegation = conv["delegation"]
    assert delegation["delegated_op_count"] == len(delegation["delegated_ops"]) > 0
    assert "aten.convolution.default" in delegation["delegated_ops"]
    fp32 = cases["ops.fp32.conv2d_stride2"]["outputs"][0]
    # conv2d_stride2 is upstream's test_fp32_conv2d_with_bias: judged with its harness's atol
    assert fp32["atol_rule"] == "case atol" and fp32["atol"] == 1e-3 and fp32["rtol"] == 1e-3
    assert "quantize" not in cases["ops.fp32.conv2d_stride2"]["lowering_s"]


def test_checker_metrics_reach_the_results(run):
    _, cases = run
    for precision in ("fp32", "a8w8"):
        checker = cases[f"checked.{precision}.tiny_classifier"]["checker"]
        assert checker["name"] == "classifier" and checker["ok"] is True
        metrics = checker["metrics"]
        assert metrics["samples"] == 16
        assert 0.5 <= metrics["top1_agreement"] <= metrics["top3_agreement"] <= 1.0
        assert 0.0 <= metrics["top1_accuracy"] <= 1.0
    assert cases["checked.fp32.tiny_classifier"]["checker"]["metrics"]["top1_agreement"] == 1.0
    assert cases["checked.fp32.add_user_inputs"]["checker"] is None
