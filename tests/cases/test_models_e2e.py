"""One reduced model per checker kind (classifier, segmentation, super-resolution, asr, masked
LM) end to end on a virtual board at fp32 and A8W8, with the expectation outcomes, nested
inputs and the manifest's A8W8 default beside them (tests/fixtures/checkers.yaml); then the
same A8W8 cases with the board's `noise` fault: noise of a broken kernel's size (0.3 x the
output's spread) fails every one, noise well below a quantization step (0.003 x) none.

Three `hil run`s on the session's virtual board, sharing one artifact cache: the noisy runs
lower nothing. The cache is kept between sessions (tests/conftest.py KEPT_ARTIFACTS: minutes of
lowering, keyed by everything lowering depends on); `--full` lowers from scratch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "tests" / "fixtures" / "checkers.yaml"
MODELS = ("classifier", "segmentation", "super_resolution", "asr", "masked_lm")
A8W8 = [*(f"checkers.a8w8.{m}" for m in MODELS), "checkers.a8w8.conv_default_tolerance"]

pytestmark = pytest.mark.slow


def _run(board, tmp: Path, cache: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "hil", "run", "--board", board.address, "--out", str(tmp),
         "--cache-dir", str(cache), "--suite", str(MANIFEST), *args],
        cwd=REPO, capture_output=True, text=True, timeout=1800,
    )
    cases = json.loads((tmp / "results.json").read_text())["cases"]
    return done, {f"{c['classname']}.{c['id']}": c for c in cases}


@pytest.fixture(scope="module")
def runs(virtual_board, tmp_path_factory, kept_artifact_cache):
    tmp = tmp_path_factory.mktemp("checkers")
    cache = kept_artifact_cache
    clean = _run(virtual_board, tmp / "clean", cache, "--precision", "all")
    noisy = {}
    try:
        for rel in (0.3, 0.003):
            virtual_board.control(f"fault noise,rel={rel},times=0")
            noisy[rel] = _run(virtual_board, tmp / f"noise-{rel}", cache, "--precision", "a8w8",
                              *(arg for key in A8W8 for arg in ("--filter", key)))
            virtual_board.control("fault clear")
    finally:
        virtual_board.control("fault clear")
    return clean, noisy


def test_every_checker_kind_passes_at_both_precisions_with_margins(runs):
    (done, cases), _ = runs
    for model in MODELS:
        for precision in ("fp32", "a8w8"):
            case = cases[f"checkers.{precision}.{model}"]
            assert case["verdict"] == "PASS", (case["message"], done.stderr[-2000:])
            checker = case["checker"]
            assert checker["ok"] and checker["name"] == model
            margin = checker["metrics"].get("fp32_margin_rel")
            assert model == "super_resolution" or margin > 1.0, (model, checker["metrics"])
    assert cases["checkers.a8w8.classifier"]["checker"]["metrics"]["top1_agreement"] >= 0.9
    assert cases["checkers.a8w8.masked_lm"]["checker"]["metrics"]["masked_tokens"] > 0


def test_manifest_defaults_nested_inputs_and_expectations(runs):
    (done, cases), _ = runs
    conv = cases["checkers.a8w8.conv_default_tolerance"]
    assert conv["verdict"] == "PASS"
    assert conv["outputs"][0]["atol_rule"].startswith(
        "manifest default, the ops suite's A8W8 rule: 0.001 + 2 x quantization step ")
    assert cases["checkers.fp32.conv_default_tolerance"]["outputs"][0]["atol_rule"] == "case atol"
    nested = cases["checkers.fp32.index_put_nested"]
    assert nested["verdict"] == "PASS" and len(nested["outputs"]) == 1
    known = cases["checkers.fp32.known_failure"]
    assert known["verdict"] == "XFAIL" and known["actual_verdict"] == "FAIL_MISMATCH"
    assert known["expected"]["reason"] == "export adds 0.5"
    stale = cases["checkers.fp32.stale_expectation"]
    assert stale["verdict"] == "XPASS" and stale["message"].startswith("unexpectedly passed")
    skipped = cases["checkers.fp32.skipped"]
    assert skipped["verdict"] == "SKIP" and skipped["message"] == "skipped: not on this lab"
    failing = sorted(key for key, c in cases.items() if c["verdict"] not in ("PASS", "XFAIL", "SKIP"))
    assert failing == ["checkers.fp32.stale_expectation"] and done.returncode == 1
    assert "1 xfail" in done.stdout


def test_broken_kernel_noise_fails_every_a8w8_gate_and_sub_step_noise_none(runs):
    _, noisy = runs
    _, loud = noisy[0.3]
    _, quiet = noisy[0.003]
    assert sorted(loud) == sorted(quiet) == sorted(A8W8)
    assert {key: c["verdict"] for key, c in loud.items()} == dict.fromkeys(A8W8, "FAIL_MISMATCH")
    assert {key: c["verdict"] for key, c in quiet.items()} == dict.fromkeys(A8W8, "PASS")
