"""Lowering: case → export → (quantize) → lower for a flow → `.pte` + inputs + host references.

One function per stage, each taking the previous stage's product; any stage failure becomes a
`LoweringFailed` carrying the verdict that names the stage.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from hil.cases.case import Case, InputSpec
from hil.lower.artifact import Artifact, TensorMeta
from hil.lower.flows import lower_program
from hil.verdict import Verdict

CALIBRATION_SAMPLES = 8
"""Seeded calibration batches for A8W8 when a case gives none."""

T = TypeVar("T")


class LoweringFailed(Exception):
    """A stage failed; `verdict` names it (FAIL_EXPORT, FAIL_QUANTIZE, FAIL_LOWER)."""

    def __init__(self, verdict: Verdict, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.verdict = verdict
        self.message = message
        self.detail = detail


def make_inputs(specs: tuple[InputSpec, ...], seed: int) -> tuple[torch.Tensor, ...]:
    """Seeded inputs: uniform floats in [low, high), integers in [low, high)."""
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for spec in specs:
        dtype = getattr(torch, spec.dtype)
        if dtype.is_floating_point:
            t = torch.rand(spec.shape, generator=generator, dtype=torch.float32)
            t = (t * (spec.high - spec.low) + spec.low).to(dtype)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, spec.shape, generator=generator).to(torch.bool)
        else:
            t = torch.randint(int(spec.low), int(spec.high), spec.shape, generator=generator)
            t = t.to(dtype)
        tensors.append(t)
    return tuple(tensors)


def _stage(verdict: Verdict, name: str, times: dict[str, float], fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - any failure inside a stage is the case's verdict
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise LoweringFailed(
            verdict, f"{name} failed: {type(exc).__name__}: {first}"[:500], traceback.format_exc()
        ) from exc
    finally:
        times[name] = round(time.perf_counter() - start, 4)


def _flatten(outputs: Any) -> list[torch.Tensor]:
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    if isinstance(outputs, (tuple, list)):
        return [t for item in outputs for t in _flatten(item)]
    raise TypeError(f"unsupported output type {type(outputs).__name__}")


def _meta(tensor: torch.Tensor) -> TensorMeta:
    return TensorMeta(str(tensor.numpy().dtype), tuple(int(d) for d in tensor.shape))


def _write_raw(path: Path, tensor: torch.Tensor) -> None:
    path.write_bytes(np.ascontiguousarray(tensor.detach().numpy()).tobytes())


def _quantize(module: torch.nn.Module, example: tuple[torch.Tensor, ...], case: Case) -> Any:
    from executorch.backends.samsung.quantizer.quantizer import EnnQuantizer, Precision
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = EnnQuantizer()
    quantizer.setup_quant_params(Precision.A8W8)
    graph = torch.export.export(module, example).module()
    prepared = prepare_pt2e(graph, quantizer)
    for i in range(CALIBRATION_SAMPLES):
        prepared(*make_inputs(case.inputs, case.seed + 1000 + i))
    # fold_quantize=True: the host kernels abort on unfolded per-channel weight quantize ops.
    return convert_pt2e(prepared, fold_quantize=True)


def build_artifact(case: Case, flow: str, chipset: str, folder: Path) -> Artifact:
    """Lower `case` for `flow` into `folder` and compute host references with the eager
    module (the quantized module for A8W8)."""
    folder.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    inputs = make_inputs(case.inputs, case.seed)

    def build() -> Any:
        torch.manual_seed(case.seed)
        return case.factory().eval()

    module = _stage(Verdict.FAIL_EXPORT, "build", times, build)
    if case.precision == "a8w8":
        module = _stage(
            Verdict.FAIL_QUANTIZE, "quantize", times, lambda: _quantize(module, inputs, case)
        )
    exported = _stage(
        Verdict.FAIL_EXPORT, "export", times, lambda: torch.export.export(module, inputs)
    )
    with torch.no_grad():
        references = _stage(Verdict.FAIL_EXPORT, "reference", times, lambda: _flatten(module(*inputs)))
    lowered = _stage(
        Verdict.FAIL_LOWER, "lower", times, lambda: lower_program(exported, flow, chipset)
    )
    (folder / "model.pte").write_bytes(lowered.buffer)
    for i, tensor in enumerate(inputs):
        _write_raw(folder / f"input_{i}.bin", tensor)
    for i, tensor in enumerate(references):
        _write_raw(folder / f"reference_{i}.bin", tensor)
    artifact = Artifact(
        folder=folder,
        flow=flow,
        inputs=tuple(_meta(t) for t in inputs),
        outputs=tuple(_meta(t) for t in references),
        pte_bytes=len(lowered.buffer),
        delegated_calls=lowered.delegated_calls,
        delegated_ops=lowered.delegated_ops,
        undelegated_ops=lowered.undelegated_ops,
        times_s=times,
    )
    artifact.save_meta()
    return artifact
