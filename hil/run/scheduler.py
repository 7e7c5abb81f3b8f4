"""One `hil run`: choose the flow, lower, dispatch the cases to the pool's boards, retry an
infrastructure error on another board, and record every finished case at once.

```
boards up (hil/pool) ─► flow chosen against every board's runner ─► lowering (a thread)
   ─► queue of Work ─► the pool's boards (Dispatcher: next_job / run_job) ─► attempt
   ─► record (journal → results.json, JUnit) ─► stop: interrupted, or complete
```

Data flows one way: Case → Artifact → Execution → Judgement → case record → results.json,
from which JUnit and the console table are rendered. Boards, their leases and their health are
the pool's (hil/pool); this room only decides which case goes where and what is written.
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from hil.board.adb import AdbBoard
from hil.board.inventory import from_specs
from hil.errors import InfraError, UsageError
from hil.interrupts import POLL_S, Stop, StopWhen, wait_until
from hil.pool.bringup import PoolOptions
from hil.pool.pool import BoardPool
from hil.pool.sources import StaticSource
from hil.report.results import CaseStream
from hil.run.attempt import Work, attempt, infra_record
from hil.run.options import RunOptions
from hil.run.recorder import Recorder
from hil.run.records import case_record, git_sha, new_run_id, now, now_ms, suite_digests, versions
from hil.verdict import Verdict

log = logging.getLogger(__name__)

INTERRUPT_CLEANUP_S = 5.0
"""After SIGINT/SIGTERM, how long the board threads get to finish and clean their boards up
(hil must exit within 10 s)."""
LOWERED_AHEAD_PER_BOARD = 8
"""Lowered cases waiting per live board (at least LOWERED_AHEAD_MIN in all): the lowering
waits beyond that, so a run of 50,000 cached cases does not hold 50,000 artifacts at once."""
LOWERED_AHEAD_MIN = 32
REFILL_BELOW_SHARE = 0.5
"""A held-back lowering goes on when the waiting cases have fallen below this share of that
bound, and then lowers until the bound again: the boards wake it once per half a queue, not at
every case they take (a wake-up per case, two threads handing the GIL over, was about a
sixth of the `hil run` process's CPU per case on 16 boards: scripts/bench_boards.py)."""
NO_BOARD = "no usable board (every board failed to start or was quarantined)"


def _freeze_start_up() -> None:
    """Take what start-up allocated (torch, ExecuTorch, the boards' bring-up: most of the
    heap) out of the collector's walks (`gc.freeze`, undone at the run's end): a full
    collection during the run then walks what the run allocates, not torch's objects (one
    walked them for 90 ms here; when the recorder collected after each JUnit rendering, that
    was hil's largest CPU cost per case at 40 cases, scripts/bench_boards.py)."""
    gc.collect()
    gc.freeze()


class Run:
    """One `hil run`: owns the results writer and the queue of cases; the boards are its pool's."""

    def __init__(
        self,
        options: RunOptions,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        on_lowered: Callable[[Any], None] | None = None,
        on_flow: Callable[[str, str], None] | None = None,
        on_probe: Callable[[Any, dict[str, Any]], None] | None = None,
        stop: Stop | None = None,
    ) -> None:
        self.options = options
        self.on_lowered = on_lowered
        """Called with each `hil.lower.pool.Lowering` as it arrives (progress)."""
        self.on_flow = on_flow
        """Called with the chosen flow and why, once the boards are up."""
        self.on_probe = on_probe
        """Called with the case and each localization probe's entry as it finishes."""
        self.stop = stop or Stop()
        """Set by a signal (hil/interrupts.py) or by the run's end."""
        self.interrupted = False
        self.flow: str | None = None
        """The flow the run lowers with (chosen in `execute`)."""
        self.run_id = new_run_id()
        entries = list(options.inventory) or (from_specs(options.boards) if options.boards else [])
        sources = ([StaticSource(entries)] if entries or not options.sources else []) + list(options.sources)
        self.meta: dict[str, Any] = {
            "id": self.run_id, "status": "running", "started": now(), "finished": None,
            "command": list(options.command), **versions(), "sdk": None, "flow": None,
            "flow_requested": options.flow, "flow_reason": None, "chipset": options.chipset,
            "virtual": any(e.virtual for e in entries), "git_sha": git_sha(),
            "shard": f"{options.shard[0]}/{options.shard[1]}", "boards": [], "usable_boards": None,
            "planned": [case.key for case in options.cases],
            "suites": suite_digests(options.cases),
        }
        options.out_dir.mkdir(parents=True, exist_ok=True)
        self.recorder = Recorder(options.results_path, options.junit_path, self.meta, on_record)
        self._lock = threading.Lock()
        """Guards `_pending`."""
        self._queue: queue.Queue[Work] = queue.Queue()
        self._pending = 0
        self._lowering_done = threading.Event()
        self._taken = threading.Event()
        """The boards took enough cases from the queue (`next_job`) for the held-back lowering
        to go on."""
        self._refill_below = 0
        """The queue's length under which a board taking a case wakes the held-back lowering
        (`_wait_for_room` sets it)."""
        self.lowered_from_cache = 0
        self.pool = BoardPool(sources, PoolOptions(
            chipset=options.chipset, run_id=self.run_id, out_dir=options.out_dir,
            runner=options.runner, timeout_s=options.timeout_s,
            idle_timeout_s=options.idle_timeout_s, boot_timeout_s=options.boot_timeout_s,
            runner_profile=options.runner_profile, virtual_link=options.virtual_link,
            virtual_device_time=options.virtual_device_time,
            adb_server=options.adb_server, board_wait_s=options.board_wait_s,
            provision=options.provision, flash_timeout_s=options.flash_timeout_s,
        ), self.stop, lambda boards, fields: self.recorder.update_run(boards=boards, **fields))

    @property
    def records(self) -> CaseStream:
        """The finished cases so far, as written to results.json: read back from disk as
        they are iterated (`CaseStream`), never held."""
        return self.recorder.results()["cases"]

    # -- the run ------------------------------------------------------------------------------
    def execute(self) -> CaseStream:
        """Run every case; returns the case records (`records`: results.json's). A stop
        (`self.stop`, e.g. SIGTERM) ends it `interrupted`: `self.interrupted` says so."""
        if not self.options.cases:  # an empty shard: no adb server, no boards
            self.recorder.close("complete")
            return self.records
        failure: list[BaseException] = []
        try:
            with self.pool:
                self.pool.start(self)
                if wait_until(self.pool.settled, self.stop):
                    if self.pool.usable:
                        self._choose_or_refuse()
                        _freeze_start_up()
                        threading.Thread(target=self._lower_all, args=(failure,), name="lowering",
                                         daemon=True).start()
                    else:
                        self._fail_unlowered(self._no_board())
                        self._lowering_done.set()
                    self.pool.wait_done()
                # the boards may all be out while cases still wait to be lowered (held back
                # by `_wait_for_room`): the lowering records them (no board left) first
                wait_until(self._lowering_done, self.stop)
                if self.stop.is_set():
                    self.interrupted = True
                    self.recorder.update_run(capacity_lost=self.pool.capacity_lost())
                    self.recorder.close("interrupted")  # before the boards and servers stop
                    self.pool.wind_down(INTERRUPT_CLEANUP_S)  # they clean up while servers run
                    return self.records
                if failure:
                    raise failure[0]
                self._fail_leftovers(self._no_board("no usable board left to run it"))
                self.recorder.update_run(capacity_lost=self.pool.capacity_lost())
                self.recorder.close("complete")
        except UsageError:
            self.recorder.close("refused")
            raise
        except BaseException:  # a bug in hil: every finished case is written all the same
            self.recorder.close(None)
            raise
        finally:
            gc.unfreeze()
        return self.records

    def _choose_or_refuse(self) -> None:
        """`_choose_flow`; when it refuses, the run ends `refused` and the boards get their
        idle timeout to clean up before the pool stops them."""
        try:
            self._choose_flow()
        except UsageError:
            self.recorder.close("refused")
            self.pool.wind_down(self.options.idle_timeout_s)
            raise

    def _choose_flow(self) -> None:
        """Choose (`auto`) or check the flow against every live board's runner; UsageError
        when some board cannot run it, before anything is lowered."""
        from hil.runner.profiles import choose_flow
        from hil.sdk import enn_problem

        precisions = sorted({case.precision for case in self.options.cases})
        requested = self.options.flow
        sdk = enn_problem() if requested in ("auto", "enn") else None
        self.flow, reason = choose_flow(requested, self.pool.runners(), precisions, sdk)
        self.recorder.update_run(flow=self.flow, flow_reason=reason)
        log.info("flow %s (%s)", self.flow, reason)
        if self.on_flow is not None:
            self.on_flow(self.flow, reason)

    def _no_board(self, reason: str = NO_BOARD) -> str:
        """`reason` with the cause: each board that is out and why (its error, or its
        quarantine and last recovery step), so every such case names it in JUnit."""
        causes = self.pool.causes()
        return f"{reason}: {causes[:1000]}" if causes else reason

    def _fail_unlowered(self, reason: str, lowered: bytearray | None = None) -> None:
        """Record as unrun every case the lowering has not handed over (`lowered[i]` set)."""
        for index, case in enumerate(self.options.cases):
            if lowered is None or not lowered[index]:
                self.recorder.add(case_record(case, verdict=Verdict.ERROR_INFRA.value, message=reason))

    def _lower_all(self, failure: list[BaseException]) -> None:
        """The lowering thread: each artifact joins the queue as it is ready."""
        from hil.lower.cache import ArtifactCache
        from hil.lower.pool import lower_cases

        assert self.flow is not None
        cases = self.options.cases
        cache = ArtifactCache(self.options.cache_dir) if self.options.cache_dir else None
        # once every board is out, what is still to lower would only be recorded unrun
        lowering_stop = StopWhen(self.stop, lambda: not self.pool.any_left())
        yielded = bytearray(len(cases))
        try:
            for lowering in lower_cases(cases, self.flow, self.options.chipset,
                                        self.options.out_dir / "artifacts", cache, self.options.jobs,
                                        lowering_stop):
                yielded[lowering.index] = 1
                case = cases[lowering.index]
                if self.on_lowered is not None:
                    self.on_lowered(lowering)
                if lowering.artifact is None:
                    assert lowering.verdict is not None
                    self.recorder.add(case_record(case, verdict=lowering.verdict.value,
                                            message=lowering.message, detail=lowering.detail))
                elif not self.pool.any_left():
                    self.recorder.add(case_record(case, verdict=Verdict.ERROR_INFRA.value,
                                                  message=self._no_board()))
                else:
                    with self._lock:
                        self._pending += 1
                        self.lowered_from_cache += lowering.cached
                    self._queue.put(Work(lowering.index, case, lowering.artifact, lowering.cached))
                    self._wait_for_room()
            if lowering_stop.is_set() and not self.stop.is_set():  # no board left
                self._fail_unlowered(self._no_board(), yielded)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the main thread
            failure.append(exc)
        finally:
            self._lowering_done.set()

    def _wait_for_room(self) -> None:
        """Hold the lowering once the boards have enough lowered cases waiting (memory
        bounded whatever the run's size) until they have taken half of them
        (REFILL_BELOW_SHARE), no board is left, or the run stops."""
        ahead = max(LOWERED_AHEAD_MIN, LOWERED_AHEAD_PER_BOARD * len(self.pool.live_names()))
        if self._queue.qsize() < ahead:
            return
        self._refill_below = max(1, int(ahead * REFILL_BELOW_SHARE))
        while not self.stop.is_set() and self.pool.any_left() and not self.pool.finished():
            self._taken.clear()
            if self._queue.qsize() < self._refill_below:  # taken before the clear
                return
            # woken by the board whose case takes the queue below the mark; the stop and the
            # boards' end are looked at every POLL_S
            self._taken.wait(POLL_S)

    def _fail_leftovers(self, reason: str) -> None:
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                return
            last = f"; last attempt: {work.history[-1]['message']}" if work.history else ""
            self.recorder.add(infra_record(work, reason + last))

    # -- the pool's dispatcher (hil/pool/pool.py) ------------------------------------------------
    def has_work(self) -> bool:
        with self._lock:
            return not (self._lowering_done.is_set() and self._pending == 0)

    def next_job(self, board: str) -> Work | None:
        """The next case for `board`; None when there is nothing left for it, or the run stops
        (no case is handed out after a stop)."""
        while not self.stop.is_set():
            try:
                work = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if not self.has_work():
                    return None
                continue
            if self._queue.qsize() < self._refill_below:
                self._taken.set()
            if self.stop.is_set():
                self._queue.put(work)  # left for the record of what was not run
                return None
            others = self.pool.live_names() - {board} - set(work.tried_on)
            if board in work.tried_on and others:
                self._queue.put(work)  # retry elsewhere
                time.sleep(0.05)
                continue
            return work
        return None

    def run_job(self, board: AdbBoard, work: Work) -> InfraError | None:
        """One attempt of `work` on `board`: recorded when final, queued again for a retry
        after an infrastructure error (up to --retries)."""
        started = now_ms()
        record, error = attempt(board, work, self.options.plan_for(work.case.suite), self.options.out_dir,
                                self.options.keep_outputs)
        record.update(started=started, finished=now_ms())
        if error is not None and len(work.tried_on) <= self.options.retries:
            work.remember(record, started)
            self._queue.put(work)
            return error
        try:
            if error is None and self.options.localize and self._localizable(record):
                record["localization"] = self._localize(board, work, record["outputs"])
            self.recorder.add(record)
        finally:  # even when recording fails: a case left pending would keep the boards waiting
            with self._lock:
                self._pending -= 1
        return error

    @staticmethod
    def _localizable(record: dict[str, Any]) -> bool:
        """A failure on numbers (a known one, XFAIL, too: its cause is the point)."""
        return record.get("actual_verdict", record["verdict"]) == Verdict.FAIL_MISMATCH.value

    def _localize(self, board: AdbBoard, work: Work, outputs: list[dict[str, Any]]) -> dict[str, Any]:
        """The case's `localization` block (hil/localize/on_board.py), once the run's own
        lowering is done (probes are lowered in this process)."""
        from hil.localize.on_board import localize_on_board

        assert self.flow is not None
        if not wait_until(self._lowering_done, self.stop):
            return {"status": "incomplete", "reason": "interrupted", "probes": []}

        def report(entry: dict[str, Any]) -> None:
            if self.on_probe is not None:
                self.on_probe(work.case, entry)

        return localize_on_board(board, work.case, work.slot, outputs, self.flow, self.options.chipset,
                                 self.options.out_dir, self.options.cache_dir, report)
