"""Quantization checkers on synthetic outputs whose metrics are known in closed form."""

import math

import numpy as np
import pytest

from hil.checkers import (
    CHECKERS,
    checker_spec,
    edit_distance,
    greedy_ctc,
    mean_iou,
    psnr_db,
    run_checker,
)

rng = np.random.default_rng(0)


def _logits(rows: int, classes: int, margin: float = 5.0) -> np.ndarray:
    logits = rng.normal(size=(rows, classes))
    logits[np.arange(rows), rng.integers(0, classes, rows)] += margin
    return logits.astype(np.float32)


def test_classifier_agreement_counts_top1_and_topk():
    fp32 = _logits(20, 10)
    board = fp32.copy()
    best = fp32.argmax(1)
    # 2 samples lose their top-1 to a runner-up but keep it in the top 3
    for row in (0, 1):
        board[row, (best[row] + 1) % 10] = fp32[row, best[row]] + 1.0
    # 1 sample pushes it out of the top 3
    board[2, best[2]] = fp32[2].min() - 1.0
    result = run_checker(checker_spec("classifier"), [board], [fp32], None)
    assert result.metrics["top1_agreement"] == pytest.approx(17 / 20)
    assert result.metrics["top3_agreement"] == pytest.approx(19 / 20)
    assert not result.ok
    assert result.reason == "top-1 agreement 0.850 < 0.9"  # top-3 (0.95) holds


def test_classifier_passes_on_identical_logits_and_reports_label_accuracy():
    fp32 = _logits(8, 5)
    labels = fp32.argmax(1)
    labels[:2] = (labels[:2] + 1) % 5
    result = run_checker(checker_spec("classifier", {"topk": {1: 1.0}}), [fp32], [fp32], labels)
    assert result.ok and result.metrics["top1_agreement"] == 1.0
    assert result.metrics["top1_accuracy"] == result.metrics["top1_accuracy_fp32"] == 0.75
    assert result.metrics["sqnr_vs_fp32_db"] == math.inf
    assert result.metrics["cosine_vs_fp32"] == pytest.approx(1.0)


def test_psnr_of_a_constant_offset():
    fp32 = rng.uniform(0, 1, size=(3, 3, 8, 8))
    assert psnr_db(fp32 + 0.01, fp32, 1.0) == pytest.approx(40.0)
    assert psnr_db(fp32, fp32, 1.0) == math.inf
    good = run_checker(checker_spec("super_resolution"), [fp32 + 0.01], [fp32], None)
    assert good.ok and good.metrics["psnr_db"] == pytest.approx(40.0)
    bad = run_checker(checker_spec("super_resolution"), [fp32 + 0.1], [fp32], fp32)
    assert not bad.ok and bad.reason == "PSNR vs fp32 20.00 dB <= 35 dB"
    assert bad.metrics["psnr_vs_target_db"] == pytest.approx(20.0)
    assert bad.metrics["psnr_vs_target_db_fp32"] == math.inf
    signal = float(np.mean(fp32.astype(np.float64) ** 2))
    assert bad.metrics["sqnr_vs_fp32_db"] == pytest.approx(10 * math.log10(signal / 0.01))


def test_mean_iou_of_known_maps():
    reference = np.array([[0, 0, 1, 1], [0, 0, 1, 1]])
    predicted = np.array([[0, 0, 0, 1], [0, 0, 1, 1]])
    # class 0: I=4, U=5; class 1: I=3, U=4
    assert mean_iou(predicted, reference, 2) == pytest.approx((4 / 5 + 3 / 4) / 2)
    assert mean_iou(reference, reference, 21) == 1.0
    ignored = np.array([[0, 0, 255, 255], [0, 0, 1, 1]])
    assert mean_iou(predicted, ignored, 2, ignore=255) == pytest.approx(1.0)


def test_segmentation_checker_judges_argmax_maps():
    fp32 = rng.normal(size=(2, 4, 6, 6))
    fp32[:, 1] += 10.0  # class 1 everywhere
    board = fp32.copy()
    board[0, 2, :3] += 30.0  # half of image 0 becomes class 2
    result = run_checker(checker_spec("segmentation"), [board], [fp32], None)
    # image 0: class 1 I=18 U=36, class 2 I=0 U=18 -> 0.25; image 1: 1.0
    assert result.metrics["miou"] == pytest.approx((0.25 + 1.0) / 2)
    assert result.metrics["pixel_agreement"] == pytest.approx(0.75)
    assert not result.ok and result.reason == "mIoU vs fp32 0.625 < 0.7"


