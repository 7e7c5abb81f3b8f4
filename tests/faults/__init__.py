"""Fault injection: virtual boards with faults, whole runs, and what became of every case.

Helpers shared by the matrix (`test_matrix.py`) and the interruption tests."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from hil.board.inventory import load_inventory
from hil.cases import load_suite
from hil.cases.case import Case
from hil.lower.cache import ArtifactCache, cache_key, default_cache_dir
from hil.lower.pool import lower_cases
from hil.run import Run, RunOptions
from hil.virtual.launcher import VirtualBoardProcess
from tests.results_schema import assert_valid_results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TINY = FIXTURES / "tiny.yaml"
"""Three small MLP cases: cheap to lower with flow portable."""


def power_command(board: VirtualBoardProcess, action: str = "cycle") -> list[str]:
    """The virtual board's power switch as an inventory power command: a line on its control
    FIFO, opened non-blocking (no reader: the command fails instead of hanging)."""
    script = (
        "import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK); "
        "os.write(fd, sys.argv[2].encode() + b'\\n')"
    )
    return [sys.executable, "-c", script, str(board.root / "run" / "control"), f"power {action}"]


def write_inventory(path: Path, boards: list[dict[str, Any]]) -> Path:
    """An inventory YAML with these entries."""
    path.write_text(yaml.safe_dump({"boards": boards}, sort_keys=False))
    return path


def board_entry(name: str, board: VirtualBoardProcess, console: Path | None = None,
                power: bool = False, chipset: str = "E9955") -> dict[str, Any]:
    """An inventory entry for a virtual board reached over network adb."""
    entry: dict[str, Any] = {"name": name, "adb": board.address, "chipset": chipset}
    if console is not None:
        entry["console"] = str(console)
    if power:
        entry["power"] = {"cycle": power_command(board)}
    return entry


def tiny_copies(count: int, flow: str = "portable") -> tuple[Case, ...]:
    """`count` cases: the tiny ones repeated under new ids (`mlp_a_3`), each copy's cache
    entry the lowered original's (the same artifact), so no copy is lowered."""
    base = load_suite(str(TINY))
    copies = tuple(dataclasses.replace(base[i % len(base)], id=f"{base[i % len(base)].id}_{i}")
                   for i in range(count))
    cache = ArtifactCache(default_cache_dir())
    with tempfile.TemporaryDirectory() as scratch:
        folders = {lowering.index: lowering.artifact.folder
                   for lowering in lower_cases(base, flow, "E9955", Path(scratch), cache, 1)}
    for index, case in enumerate(copies):
        key = cache_key(case, flow, "E9955")
        target = cache.root / key[:2] / key
        if not target.exists():
            shutil.copytree(folders[index % len(base)], target)
    return copies


def run_in_process(
    inventory: Path,
    out: Path,
    on_record: Callable[[Run, dict[str, Any]], None] | None = None,
    flow: str = "portable",
    cases: tuple[Case, ...] | None = None,
    **options: Any,
) -> tuple[Run, dict[str, Any]]:
    """`hil run --inventory INVENTORY --suite tiny.yaml --flow FLOW` (or `cases`) in this
    process (torch stays imported, artifacts come from the session's cache); `on_record(run,
    record)` is called after each finished case."""
    cases = cases or tuple(load_suite(str(TINY)))
    settings: dict[str, Any] = {
        "timeout_s": 4.0, "idle_timeout_s": 3.0, "boot_timeout_s": 20.0, "retries": 1,
    }
    settings.update(options)
    run_options = RunOptions(
        cases=cases, boards=(), flow=flow, chipset="E9955",
        out_dir=out, results_path=out / "results.json", junit_path=out / "junit.xml",
        cache_dir=default_cache_dir(), jobs=1, inventory=tuple(load_inventory(inventory)),
        **settings,
    )
    the_run = Run(run_options, on_record=(lambda r: on_record(the_run, r)) if on_record else None)
    the_run.execute()
    return the_run, json.loads((out / "results.json").read_text())


def chain(record: dict[str, Any]) -> str:
    """The verdicts of every attempt of a case: `ERROR_INFRA→PASS`."""
    return "→".join([a["verdict"] for a in record.get("earlier_attempts") or []] + [record["verdict"]])


def lost_results(expected_keys: list[str], results: dict[str, Any], junit: Path) -> int:
    """Cases missing from results.json or JUnit, or present more than once in either (and
    results.json follows its schema)."""
    assert_valid_results(results)
    in_results = Counter(f"{c['suite']}.{c['precision']}.{c['id']}" for c in results["cases"])
    root = ET.parse(junit).getroot()
    in_junit = Counter(f"{tc.get('classname')}.{tc.get('name')}" for tc in root.iter("testcase"))
    lost = 0
    for key in expected_keys:
        lost += abs(in_results[key] - 1) + abs(in_junit[key] - 1)
    extra = (set(in_results) | set(in_junit)) - set(expected_keys)
    return lost + len(extra)


def tiny_keys() -> list[str]:
    """`suite.precision.id` of every tiny case."""
    return [case.key for case in load_suite(str(TINY))]


def environment() -> dict[str, str]:
    """The environment for a `hil` child process (same artifact cache as this session)."""
    return dict(os.environ, HIL_CACHE_DIR=str(default_cache_dir()))


def wait_until_warm(board: VirtualBoardProcess, timeout: float = 300.0) -> None:
    """Wait until the board's warm executor has imported ExecuTorch (a runner exec waits for
    that, and a test with a short deadline must not)."""
    deadline = time.monotonic() + timeout
    while "virtual executor warm in" not in board.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{board.address}: executor not warm in {timeout} s"
        time.sleep(0.2)


def gone(pid: int) -> bool:
    """The process has ended (or is a zombie waiting to be reaped), within 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False
