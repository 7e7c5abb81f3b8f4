"""Quantization checkers: task-level agreement of a board's outputs with the fp32 model's.

Elementwise tolerances say whether the board computed the lowered graph faithfully; a checker
says whether the quantized model still does its job. Each checker compares the board's
outputs for a small dataset (the batch of one run) with the fp32 model's outputs on the same
samples, and, when the dataset has targets (labels, masks, high-resolution images,
transcripts), also reports both against the targets (recorded, not judged).

| checker | output | judged metric (default floor) |
|---|---|---|
| `classifier` | logits `(N, classes)` | fp32 top-1 in the board's top-k (top-1 >= 0.9, top-3 >= 0.95) |
| `super_resolution` | images `(N, C, H, W)` in [0, peak] | mean PSNR vs fp32 (> 35 dB) |
| `segmentation` | logits `(N, classes, H, W)` | mean IoU of the argmax maps vs fp32 (>= 0.7) |
| `asr` | emissions `(N, labels, T)` | CER of greedy CTC decodes vs fp32 (<= 0.25); CTC loss |
| `masked_lm` | token logits `(N, length, vocab)` | masked tokens' top-1 agreement with fp32 (>= 0.9) |

The checkers that judge a decision (classifier, segmentation, asr, masked_lm) also record
the fp32 model's margin on the samples they judged: the gap between its top two scores
(`fp32_margin_median`, `fp32_margin_min`, in the output's units) and the median gap over the
standard deviation of the fp32 output (`fp32_margin_rel`). Agreement means something only
when that margin is well above the quantization error: a random head's is not.

The floors are upstream's (`backends/samsung/test/utils/quant_checkers.py`) read as
fractions; upstream compares percentages with fractional floors in two checkers, divides
by the root of the squared error in its PSNR, and measures against labels of pretrained
models, which random-init models here cannot have.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hil.verdict import sqnr_db


@dataclass(frozen=True)
class CheckerSpec:
    """Which checker a case runs, with its parameters (validated by `checker_spec`)."""

    name: str
    """A key of CHECKERS."""
    params: dict[str, Any] = field(default_factory=dict)
    """Overrides of the checker's defaults."""


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one checker."""

    name: str
    ok: bool
    metrics: dict[str, float]
    """Named figures (agreements, PSNR, mIoU, CER, losses), judged or recorded."""
    reason: str = ""
    """Empty when ok; else one line naming the metric, its value and its floor."""


Array = np.ndarray
CheckFn = Callable[[Array, Array, "Array | None", dict[str, Any]], CheckResult]


@dataclass(frozen=True)
class Checker:
    """A checker function with its parameter defaults."""

    check: CheckFn
    defaults: dict[str, Any]


def cosine_similarity(reference: Array, actual: Array) -> float:
    """Cosine of the angle between the flattened outputs (1.0 when both are all zeros)."""
    ref = reference.astype(np.float64).ravel()
    act = actual.astype(np.float64).ravel()
    if not (np.isfinite(ref).all() and np.isfinite(act).all()):  # (nan_to_num: 3x the rest)
        ref, act = np.nan_to_num(ref), np.nan_to_num(act)
    # sums, not BLAS's dot/norm: a BLAS call per case woke numpy's OpenBLAS threads, whose
    # spinning cost hil ~3 ms of CPU a case (scripts/bench_boards.py), for a vector product
    norms = math.sqrt(float(np.sum(ref * ref))) * math.sqrt(float(np.sum(act * act)))
    if norms == 0.0:
        return 1.0 if not ref.any() and not act.any() else 0.0
    return float(np.sum(ref * act) / norms) if math.isfinite(norms) else math.nan


# -- classifier ---------------------------------------------------------------------------


def _rows(logits: Array) -> Array:
    return logits.reshape(-1, logits.shape[-1]).astype(np.float64)


def _topk(logits: Array, k: int) -> Array:
    """Indices of the k largest values per row, best first (stable for ties)."""
    order = np.argsort(-logits, axis=-1, kind="stable")
    return order[:, :k]


def margins(scores: Array, axis: int) -> dict[str, float]:
    """The fp32 margin metrics of `scores` (top-1 minus top-2 along `axis`), see above."""
    ordered = np.sort(np.moveaxis(scores.astype(np.float64), axis, -1), axis=-1)
    gaps = (ordered[..., -1] - ordered[..., -2]).ravel()
    spread = float(np.std(scores))
    median = float(np.median(gaps)) if gaps.size else 0.0
    return {"fp32_margin_median": median, "fp32_margin_min": float(gaps.min()) if gaps.size else 0.0,
            "fp32_margin_rel": median / spread if spread > 0 else 0.0}


def check_classifier(board: Array, fp32: Array, targets: Array | None,
                     params: dict[str, Any]) -> CheckResult:
    """Top-k agreement: the share of samples whose fp32 top-1 class is in the board's top-k."""
    floors = {int(k): float(v) for k, v in params["topk"].items()}
    actual, reference = _rows(board), _rows(fp32)
    classes = actual.shape[1]
    best = _topk(reference, 1)[:, 0]
    ranked = _topk(actual, min(max(floors), classes))
    metrics: dict[str, float] = {}
    failures = []
    for k in sorted(floors):
        agreement = float(np.mean(np.any(ranked[:, :k] == best[:, None], axis=1)))
        metrics[f"top{k}_agreement"] = agreement
        if agreement < floors[k]:
            failures.append(f"top-{k} agreement {agreement:.3f} < {floors[k]:g}")
    if targets is not None:
        labels = np.asarray(targets).reshape(-1)
        if labels.shape[0] == actual.shape[0]:
            metrics["top1_accuracy"] = float(np.mean(ranked[:, 0] == labels))
            metrics["top1_accuracy_fp32"] = float(np.mean(best == labels))
    metrics["samples"] = float(actual.shape[0])
    metrics.update(margins(reference, axis=1))
    return CheckResult("classifier", not failures, metrics, "; ".join(failures))


