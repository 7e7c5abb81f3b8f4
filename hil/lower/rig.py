"""The lowering rig: the test rig's stand-in for a Python side (an ExecuTorch build) that
lowers a model wrong. Not a feature for real lowering: what `hil bisect`'s Python-side factor
is tested with, where no two ExecuTorch builds can be made.

When the distribution `hil-rig-lowering` (`RIG_DISTRIBUTION`) is installed, its module
`hil_rig_lowering` holds `SETTING`: an empty string (lowers as ExecuTorch does) or
`perturb,rel=R`: every floating constant (weights, biases, buffers) of the exported program
is scaled by 1 + R after the host references are computed and before it is lowered, so the
program computes wrong numbers by about R while its references stay right (a case fails
FAIL_MISMATCH when R is beyond its tolerance). Two versions of the package that set
different SETTINGs are two Python sides that lower differently; its version is recorded with
the others (results.json `run.packages`) and is part of the artifact cache's key.

A package of the rig, as the tests write it (`pip wheel` of it makes the wheel):

    pyproject.toml    [project] name = "hil-rig-lowering", version = "3"
    hil_rig_lowering/__init__.py    SETTING = "perturb,rel=0.05"
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
from typing import Any

log = logging.getLogger(__name__)

RIG_DISTRIBUTION = "hil-rig-lowering"
RIG_MODULE = "hil_rig_lowering"
_PERTURB = re.compile(r"perturb,rel=([0-9]*\.?[0-9]+)")


def rig_setting() -> str | None:
    """The installed rig's SETTING; None when no rig is installed (the normal case)."""
    if importlib.util.find_spec(RIG_MODULE) is None:
        return None
    setting = getattr(importlib.import_module(RIG_MODULE), "SETTING", "")
    return str(setting).strip()


def perturbation() -> float | None:
    """The relative error the installed rig puts in every constant (None: none)."""
    setting = rig_setting()
    if not setting:
        return None
    match = _PERTURB.fullmatch(setting)
    if match is None:
        raise ValueError(f"{RIG_MODULE}.SETTING {setting!r}: expected '' or 'perturb,rel=R'")
    return float(match.group(1))


def apply(exported: Any) -> Any:
    """`exported` (a torch.export.ExportedProgram) as the rig lowers it: its floating
    constants scaled by 1 + rel when a rig says so (in place), else unchanged."""
    rel = perturbation()
    if rel is None:
        return exported
    import torch

    log.warning("lowering rig %s: floating constants scaled by %g (test rig)", RIG_MODULE, 1 + rel)
    with torch.no_grad():
        for table in (exported.state_dict, exported.constants):
            for name, value in list(table.items()):
                if isinstance(value, torch.Tensor) and value.is_floating_point():
                    scaled = value.detach().clone() * (1.0 + rel)
                    table[name] = (torch.nn.Parameter(scaled, requires_grad=False)
                                   if isinstance(value, torch.nn.Parameter) else scaled)
    return exported
