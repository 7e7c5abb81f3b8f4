"""The soak's cases: N copies of three tiny MLP cases under new ids, written as a manifest;
the three are lowered once and every copy's cache entry is the same artifact, so `hil run`
lowers nothing."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)

FLOW = "portable"
SUITE = "soak"
MODELS = '''"""Tiny MLPs for scripts/soak.py (written by it)."""

import torch
from torch import nn


def make_mlp(hidden: int = 16) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 4))
'''
VARIANTS = ({"hidden": 4, "shape": [1, 8]}, {"hidden": 6, "shape": [2, 8]}, {"hidden": 8, "shape": [3, 8]})
"""The base cases the copies repeat."""


def prepare_cases(work: Path, count: int, cache: Path, chipset: str) -> tuple[Path, list[str]]:
    """Write the manifest of `count` copies, lower the three bases, give every copy the
    base's cache entry; returns the manifest and the planned case keys."""
    from hil.cases import load_suite
    from hil.lower.cache import ArtifactCache, cache_key
    from hil.lower.pool import lower_cases

    (work / "soak_models.py").write_text(MODELS)
    entries = []
    for index in range(count):
        variant = VARIANTS[index % len(VARIANTS)]
        entries.append({"id": f"mlp{variant['hidden']}_{index:05d}", "module": "soak_models:make_mlp",
                        "kwargs": {"hidden": variant["hidden"]}, "inputs": [{"shape": variant["shape"]}]})
    manifest = work / f"{SUITE}.yaml"
    manifest.write_text(json.dumps({"suite": SUITE, "cases": entries}, indent=1))  # JSON is YAML
    cases = load_suite(str(manifest))
    store = ArtifactCache(cache)
    bases = cases[: len(VARIANTS)]
    start = time.monotonic()
    folders = {}
    for lowering in lower_cases(bases, FLOW, chipset, work / "scratch", store, 1):
        if lowering.artifact is None:
            raise SystemExit(f"soak: lowering {bases[lowering.index].id} failed: {lowering.message}")
        folders[lowering.index] = lowering.artifact.folder
    seeded = 0
    for index, case in enumerate(cases):
        key = cache_key(case, FLOW, chipset)
        target = cache / key[:2] / key
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(folders[index % len(VARIANTS)], target)
            seeded += 1
    log.info("%d cases: 3 bases lowered/cached in %.1f s, %d cache entries seeded",
             count, time.monotonic() - start, seeded)
    return manifest, [case.key for case in cases]