# -- super-resolution ---------------------------------------------------------------------


def psnr_db(a: Array, b: Array, peak: float) -> float:
    """Peak signal-to-noise ratio of one image pair; +inf when identical."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0.0 else 10.0 * math.log10(peak * peak / mse)


def check_super_resolution(board: Array, fp32: Array, targets: Array | None,
                           params: dict[str, Any]) -> CheckResult:
    """Mean per-image PSNR of the board's images against the fp32 model's."""
    peak = float(params["peak"])
    values = [psnr_db(a, r, peak) for a, r in zip(board, fp32, strict=True)]
    mean = float(np.mean(values))
    metrics = {"psnr_db": mean, "samples": float(len(values))}
    if targets is not None and np.shape(targets) == board.shape:
        pairs = list(zip(board, fp32, targets, strict=True))
        metrics["psnr_vs_target_db"] = float(np.mean([psnr_db(a, t, peak) for a, _, t in pairs]))
        metrics["psnr_vs_target_db_fp32"] = float(np.mean([psnr_db(r, t, peak) for _, r, t in pairs]))
    floor = float(params["min_psnr_db"])
    ok = mean > floor
    return CheckResult("super_resolution", ok, metrics,
                       "" if ok else f"PSNR vs fp32 {mean:.2f} dB <= {floor:g} dB")


# -- segmentation -------------------------------------------------------------------------


def mean_iou(predicted: Array, reference: Array, classes: int, ignore: int | None = None) -> float:
    """Mean intersection-over-union over the classes present in either map (1.0 when both
    maps are empty after `ignore`)."""
    pred = predicted.reshape(-1).astype(np.int64)
    ref = reference.reshape(-1).astype(np.int64)
    if ignore is not None:
        keep = ref != ignore
        pred, ref = pred[keep], ref[keep]
    valid = (ref >= 0) & (ref < classes) & (pred >= 0) & (pred < classes)
    confusion = np.bincount(ref[valid] * classes + pred[valid], minlength=classes * classes)
    confusion = confusion.reshape(classes, classes)
    intersection = np.diag(confusion).astype(np.float64)
    union = confusion.sum(0) + confusion.sum(1) - intersection
    present = union > 0
    return float(np.mean(intersection[present] / union[present])) if present.any() else 1.0


def check_segmentation(board: Array, fp32: Array, targets: Array | None,
                       params: dict[str, Any]) -> CheckResult:
    """Mean per-image mIoU of the board's argmax map against the fp32 model's."""
    axis = int(params["class_axis"])
    classes = board.shape[axis]
    pred = np.argmax(board, axis=axis)
    ref = np.argmax(fp32, axis=axis)
    values = [mean_iou(p, r, classes) for p, r in zip(pred, ref, strict=True)]
    mean = float(np.mean(values))
    metrics = {"miou": mean, "pixel_agreement": float(np.mean(pred == ref)),
               "samples": float(len(values)), **margins(fp32, axis=axis)}
    if targets is not None and np.shape(targets) == pred.shape:
        ignore = int(params["ignore_index"])
        triples = list(zip(pred, ref, targets, strict=True))
        metrics["miou_vs_target"] = float(np.mean([mean_iou(p, t, classes, ignore) for p, _, t in triples]))
        metrics["miou_vs_target_fp32"] = float(np.mean([mean_iou(r, t, classes, ignore)
                                                        for _, r, t in triples]))
    floor = float(params["min_miou"])
    ok = mean >= floor
    return CheckResult("segmentation", ok, metrics, "" if ok else f"mIoU vs fp32 {mean:.3f} < {floor:g}")


# -- speech recognition -------------------------------------------------------------------


def edit_distance(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Levenshtein distance (insertions, deletions, substitutions all cost 1)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def greedy_ctc(emissions: Array, blank: int) -> list[int]:
    """Best-path CTC decoding of one `(labels, T)` emission matrix: argmax per frame, repeats
    collapsed, blanks removed."""
    best = np.argmax(emissions, axis=0)
    collapsed = [int(t) for i, t in enumerate(best) if i == 0 or t != best[i - 1]]
    return [t for t in collapsed if t != blank]


def ctc_loss(emissions: Array, targets: Sequence[Sequence[int]], blank: int) -> float:
    """Mean CTC loss (per target token) of `(N, labels, T)` emissions read as logits."""
    import torch

    logits = torch.from_numpy(np.array(emissions, dtype=np.float32))  # a writable copy
    log_probs = torch.log_softmax(logits, dim=1).permute(2, 0, 1)  # (T, N, labels)
    flat = [t for seq in targets for t in seq]
    loss = torch.nn.functional.ctc_loss(
        log_probs,
        torch.tensor(flat, dtype=torch.long),
        torch.full((logits.shape[0],), logits.shape[2], dtype=torch.long),
        torch.tensor([len(seq) for seq in targets], dtype=torch.long),
        blank=blank, reduction="mean", zero_infinity=True,
    )
    return float(loss)


def check_asr(board: Array, fp32: Array, targets: Array | None,
              params: dict[str, Any]) -> CheckResult:
    """Character error rate of the board's greedy CTC transcripts against the fp32 model's,
    and the CTC loss of both against the dataset's transcripts (the fp32 transcripts when the
    dataset has none)."""
    labels = board.shape[1]
    blank = int(params["blank"]) % labels
    board_text = [greedy_ctc(e, blank) for e in board]
    fp32_text = [greedy_ctc(e, blank) for e in fp32]
    errors = sum(edit_distance(r, h) for r, h in zip(fp32_text, board_text, strict=True))
    length = sum(len(r) for r in fp32_text)
    cer = errors / length if length else float(errors > 0)
    if targets is not None:
        truth = [[int(t) for t in row if t >= 0] for row in np.asarray(targets)]
    else:
        truth = fp32_text
    metrics = {
        "cer": float(cer),
        "ctc_loss": ctc_loss(board, truth, blank),
        "ctc_loss_fp32": ctc_loss(fp32, truth, blank),
        "samples": float(len(board_text)),
        **margins(fp32, axis=1),
    }
    if targets is not None:
        reference_cer = sum(edit_distance(t, h) for t, h in zip(truth, fp32_text, strict=True))
        metrics["cer_vs_target_fp32"] = reference_cer / max(1, sum(len(t) for t in truth))
    failures = []
    if cer > float(params["max_cer"]):
        failures.append(f"CER vs fp32 {cer:.3f} > {float(params['max_cer']):g}")
    if params["max_ctc_loss"] is not None and metrics["ctc_loss"] >= float(params["max_ctc_loss"]):
        failures.append(f"CTC loss {metrics['ctc_loss']:.3f} >= {float(params['max_ctc_loss']):g}")
    return CheckResult("asr", not failures, metrics, "; ".join(failures))


# -- masked language model ----------------------------------------------------------------


def check_masked_lm(board: Array, fp32: Array, targets: Array | None,
                    params: dict[str, Any]) -> CheckResult:
    """Top-1 agreement of the board's predicted tokens with the fp32 model's at the masked
    positions (where the targets are >= 0; every position without targets), and both models'
    accuracy against the masked tokens."""
    scores, reference = board.astype(np.float64), fp32.astype(np.float64)
    if targets is not None and np.shape(targets) == scores.shape[:-1]:
        chosen = np.asarray(targets) >= 0
    else:
        chosen = np.ones(scores.shape[:-1], dtype=bool)
    predicted, expected = scores.argmax(-1)[chosen], reference.argmax(-1)[chosen]
    agreement = float(np.mean(predicted == expected)) if predicted.size else 1.0
    metrics = {"top1_agreement": agreement, "masked_tokens": float(predicted.size),
               **margins(reference[chosen], axis=-1)}
    if targets is not None and np.shape(targets) == scores.shape[:-1]:
        truth = np.asarray(targets)[chosen]
        metrics["top1_accuracy"] = float(np.mean(predicted == truth))
        metrics["top1_accuracy_fp32"] = float(np.mean(expected == truth))
    floor = float(params["min_top1"])
    ok = agreement >= floor
    return CheckResult("masked_lm", ok, metrics,
                       "" if ok else f"masked-token top-1 agreement {agreement:.3f} < {floor:g}")


CHECKERS: dict[str, Checker] = {
    "classifier": Checker(check_classifier, {"topk": {1: 0.9, 3: 0.95}, "output": 0}),
    "super_resolution": Checker(check_super_resolution,
                                {"min_psnr_db": 35.0, "peak": 1.0, "output": 0}),
    "segmentation": Checker(check_segmentation,
                            {"min_miou": 0.7, "class_axis": 1, "ignore_index": 255, "output": 0}),
    "asr": Checker(check_asr, {"max_cer": 0.25, "max_ctc_loss": None, "blank": -1, "output": 0}),
    "masked_lm": Checker(check_masked_lm, {"min_top1": 0.9, "output": 0}),
}
"""Every checker by name, with its parameter defaults."""


def checker_spec(name: str, params: Mapping[str, Any] | None = None) -> CheckerSpec:
    """A validated CheckerSpec; ValueError naming the parameter otherwise."""
    if name not in CHECKERS:
        raise ValueError(f"unknown checker {name!r} (one of {', '.join(CHECKERS)})")
    given = dict(params or {})
    defaults = CHECKERS[name].defaults
    for key, value in given.items():
        if key not in defaults:
            raise ValueError(f"{key}: unknown parameter of checker {name!r} (allowed: {', '.join(defaults)})")
        if key == "topk":
            if (not isinstance(value, Mapping) or not value
                    or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in value)
                    or not all(_is_number(v) and 0 <= v <= 1 for v in value.values())):
                raise ValueError("topk: expected a mapping {k: floor} with k >= 1 and 0 <= floor <= 1")
        elif key == "max_ctc_loss" and value is None:
            continue
        elif not _is_number(value):
            raise ValueError(f"{key}: expected a number, got {value!r}")
        elif key in ("output", "class_axis", "ignore_index", "blank") and not isinstance(value, int):
            raise ValueError(f"{key}: expected an integer, got {value!r}")
    return CheckerSpec(name, given)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def run_checker(spec: CheckerSpec, board: Sequence[Array], fp32: Sequence[Array],
                targets: Array | None) -> CheckResult:
    """Run `spec` on the board's outputs and the fp32 model's (every output; the checker
    reads the one its `output` parameter names). Every checker also records the output's
    SQNR and cosine similarity against the fp32 model's (`sqnr_vs_fp32_db`, `cosine_vs_fp32`)."""
    checker = CHECKERS[spec.name]
    params = {**checker.defaults, **spec.params}
    index = int(params["output"])
    if not -len(board) <= index < len(board):
        return CheckResult(spec.name, False, {}, f"checker {spec.name}: no output {index}")
    if board[index].shape != fp32[index].shape:
        return CheckResult(spec.name, False, {}, f"checker {spec.name}: output {index} shape "
                           f"{list(board[index].shape)} != fp32 {list(fp32[index].shape)}")
    result = checker.check(board[index], fp32[index], targets, params)
    overall = {"sqnr_vs_fp32_db": sqnr_db(fp32[index], board[index]),
               "cosine_vs_fp32": cosine_similarity(fp32[index], board[index])}
    return dataclasses.replace(result, metrics={**result.metrics, **overall})
