"""The board side of a bisection: the pool's dispatcher (hil/pool/pool.py), serving rounds
of jobs, each job's board runs on one board in order.

```
search (search.py) ─ a round: jobs ─► queue ─► the pool's boards (next_job / run_job)
   one board run: flash its firmware build (hil/provision; only when the board's build is
   not it), install its runner (a push, only when it differs), run the cases' artifacts of
   its Python side (hil/run/attempt.py), write OUT/runs/NNNN/results.json
   ─► journal (journal.py) ─► the round's outcomes, in the order of its jobs
```

An infrastructure error is the pool's to recover from (its ladder, quarantine); the job's
runs not yet done go back to the queue, up to `retries` times, then they end `error` (the
search skips the candidate). Completed runs are journaled at once and never made again.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil.bisect.candidates import Builds, Candidate
from hil.bisect.journal import Journal
from hil.board.adb import AdbBoard
from hil.board.inventory import InventoryEntry
from hil.board.recovery import Recovery
from hil.cases.case import Case
from hil.errors import InfraError
from hil.interrupts import POLL_S, Stop
from hil.latency_plan import LatencyPlan
from hil.pool.pool import BoardPool
from hil.report.results import SCHEMA, VERSION, save_results, utc_now
from hil.run.attempt import Work, attempt
from hil.run.records import case_record
from hil.runner.profiles import runner_identity
from hil.verdict import Verdict

log = logging.getLogger(__name__)

BUILD_PROPERTY = "ro.build.fingerprint"
"""The build a board is known by when a firmware folder names none."""
SLOTS_PER_RUN = 1000
"""Case slots of one board run (`c<run><case>`): every run its own folders on the board."""


@dataclass(frozen=True)
class BoardRun:
    """One run of the bisected cases with one set of builds on one board."""

    key: str
    """Deterministic and unique in the bisection (its journal's key)."""
    phase: str
    """`confirm`, `isolate`, `search` or `culprit`."""
    builds: Builds
    label: str
    """For people: `good`, `bad`, `firmware 019-build`."""
    plan: LatencyPlan
    """Runner invocations per case (one latency sample each) and warm-ups."""


@dataclass
class _Job:
    runs: list[BoardRun]
    round: int
    tries: int = 0
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class RunSetup:
    """What every board run shares."""

    cases: tuple[Case, ...]
    flow: str
    chipset: str
    out: Path
    command: tuple[str, ...]
    retries: int = 1
    flash_timeout_s: float = 300.0
    boot_timeout_s: float = 120.0
    idle_timeout_s: float = 30.0


class Stopped(Exception):
    """The bisection cannot go on: interrupted (a stop signal), or no usable board is left."""

    def __init__(self, interrupted: bool, reason: str) -> None:
        super().__init__(reason)
        self.interrupted = interrupted


def failed(outcome: dict[str, Any]) -> bool:
    """Whether a board run's cases did not all pass (the regression reproduced)."""
    return any(not Verdict(v).passed for v in outcome.get("verdicts", {}).values())


class BisectBoards:
    """The pool's dispatcher: board runs in rounds (see the module docstring)."""

    def __init__(self, pool: BoardPool, stop: Stop, setup: RunSetup, journal: Journal,
                 firmware: Any, runners: Callable[[Candidate | None, bool], Path],
                 artifacts: Callable[[Candidate | None], dict[str, Any]],
                 environment: Callable[[Candidate | None], dict[str, Any]]) -> None:
        """`firmware`: the firmware factor (FirmwareBuilds) or None; `runners(candidate,
        virtual)`: the runner file a board runs for a runner candidate (None: the board's
        own); `artifacts(candidate)`: the lowered cases of a Python-side candidate (None:
        this environment's), by case key: an Artifact or a lowering failure;
        `environment(candidate)`: what lowered them (`packages`, `executorch_git`)."""
        self.pool = pool
        self.stop = stop
        self.setup = setup
        self.journal = journal
        self.firmware = firmware
        self.runners = runners
        self.artifacts = artifacts
        self.environment = environment
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._errors: dict[str, str] = {}
        numbers = [run.get("number", 0) for run in journal.runs.values()]
        self._next_number = max(numbers, default=0) + 1
        self._flashed: dict[str, tuple[str, str | None]] = {}
        """Per board: the firmware candidate it was last flashed with, and the build it then
        reported (a recovery's re-flash changes that build)."""
        self.made = 0
        """Board runs made by this process (not replayed from the journal)."""

    # -- rounds (the search's side) -------------------------------------------------------------
    def run_round(self, jobs: list[list[BoardRun]], round_number: int) -> list[dict[str, Any]]:
        """Run `jobs` (each on one board, at the same time on as many boards) and return
        the outcome of every run in job order; runs the journal has are not made again. A
        run that could not be made (infrastructure, retries spent) has an `error`. Stopped
        when a stop signal came, or no board is left to make the rest."""
        pending = []
        for runs in jobs:
            todo = [run for run in runs if run.key not in self.journal.runs]
            if todo:
                job = _Job(todo, round_number)
                pending.append(job)
                self._queue.put(job)
        for job in pending:
            while not job.done.wait(POLL_S):
                if self.stop.is_set():
                    raise Stopped(True, "interrupted")
                if not self.pool.any_left():
                    raise Stopped(False, f"no usable board left: {self.pool.causes() or 'all out'}")
        if self.stop.is_set():
            raise Stopped(True, "interrupted")
        outcomes = []
        for runs in jobs:
            for run in runs:
                outcome = self.journal.runs.get(run.key)
                if outcome is None:
                    reason = self._errors.get(run.key, "not run")
                    outcome = {"key": run.key, "phase": run.phase, "label": run.label,
                               "builds": run.builds.record(), "error": reason, "round": round_number}
                outcomes.append(outcome)
        return outcomes

    def close(self) -> None:
        """No more rounds: the boards' threads end."""
        self._closed.set()

    # -- the pool's dispatcher ---------------------------------------------------------------
    def has_work(self) -> bool:
        return not self._closed.is_set()

    def next_job(self, board: str) -> _Job | None:
        while not (self.stop.is_set() or self._closed.is_set()):
            try:
                return self._queue.get(timeout=POLL_S)
            except queue.Empty:
                continue
        return None

    def run_job(self, board: AdbBoard, job: _Job) -> InfraError | None:
        while job.runs:
            if self.stop.is_set():
                job.done.set()
                return None
            run = job.runs[0]
            try:
                outcome = self._run_one(board, run, job.round)
            except InfraError as exc:
                job.tries += 1
                log.warning("%s: %s: %s", board.name, run.label, exc)
                if job.tries > self.setup.retries:
                    for left in job.runs:
                        self._errors[left.key] = f"{board.name}: {exc}"[:500]
                    job.done.set()
                else:
                    self._queue.put(job)  # the rest again, here after recovery or elsewhere
                return exc
            except Exception as exc:  # a bug in hil: the run ends `error`, the bisection goes on
                log.exception("%s: %s", board.name, run.label)
                self._errors[run.key] = f"ERROR_INTERNAL: {type(exc).__name__}: {exc}"[:500]
                job.runs.pop(0)
                continue
            with self._lock:
                self.journal.add(outcome)
                self.made += 1
            job.runs.pop(0)
        job.done.set()
        return None

    # -- one board run -------------------------------------------------------------------------
    def _entry(self, name: str) -> InventoryEntry:
        return next(entry for entry in self.pool.entries if entry.name == name)

    def _run_one(self, board: AdbBoard, run: BoardRun, round_number: int) -> dict[str, Any]:
        with self._lock:
            number = self._next_number
            self._next_number += 1
        began = time.monotonic()
        folder = self.setup.out / "runs" / f"{number:04d}"
        entry = self._entry(board.name)
        firmware = self._put_firmware(board, entry, run.builds.firmware)
        virtual = bool(next((r for r in self.pool.records if r.get("name") == board.name), {}).get("virtual"))
        runner = self.runners(run.builds.runner, virtual)
        if board.runner != runner:
            board.runner = runner
            board.prepare()
        artifacts = self.artifacts(run.builds.python)
        records = []
        for index, case in enumerate(self.setup.cases):
            artifact = artifacts.get(case.key)
            if artifact is None or isinstance(artifact, dict):  # lowering failed in that environment
                failure = artifact or {"verdict": Verdict.ERROR_INTERNAL.value, "message": "not lowered"}
                records.append(case_record(case, verdict=failure["verdict"], message=failure["message"]))
                continue
            work = Work(number * SLOTS_PER_RUN + index, case, artifact)
            record, error = attempt(board, work, run.plan, folder)
            if error is not None:
                raise error
            records.append(record)
        identity = runner_identity(runner)
        board_record = {**next((r for r in self.pool.records if r.get("name") == board.name), {}),
                        "runner": identity, "build": {"property": firmware["property"],
                                                      "after": firmware["build"]},
                        "flashes": [firmware["flash"]] if firmware.get("flash") else []}
        board_record.pop("properties", None)
        results = folder / "results.json"
        save_results({"schema": SCHEMA, "version": VERSION, "run": {
            "id": f"bisect-{number:04d}", "status": "complete", "started": utc_now(),
            "command": list(self.setup.command), "flow": self.setup.flow, "chipset": self.setup.chipset,
            "planned": [case.key for case in self.setup.cases], "boards": [board_record],
            **self.environment(run.builds.python),
            "virtual": virtual, "bisect": {"key": run.key, "phase": run.phase, "label": run.label,
                                           "builds": run.builds.record()}},
            "cases": records}, results)
        return {
            "key": run.key, "number": number, "round": round_number, "phase": run.phase,
            "label": run.label, "builds": run.builds.record(), "board": board.name,
            "build": firmware["build"], "flashed": bool(firmware.get("flash")),
            "runner": {"sha256": identity["sha256"], "commit": identity["commit"]},
            "verdicts": {r["suite"] + "." + r["precision"] + "." + r["id"]: r["verdict"] for r in records},
            "messages": {f"{r['suite']}.{r['precision']}.{r['id']}": r["message"] for r in records
                         if not Verdict(r["verdict"]).passed},
            "samples": {f"{r['suite']}.{r['precision']}.{r['id']}": (r.get("latency_ms") or {}).get("samples")
                        for r in records if (r.get("latency_ms") or {}).get("samples")},
            "results": str(results.relative_to(self.setup.out)),
            "seconds": round(time.monotonic() - began, 3),
        }

    def _build_of(self, board: AdbBoard, prop: str) -> str | None:
        result = board.shell(["getprop", prop])
        return result.stdout.strip() or None if result.returncode == 0 else None

    def _put_firmware(self, board: AdbBoard, entry: InventoryEntry,
                      candidate: Candidate | None) -> dict[str, Any]:
        """The board at `candidate`'s firmware (flashed when it is not): its build, and the
        flash's record when there was one. None: the firmware as it is."""
        if candidate is None or self.firmware is None:
            return {"property": BUILD_PROPERTY, "build": self._build_of(board, BUILD_PROPERTY)}
        from hil.provision import Provisioner, flasher_for

        provisioning = self.firmware.provisioning(candidate, entry)
        prop, expected = provisioning.expected_build or (BUILD_PROPERTY, None)
        current = self._build_of(board, prop)
        known = self._flashed.get(board.name) == (candidate.key, current)
        if current is not None and (current == expected or known):
            return {"property": prop, "build": current}
        server = self.pool.servers.server_for(entry)
        recovery = Recovery(board, self.pool.servers.keeper_for(server), server.connect, server.disconnect,
                            network=entry.network, power=entry.power, idle_s=self.setup.idle_timeout_s,
                            boot_s=self.setup.boot_timeout_s)
        flasher = flasher_for(provisioning, self.setup.flash_timeout_s)
        report = Provisioner(board.name, provisioning, flasher, recovery, entry.power,
                             self.setup.boot_timeout_s, after_boot=board.prepare).flash("bisect", current)
        board.close_links()  # reached anew after the reboot
        after = report.get("after") or self._build_of(board, prop)
        self._flashed[board.name] = (candidate.key, after)
        return {"property": prop, "build": after, "flash": report}
