"""Once every board is out of the run, the lowering stops: what it has not lowered yet is
reported unrun (ERROR_INFRA, no board left), not lowered for nothing. (It went on lowering
every remaining case, hours for a large uncached run, only to record each one unrun.)"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hil.board.inventory import load_inventory
from hil.cases import load_suite
from hil.lower.cache import default_cache_dir
from hil.run import Run, RunOptions
from hil.virtual.launcher import start_virtual_board
from tests.faults import TINY, board_entry, lost_results, wait_until_warm, write_inventory

pytestmark = pytest.mark.slow

CASES = 8


def test_the_lowering_stops_once_no_board_is_left(tmp_path: Path) -> None:
    base = load_suite(str(TINY))
    tag = uuid.uuid4().hex[:8]  # new ids: nothing of this run is in the cache yet
    cases = tuple(dataclasses.replace(base[i % len(base)], id=f"{base[i % len(base)].id}_{tag}_{i}")
                  for i in range(CASES))
    lowered: list[int] = []
    with start_virtual_board(tmp_path / "board", "E9955", "lone", []) as board:
        wait_until_warm(board)
        inventory = write_inventory(tmp_path / "inventory.yaml", [board_entry("lone", board)])
        out = tmp_path / "out"
        options = RunOptions(
            cases=cases, boards=(), flow="portable", chipset="E9955", out_dir=out,
            results_path=out / "results.json", junit_path=out / "junit.xml",
            cache_dir=default_cache_dir(), jobs=1, inventory=tuple(load_inventory(inventory)),
            timeout_s=4.0, idle_timeout_s=2.0, boot_timeout_s=5.0, retries=0,
        )
        run: Run

        def on_record(record: dict[str, Any]) -> None:
            if record["id"] == cases[0].id:  # the board freezes for good: no power control
                board.control("fault freeze,on=now", applied_within=30)

        def on_lowered(lowering: Any) -> None:
            lowered.append(lowering.index)
            if len(lowered) == 3:  # the lowering is slower than the boards' end: it waits
                deadline = time.monotonic() + 120
                while run.pool.any_left():
                    assert time.monotonic() < deadline, "the board was never taken out"
                    time.sleep(0.05)

        run = Run(options, on_record=on_record, on_lowered=on_lowered)
        run.execute()
    assert len(lowered) == 3, lowered  # nothing lowered once no board was left
    doc = json.loads((out / "results.json").read_text())
    verdicts = {c["id"]: c["verdict"] for c in doc["cases"]}
    assert verdicts[cases[0].id] == "PASS"
    assert all(verdicts[c.id] == "ERROR_INFRA" for c in cases[1:]), verdicts
    assert doc["run"]["status"] == "complete" and len(verdicts) == CASES
    assert lost_results([c.key for c in cases], doc, out / "junit.xml") == 0