def test_edit_distance_and_greedy_ctc():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], [1, 2]) == 2
    blank = 3
    frames = [0, 0, 3, 0, 1, 1, 3, 3, 2]
    emissions = np.full((4, len(frames)), -5.0)
    emissions[frames, np.arange(len(frames))] = 5.0
    assert greedy_ctc(emissions, blank) == [0, 0, 1, 2]


def test_asr_checker_cer_and_ctc_loss():
    labels, frames = 5, 40
    fp32 = rng.normal(size=(2, labels, frames)).astype(np.float32) * 4
    same = run_checker(checker_spec("asr"), [fp32], [fp32], None)
    assert same.ok and same.metrics["cer"] == 0.0
    assert same.metrics["ctc_loss"] == pytest.approx(same.metrics["ctc_loss_fp32"])
    noisy = fp32 + rng.normal(size=fp32.shape).astype(np.float32) * 20
    worse = run_checker(checker_spec("asr"), [noisy], [fp32], None)
    assert not worse.ok and worse.metrics["cer"] > 0.25 and worse.reason.startswith("CER vs fp32")
    assert worse.metrics["ctc_loss"] > same.metrics["ctc_loss"]
    strict = run_checker(checker_spec("asr", {"max_cer": 1e9, "max_ctc_loss": 0.001}), [fp32], [fp32], None)
    assert not strict.ok and strict.reason.startswith("CTC loss")


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        ("nope", {}, "unknown checker 'nope'"),
        ("classifier", {"top1": 0.9}, "top1: unknown parameter"),
        ("classifier", {"topk": {0: 0.9}}, "topk: expected a mapping"),
        ("classifier", {"topk": {1: 1.5}}, "topk: expected a mapping"),
        ("super_resolution", {"min_psnr_db": "high"}, "min_psnr_db: expected a number"),
        ("segmentation", {"class_axis": 1.5}, "class_axis: expected an integer"),
    ],
)
def test_bad_checker_parameters_name_the_parameter(name, params, expected):
    with pytest.raises(ValueError, match=expected):
        checker_spec(name, params)


def test_checker_on_a_missing_or_misshapen_output_fails_cleanly():
    fp32 = _logits(4, 3)
    missing = run_checker(checker_spec("classifier", {"output": 1}), [fp32], [fp32], None)
    assert not missing.ok and "no output 1" in missing.reason
    shaped = run_checker(checker_spec("classifier"), [fp32[:2]], [fp32], None)
    assert not shaped.ok and "shape" in shaped.reason


def test_every_checker_has_an_output_parameter():
    assert all("output" in checker.defaults for checker in CHECKERS.values())


def test_masked_lm_judges_only_the_masked_positions():
    fp32 = rng.normal(size=(2, 6, 50)).astype(np.float32)
    targets = np.full((2, 6), -1)
    targets[0, [1, 4]] = [7, 8]
    targets[1, [0, 2, 5]] = [1, 2, 3]
    fp32[0, 1, 7] = fp32[1, 0, 1] = 10.0  # two of five right against the targets
    board = fp32.copy()
    board[0, 3] = -fp32[0, 3]  # an unmasked position: not judged
    board[1, 5, fp32[1, 5].argmax()] = -10.0  # one masked position flips
    result = run_checker(checker_spec("masked_lm"), [board], [fp32], targets)
    assert result.metrics["masked_tokens"] == 5
    assert result.metrics["top1_agreement"] == pytest.approx(4 / 5) and not result.ok
    assert result.reason == "masked-token top-1 agreement 0.800 < 0.9"
    assert result.metrics["top1_accuracy_fp32"] == pytest.approx(2 / 5)
    assert run_checker(checker_spec("masked_lm", {"min_top1": 0.8}), [board], [fp32], targets).ok


def test_checkers_record_the_fp32_margin_they_saw():
    fp32 = np.array([[0.0, 3.0, 1.0], [2.0, 0.0, 1.5], [0.0, 0.0, 4.0]], dtype=np.float32)
    metrics = run_checker(checker_spec("classifier", {"topk": {1: 0.9}}), [fp32], [fp32], None).metrics
    assert metrics["fp32_margin_median"] == pytest.approx(2.0)
    assert metrics["fp32_margin_min"] == pytest.approx(0.5)
    assert metrics["fp32_margin_rel"] == pytest.approx(2.0 / float(np.std(fp32)), rel=1e-5)
    maps = np.zeros((1, 3, 2, 2), dtype=np.float32)
    maps[0, 1] = 1.0
    assert run_checker(checker_spec("segmentation"), [maps], [maps], None).metrics["fp32_margin_min"] == 1.0
