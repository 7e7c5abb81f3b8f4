"""The lowering stages (hil/lower/__init__.py): build the case's module, its inputs, quantize,
export, lower, and write the artifact with host references."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from hil.cases.case import Case, InputSpec
from hil.cases.datasets import Samples
from hil.lower import LoweringFailed, rig
from hil.lower.artifact import TARGETS_FILE, Artifact, TensorMeta
from hil.lower.flows import lower_program
from hil.lower.quantize import CALIBRATION_SAMPLES, output_scales, quantize_a8w8
from hil.runner.pte import ProgramInfo, read_program
from hil.verdict import Verdict

T = TypeVar("T")


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
    except LoweringFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure inside a stage is the case's verdict
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise LoweringFailed(
            verdict, f"{name} failed: {type(exc).__name__}: {first}"[:500], traceback.format_exc()
        ) from exc
    finally:
        times[name] = round(time.perf_counter() - start, 4)


def _flatten(outputs: Any) -> list[torch.Tensor]:
    """The output leaves in pytree order (the order of the program's outputs). A leaf that
    is not a tensor is FAIL_LOWER: enn_executor_runner calls `toTensor()` on every output."""
    leaves = torch.utils._pytree.tree_leaves(outputs)
    for index, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.Tensor):
            raise LoweringFailed(
                Verdict.FAIL_LOWER,
                f"output {index} is of type {type(leaf).__name__}, not a tensor: enn_executor_runner "
                "calls toTensor() on every output and would abort",
            )
    return leaves


def check_runner_limits(buffer: bytes) -> ProgramInfo:
    """The serialised program as a runner sees it; FAIL_LOWER when it is one
    `enn_executor_runner` cannot run (non-tensor inputs or outputs, a method too large for
    its 4 MB method allocator)."""
    info = read_program(buffer)
    problems = info.runner_limits()
    if problems:
        raise LoweringFailed(Verdict.FAIL_LOWER, f"not runnable by enn_executor_runner: {problems[0]}")
    return info


def _meta(tensor: torch.Tensor) -> TensorMeta:
    return TensorMeta(str(tensor.numpy().dtype), tuple(int(d) for d in tensor.shape))


def _write_raw(path: Path, tensor: torch.Tensor) -> None:
    path.write_bytes(np.ascontiguousarray(tensor.detach().numpy()).tobytes())


def case_samples(case: Case) -> Samples:
    """The forward inputs the board runs (and their targets, for a dataset)."""
    if case.dataset is not None:
        samples = case.dataset.batch(0, case.seed)
        return Samples(_as_inputs(samples.inputs), samples.targets)
    if case.input_fn is not None:
        return Samples(_as_inputs(case.input_fn(case.seed)))
    return Samples(make_inputs(case.inputs, case.seed))


def calibration_samples(case: Case) -> list[tuple[Any, ...]]:
    """A8W8 calibration batches: the suite's, else the dataset's batches 1..N, else seeded
    samples of the inputs (never the evaluation batch itself)."""
    if case.calibration is not None:
        return [_as_inputs(sample) for sample in case.calibration()]
    if case.dataset is not None:
        return [_as_inputs(case.dataset.batch(i, case.seed).inputs)
                for i in range(1, case.dataset.calibration + 1)]
    if case.input_fn is not None:
        return [_as_inputs(case.input_fn(case.seed + 1000 + i)) for i in range(CALIBRATION_SAMPLES)]
    return [make_inputs(case.inputs, case.seed + 1000 + i) for i in range(CALIBRATION_SAMPLES)]


def _as_inputs(value: Any) -> tuple[Any, ...]:
    """The forward's positional arguments: one tensor, or a sequence whose items may nest
    (a tuple of index tensors, a dict), every leaf a tensor. Leaves are made contiguous: a
    program exported from a channels-last example expects channels-last bytes, while the
    runner is given each input in the standard (contiguous) layout."""
    inputs = (value,) if isinstance(value, torch.Tensor) else tuple(value)
    leaves = torch.utils._pytree.tree_leaves(inputs)
    bad = [type(leaf).__name__ for leaf in leaves if not isinstance(leaf, torch.Tensor)]
    if not leaves or bad:
        raise TypeError("inputs must be a tensor or a (nested) sequence of tensors"
                        + (f", got a leaf of type {bad[0]}" if bad else ", got no tensor"))
    return torch.utils._pytree.tree_map(lambda t: t.contiguous(), inputs)


def input_leaves(inputs: tuple[Any, ...]) -> list[torch.Tensor]:
    """The program's inputs, in order: the leaves of the forward's arguments in pytree
    order, as `torch.export` flattens them (`input_<i>.bin`)."""
    return torch.utils._pytree.tree_leaves(inputs)


def build_artifact(case: Case, flow: str, chipset: str, folder: Path) -> Artifact:
    """Lower `case` for `flow` into `folder` and compute host references with the eager
    module (the quantized module for A8W8); a case that says `skip` stops here (SKIP). A
    case with a checker also gets the fp32 model's outputs (`fp32_reference_<i>.bin`) and
    its dataset's targets (`targets.npy`)."""
    if case.skip:
        raise LoweringFailed(Verdict.SKIP, f"skipped: {case.skip}")
    folder.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}

    def build() -> Any:
        torch.manual_seed(case.seed)
        return case.factory().eval()

    module = _stage(Verdict.FAIL_EXPORT, "build", times, build)
    samples = _stage(Verdict.FAIL_EXPORT, "inputs", times, lambda: case_samples(case))
    inputs = samples.inputs
    fp32_module = module
    scales: tuple[float | None, ...] = ()
    if case.precision == "a8w8":
        calibration = _stage(Verdict.FAIL_QUANTIZE, "calibration", times,
                             lambda: calibration_samples(case))
        module = _stage(Verdict.FAIL_QUANTIZE, "quantize", times,
                        lambda: quantize_a8w8(fp32_module, inputs, calibration, flow != "enn", case.qat))
        scales = output_scales(module)
    exported = _stage(
        Verdict.FAIL_EXPORT, "export", times, lambda: torch.export.export(module, inputs)
    )
    with torch.no_grad():
        references = _stage(Verdict.FAIL_EXPORT, "reference", times, lambda: _flatten(module(*inputs)))
        fp32_references = references
        if case.checker is not None and module is not fp32_module:
            fp32_references = _stage(Verdict.FAIL_EXPORT, "reference_fp32", times,
                                     lambda: _flatten(fp32_module(*inputs)))
    lowered = _stage(
        Verdict.FAIL_LOWER, "lower", times, lambda: lower_program(rig.apply(exported), flow, chipset)
    )
    program = check_runner_limits(lowered.buffer)
    (folder / "model.pte").write_bytes(lowered.buffer)
    flat_inputs = input_leaves(inputs)
    for i, tensor in enumerate(flat_inputs):
        _write_raw(folder / f"input_{i}.bin", tensor)
    for i, tensor in enumerate(references):
        _write_raw(folder / f"reference_{i}.bin", tensor)
    if fp32_references is not references:
        for i, tensor in enumerate(fp32_references):
            _write_raw(folder / f"fp32_reference_{i}.bin", tensor)
    if case.checker is not None and samples.targets is not None:
        np.save(folder / TARGETS_FILE, np.asarray(samples.targets), allow_pickle=False)
    artifact = Artifact(
        folder=folder,
        flow=flow,
        inputs=tuple(_meta(t) for t in flat_inputs),
        outputs=tuple(_meta(t) for t in references),
        pte_bytes=len(lowered.buffer),
        delegated_calls=lowered.delegated_calls,
        delegated_ops=lowered.delegated_ops,
        undelegated_ops=lowered.undelegated_ops,
        times_s=times,
        output_scales=scales,
        fp32_reference=fp32_references is not references,
        targets=case.checker is not None and samples.targets is not None,
        program_memory=program.memory(),
    )
    artifact.save_meta()
    return artifact
