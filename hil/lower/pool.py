"""Lower many cases: cached ones come straight from the cache, the rest in worker processes.

Each result is yielded as soon as it is ready, so boards start on the first artifacts while
the rest are still lowering.
"""

from __future__ import annotations

import functools
import logging
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from hil.cases.case import Case
from hil.forked_workers import TaskFailed, Workers
from hil.interrupts import Stop
from hil.lower.artifact import Artifact
from hil.lower.cache import ArtifactCache, cache_key
from hil.verdict import Verdict

log = logging.getLogger(__name__)

STOP_POLL_S = 0.2
"""How often a pool's lowering looks at the stop flag."""
POOL_THRESHOLD = 6
"""Below this many cases to lower, worker start-up (importing torch: seconds) costs more than
it saves: lower in this process."""
WORKER_IMPORTS = ("hil.lower", "executorch.exir", "executorch.kernels.quantized")
"""What every lowering imports, whatever its flow: imported once, before the workers fork
(hil/forked_workers.py); each spawned worker took ~12 s of CPU to import them itself."""


@dataclass(frozen=True)
class Lowering:
    """The outcome of lowering one case: an artifact, or the failed stage's verdict."""

    index: int
    """Position of the case in the input sequence."""
    artifact: Artifact | None
    verdict: Verdict | None = None
    message: str = ""
    detail: str = ""
    seconds: float = 0.0
    cached: bool = False


def _lower_one(case: Case, flow: str, chipset: str, folder: Path | None, cache_root: Path | None,
               key: str) -> tuple[Artifact | None, str | None, str, str]:
    """Worker entry point; returns plain values (exceptions with custom fields don't pickle)."""
    from hil.lower import LoweringFailed
    from hil.lower.build import build_artifact

    try:
        if cache_root is not None:
            artifact = ArtifactCache(cache_root).put(
                key, lambda scratch: build_artifact(case, flow, chipset, scratch)
            )
        else:
            assert folder is not None
            artifact = build_artifact(case, flow, chipset, folder)
    except LoweringFailed as exc:
        return None, exc.verdict.value, exc.message, exc.detail
    except Exception as exc:  # noqa: BLE001 - a bug in hil: the case records it
        message = f"{type(exc).__name__}: {exc}"[:300]
        return None, Verdict.ERROR_INTERNAL.value, message, traceback.format_exc()
    return artifact, None, "", ""


def warm_up(flow: str, chipset: str) -> None:
    """Lower a one-op program for a host flow (nothing for `enn`), so that what the exporter
    builds at its first lowering in a process is built once, in the workers' host, before they
    fork: XNNPACK's pattern graphs for its upsample and SDPA passes
    (`executorch/backends/xnnpack/partition/graphs/bilinear_2d.py`, `sdpa.py`, kept by
    `lru_cache`), the edge dialect's operator tables. Measured on a 2-core x86_64 VM: a one-op program's first
    lowering in a process took 13.8 s of CPU with `xnnpack` and 6.0 s with `portable`, the
    next 2.2 and 1.0 s; without this, every worker paid the first."""
    if flow == "enn":  # its lowering needs LITECORE's wrapper, which is not here to warm
        return
    import torch

    from hil.lower.flows import lower_program

    class Add(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x + y

    threads = torch.get_num_threads()
    # One thread while warming: an OpenMP thread team started in this process would be
    # inherited by the forked workers without its threads, and their first parallel op (a
    # convolution) would wait for them forever (libgomp after fork)
    torch.set_num_threads(1)
    try:
        lower_program(torch.export.export(Add(), (torch.ones(2), torch.ones(2))), flow, chipset)
    finally:
        torch.set_num_threads(threads)


def _needs_sdk_library_path() -> bool:
    """True when this process cannot load the ENN wrapper's SDK libraries itself; then the
    SDK's library folder is exported for the workers (`hil.sdk.export_library_path`)."""
    from hil.sdk import export_library_path, find_litecore, library_path_missing

    sdk = find_litecore()
    if sdk is None or sdk.missing or not library_path_missing(sdk):
        return False
    export_library_path(sdk)
    return True


def lower_cases(
    cases: Sequence[Case],
    flow: str,
    chipset: str,
    scratch: Path,
    cache: ArtifactCache | None,
    jobs: int,
    stop: Stop | None = None,
) -> Iterator[Lowering]:
    """Yield a Lowering per case, cached first, then as each finishes.

    Without a cache, artifacts go to `scratch/c<index>`. Once `stop` is set, nothing more is
    yielded and the worker processes are ended (a lowering in this process finishes first).
    """
    todo: list[tuple[int, Case, str]] = []
    for index, case in enumerate(cases):
        key = cache_key(case, flow, chipset) if cache is not None else ""
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            yield Lowering(index, hit, cached=True)
        else:
            todo.append((index, case, key))
    if not todo:
        return
    cache_root = cache.root if cache is not None else None

    def args(index: int, case: Case, key: str) -> tuple:
        return case, flow, chipset, scratch / f"c{index:04d}", cache_root, key

    def outcome(index: int, result: tuple[Artifact | None, str | None, str, str]) -> Lowering:
        artifact, verdict, message, detail = result
        seconds = sum(artifact.times_s.values()) if artifact else 0.0
        return Lowering(index, artifact, Verdict(verdict) if verdict else None, message, detail,
                        round(seconds, 4))

    in_process = jobs <= 1 or len(todo) < POOL_THRESHOLD
    if flow == "enn" and _needs_sdk_library_path():
        in_process, jobs = False, max(1, jobs)  # only a new process's loader sees the path
    if in_process:
        for index, case, key in todo:
            if stop is not None and stop.is_set():
                return
            yield outcome(index, _lower_one(*args(index, case, key)))
        return
    workers = Workers(_lower_one, min(jobs, len(todo)), len(todo), WORKER_IMPORTS,
                      functools.partial(warm_up, flow, chipset))
    try:
        for index, case, key in todo:
            workers.submit(index, args(index, case, key))
        workers.close()
        while workers.waiting:
            if stop is not None and stop.is_set():
                return
            for index, result in workers.outcomes(STOP_POLL_S):
                if isinstance(result, TaskFailed):
                    yield Lowering(index, None, Verdict.ERROR_INTERNAL, f"lowering: {result}")
                else:
                    yield outcome(index, result)
    finally:
        workers.end()  # at once when stopped or closed early; else after the workers' exit
