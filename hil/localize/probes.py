"""Probe artifacts: the graph cut after a node, lowered with the case's flow (and, for A8W8,
its quantization), with the host's values of the cut's frontier as references.

A probe is an ordinary `Artifact` (`model.pte`, `input_<i>.bin`, `reference_<i>.bin`,
`meta.json`), so a board runs it and `hil.judge` judges it exactly as a case: for A8W8 its
`output_scales` are the quantization steps read at the probed nodes (`output_scales` of the
cut graph), which `judge` turns into the case's own tolerance rule.

Probes are cached by content in the artifact cache: the key is the case's own artifact key
(its definition and source, flow, chipset, versions, hil's lowering code) plus the cut and
hil's localization code. The cut plan (the node table and each cut's frontier) is cached
beside them, so a warm localization builds no graph at all.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hil.cases.case import Case
from hil.lower.artifact import Artifact, TensorMeta
from hil.lower.cache import ArtifactCache, cache_key
from hil.report.results import atomic_write_text

LOCALIZE_SOURCES = Path(__file__).parent
"""hil's localization code: a change to it invalidates every probe and plan."""
PLANS_FOLDER = "localize-plans"
"""Folder of cached cut plans under the artifact cache's root."""

HOST_WORK = threading.Lock()
"""Held while a probe is built in this process (torch.export and lowering are not run from
two threads at once); never held across a board run."""


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    parts = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(LOCALIZE_SOURCES.glob("*.py"))}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def plan_key(case: Case, flow: str, chipset: str) -> str:
    """Content address of the case's cut plan."""
    record = {"case": cache_key(case, flow, chipset), "localize": _code_digest(), "what": "plan"}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def probe_key(case: Case, flow: str, chipset: str, outputs: Sequence[str]) -> str:
    """Content address of the probe returning the values of `outputs`."""
    record = {"case": cache_key(case, flow, chipset), "localize": _code_digest(),
              "outputs": list(outputs)}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


class PlanCache:
    """Cut plans as JSON files under `root/localize-plans/`."""

    def __init__(self, root: Path) -> None:
        self.folder = root / PLANS_FOLDER

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached plan record, None when absent or unreadable."""
        path = self.folder / key[:2] / f"{key}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, record: dict[str, Any]) -> None:
        """Store a plan record (atomically)."""
        path = self.folder / key[:2] / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record))


def _write_tensor(path: Path, tensor: Any) -> TensorMeta:
    array = np.ascontiguousarray(tensor.detach().numpy())
    path.write_bytes(array.tobytes())
    return TensorMeta(str(array.dtype), tuple(int(d) for d in array.shape))


def build_probe(graph_module: Any, inputs: Sequence[Any], outputs: Sequence[str], quantized: bool,
                flow: str, chipset: str, folder: Path) -> Artifact:
    """Cut `graph_module` to return the values of `outputs`, lower it for `flow` into
    `folder` with its host references; LoweringFailed (hil.lower) when a stage fails."""
    import torch

    from hil.localize.graph import cut_module
    from hil.lower import LoweringFailed
    from hil.lower.build import check_runner_limits
    from hil.lower.flows import lower_program
    from hil.lower.quantize import output_scales
    from hil.verdict import Verdict

    folder.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}

    def stage(name: str, verdict: Verdict, work: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return work()
        except LoweringFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - a probe that cannot be built is skipped, said why
            first = (str(exc).strip().splitlines() or [""])[0]
            message = f"probe {name} failed: {type(exc).__name__}: {first}"
            raise LoweringFailed(verdict, message[:300]) from exc
        finally:
            times[name] = round(time.perf_counter() - start, 4)

    cut = stage("cut", Verdict.FAIL_EXPORT, lambda: cut_module(graph_module, outputs))
    exported = stage("export", Verdict.FAIL_EXPORT, lambda: torch.export.export(cut, tuple(inputs)))
    with torch.no_grad():
        references = stage("reference", Verdict.FAIL_EXPORT, lambda: list(cut(*inputs)))
    scales = output_scales(cut) if quantized else ()
    lowered = stage("lower", Verdict.FAIL_LOWER, lambda: lower_program(exported, flow, chipset))
    program = check_runner_limits(lowered.buffer)
    (folder / "model.pte").write_bytes(lowered.buffer)
    input_meta = tuple(_write_tensor(folder / f"input_{i}.bin", t) for i, t in enumerate(inputs))
    output_meta = tuple(_write_tensor(folder / f"reference_{i}.bin", t) for i, t in enumerate(references))
    artifact = Artifact(
        folder=folder, flow=flow, inputs=input_meta, outputs=output_meta,
        pte_bytes=len(lowered.buffer), delegated_calls=lowered.delegated_calls,
        delegated_ops=lowered.delegated_ops, undelegated_ops=lowered.undelegated_ops,
        times_s=times, output_scales=tuple(scales), program_memory=program.memory(),
    )
    artifact.save_meta()
    return artifact


def probe_artifact(cache: ArtifactCache | None, key: str, scratch: Path,
                   build: Callable[[Path], Artifact]) -> tuple[Artifact, bool]:
    """The probe from the cache (and True), else built by `build(folder)` — into the cache
    when there is one, else into `scratch` — under HOST_WORK (and False)."""
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit, True
    with HOST_WORK:
        if cache is not None:
            return cache.put(key, build), False
        return build(scratch), False
