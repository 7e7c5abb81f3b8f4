"""Localization as a run does it: a failed case's graph bisected on the board it failed on
(`localize_case`), its probes in the case's folder, removed from the board as they go; a bug
here never loses the case's result (the block says `incomplete` and why)."""

from __future__ import annotations

import logging
import posixpath
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hil.board.adb import AdbBoard
from hil.cases.case import Case
from hil.localize import localize_case
from hil.lower.cache import ArtifactCache
from hil.paths import safe_name

log = logging.getLogger(__name__)


def localize_on_board(
    board: AdbBoard,
    case: Case,
    slot: str,
    outputs: list[dict[str, Any]],
    flow: str,
    chipset: str,
    out_dir: Path,
    cache_dir: Path | None,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The case's `localization` block. `slot` is the case's folder name; probes are lowered
    in this process (so call it once the run's own lowering is done)."""
    out = out_dir / "cases" / slot / "localize"

    def run_probe(artifact: Any, name: str) -> Any:
        probe_slot = f"{slot}-{name}"
        execution = board.run(artifact, probe_slot, 1, 0)
        execution.write_outputs(out / f"{name}-{safe_name(board.name)}")
        board.shell(["rm", "-rf", posixpath.join(board.workdir, probe_slot)])  # a model's probes add up
        return execution

    try:
        return localize_case(
            case, flow, chipset, run_probe, board=board.name,
            cache=ArtifactCache(cache_dir) if cache_dir else None,
            scratch=out_dir / "artifacts" / f"{slot}-probes", case_outputs=outputs,
            on_probe=on_probe,
        )
    except Exception as exc:  # noqa: BLE001 - a bug in hil must not lose the case's result
        log.exception("%s: localization failed", case.key)
        return {"status": "incomplete", "reason": f"{type(exc).__name__}: {exc}"[:300],
                "message": f"localization failed: {type(exc).__name__}: {exc}"[:300],
                "detail": traceback.format_exc()[-8192:], "probes": []}
