"""The `Artifact`: what lowering hands to a board — a `.pte`, raw inputs and host references."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hil.files import read_file

META_FILE = "meta.json"
TARGETS_FILE = "targets.npy"


@dataclass(frozen=True)
class TensorMeta:
    """dtype and shape of one input or output, enough to read its raw bytes back."""

    dtype: str
    """A numpy dtype name (`float32`, `int64`, ...)."""
    shape: tuple[int, ...]
    """Tensor shape."""

    @property
    def nbytes(self) -> int:
        return np.dtype(self.dtype).itemsize * math.prod(self.shape)  # not np.prod: no array


@dataclass(frozen=True)
class Artifact:
    """A lowered case on the host, ready to push.

    Folder layout: `model.pte`, `input_<i>.bin`, `reference_<i>.bin`, `meta.json`; for a case
    with a checker also `fp32_reference_<i>.bin` (A8W8) and `targets.npy` (dataset targets).
    """

    folder: Path
    """Where the files live."""
    flow: str
    """The lowering flow (`xnnpack`, `portable`, `enn`)."""
    inputs: tuple[TensorMeta, ...]
    """Program inputs, in order."""
    outputs: tuple[TensorMeta, ...]
    """Program outputs, in order (the host references have these)."""
    pte_bytes: int
    """Size of `model.pte`."""
    delegated_calls: int
    """`executorch_call_delegate` nodes in the lowered graph."""
    delegated_ops: tuple[str, ...] = ()
    """Op names that ended inside a delegate (when the partitioner tells)."""
    undelegated_ops: tuple[str, ...] = ()
    """Op names left to the CPU (portable kernels)."""
    times_s: dict[str, float] = field(default_factory=dict)
    """Seconds spent per stage: `build`, `inputs`, `calibration`, `quantize`, `export`,
    `reference`, `lower`."""
    output_scales: tuple[float | None, ...] = ()
    """A8W8: per output, its quantization step after convert_pt2e (the larger scale of its
    final dequantize and of the producing op's quantized inputs; None: not quantized); empty
    for fp32."""
    fp32_reference: bool = False
    """`fp32_reference_<i>.bin` hold the fp32 model's outputs (A8W8 with a checker)."""
    targets: bool = False
    """`targets.npy` holds the dataset's targets for the checker."""
    program_memory: dict[str, Any] | None = None
    """The program's planned memory, read from the `.pte` when it was lowered
    (`ProgramInfo.memory`); None in an artifact cached before hil kept it (`planned_memory`
    reads the `.pte` then)."""

    @property
    def pte(self) -> Path:
        return self.folder / "model.pte"

    def input_file(self, index: int) -> Path:
        return self.folder / f"input_{index}.bin"

    def reference_file(self, index: int) -> Path:
        return self.folder / f"reference_{index}.bin"

    def read_reference(self, index: int) -> np.ndarray:
        """Host reference output `index` as an array of its dtype and shape."""
        return read_raw(self.reference_file(index), self.outputs[index])

    def read_fp32_reference(self, index: int) -> np.ndarray:
        """The fp32 model's output `index` (the reference itself for an fp32 case)."""
        if not self.fp32_reference:
            return self.read_reference(index)
        return read_raw(self.folder / f"fp32_reference_{index}.bin", self.outputs[index])

    def read_targets(self) -> np.ndarray | None:
        """The dataset's targets, when the artifact has them."""
        return np.load(self.folder / TARGETS_FILE, allow_pickle=False) if self.targets else None

    def output_scale(self, index: int) -> float | None:
        """The quantization step of output `index`, when it is quantized."""
        return self.output_scales[index] if index < len(self.output_scales) else None

    def planned_memory(self) -> dict[str, Any] | None:
        """The program's planned memory (`program_memory`, else read from the `.pte`: every
        case record has it, and a parse per case was a measurable share of hil's CPU per
        case); None when the `.pte` cannot be read."""
        if self.program_memory is not None:
            return self.program_memory
        from hil.runner.pte import PteError, read_program_file

        try:
            return read_program_file(self.pte).memory()
        except (OSError, PteError):
            return None

    def record_fields(self) -> dict[str, Any]:
        """What a case's results record says about its lowering: `.pte` size, seconds per
        stage (of the lowering that built the artifact), delegated and undelegated ops."""
        return {
            "pte_bytes": self.pte_bytes,
            "lowering_s": dict(self.times_s),
            "delegation": {
                "delegated_calls": self.delegated_calls,
                "delegated_ops": list(self.delegated_ops),
                "undelegated_ops": list(self.undelegated_ops),
                "delegated_op_count": len(self.delegated_ops),
                "undelegated_op_count": len(self.undelegated_ops),
            },
        }

    def save_meta(self) -> None:
        record = asdict(self)
        record["folder"] = None
        (self.folder / META_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")


def read_raw(path: Path, meta: TensorMeta) -> np.ndarray:
    """Raw bytes in `path` as an array of `meta`; ValueError when the size is wrong."""
    return raw_array(read_file(path), meta, path.name)


def raw_array(data: bytes, meta: TensorMeta, name: str) -> np.ndarray:
    """Raw bytes (of the file `name`) as an array of `meta`; ValueError when the size is
    wrong."""
    if len(data) != meta.nbytes:
        raise ValueError(f"{name}: {len(data)} bytes, expected {meta.nbytes}")
    return np.frombuffer(data, dtype=np.dtype(meta.dtype)).reshape(meta.shape)
