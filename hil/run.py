"""The scheduler: plan the cases, lower them, dispatch them to the board pool, retry
infrastructure errors on another board, and write every finished case at once.

Data flows one way: Case → Artifact → Execution → Judgement → case record → results.json,
from which JUnit and the console table are rendered.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import logging
import os
import posixpath
import queue
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil import __version__
from hil.board.inventory import InventoryEntry, from_specs
from hil.board.preflight import VIRTUAL_RUNNER
from hil.board.spec import BoardSpec
from hil.cases.case import Case
from hil.errors import InfraError, UsageError
from hil.expectation import settle
from hil.latency_plan import LatencyPlan
from hil.report.junit import write_junit
from hil.runner.profiles import BoardRunner
from hil.verdict import Verdict

log = logging.getLogger(__name__)

CHIPSETS = ("E9955", "E9965")
"""Exynos chipsets the ENN backend supports (`SamsungChipset`)."""

RECOVERY_FAILED = "recovery failed"
"""Why a board whose recovery ladder ran out was quarantined."""

ATTEMPT_LOG_CHARS = 8192
"""Tail of each log kept with an earlier attempt of a retried case."""

QUARANTINE_AFTER = 2
"""Consecutive infrastructure errors after which a board is taken out of the run, even when
the recovery ladder brought it back each time (it then gets a health check later)."""
PROBATION_S = 30.0
"""How long a board quarantined for infrastructure errors in a row stays out before its
health check; doubled for each later quarantine of the same board and each failed check."""
HEALTH_CHECKS = 3
"""Failed health checks in a row after which a quarantined board stays out of the run."""
INTERRUPT_CLEANUP_S = 5.0
"""After SIGINT/SIGTERM, how long the board threads get to finish and clean their boards up
(hil must exit within 10 s)."""
GOOD_STREAK = 10
"""Cases in a row without an infrastructure error after which a board's earlier quarantines
no longer lengthen the next one."""


@dataclass(frozen=True)
class RunOptions:
    """Everything `hil run` was asked to do, validated by the CLI."""

    cases: tuple[Case, ...]
    boards: tuple[BoardSpec, ...]
    flow: str
    """The flow asked for: `auto` or one of hil.lower.flows.FLOWS; the run chooses and checks
    it against every board's runner once the boards are up, before lowering anything."""
    chipset: str
    out_dir: Path
    results_path: Path
    junit_path: Path
    shard: tuple[int, int] = (1, 1)
    timeout_s: float = 120.0
    retries: int = 1
    iterations: int = 1
    warmup: int = 0
    runner: Path | None = None
    latency: LatencyPlan | None = None
    """How the cases' latency is measured (hil/latency_plan.py); None: `iterations` and
    `warmup` with the default noise control."""
    suite_latency: dict[str, LatencyPlan] = field(default_factory=dict)
    """Suites (by name) that declare a plan of their own (a manifest's `latency:`)."""
    command: tuple[str, ...] = ()
    cache_dir: Path | None = None
    """Artifact cache folder; None disables the cache."""
    jobs: int = 2
    """Lowering worker processes."""
    virtual_link: str = "none"
    """Link shaping of the virtual boards hil starts (`none`, `usb2`, `usb3`)."""
    inventory: tuple[InventoryEntry, ...] = ()
    """The boards, from `--inventory` and `--board`; empty: one per `boards` spec."""
    idle_timeout_s: float = 30.0
    """A board silent this long is lost (ERROR_INFRA); also the limit of a reconnect."""
    boot_timeout_s: float = 120.0
    """The limit of a reboot or power cycle, until `sys.boot_completed=1`."""
    runner_profile: str | None = None
    """`--runner-profile`: what every board's runner can execute (hil/runner/profiles.py);
    None: learnt per board. Also the profile of the virtual boards hil starts."""
    adb_server: str | None = None
    """`--adb-server` (or ANDROID_ADB_SERVER_*): the lab server of the boards hil does not
    start; None: hil.board.servers decides per board."""
    board_wait_s: float = 0.0
    """How long to wait for a board another run holds (its lease) before leaving it out."""
    localize: bool = False
    """`--localize`: bisect every FAIL_MISMATCH case's graph (a known failure's too) on the
    board it failed on (hil/localize) and add the `localization` block to its record."""


@dataclass
class _Work:
    """A lowered case waiting for a board."""

    index: int
    case: Case
    artifact: Any
    cached: bool = False
    tried_on: list[str] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    """Earlier attempts that ended in ERROR_INFRA: board, verdict, message."""


def new_run_id() -> str:
    """`YYYYmmdd-HHMMSS-xxxxxx`: sortable, unique, safe as a device folder name."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _join_within(threads: list[threading.Thread], seconds: float) -> None:
    """Join `threads`, all of them within `seconds` in total."""
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _now_ms() -> str:
    """UTC with milliseconds: case start/end stamps, to order cases of concurrent runs."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _git_sha() -> str | None:
    if os.environ.get("GITHUB_SHA"):
        return os.environ["GITHUB_SHA"]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"hil": __version__}
    for package in ("torch", "executorch"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def _sdk_problem() -> str | None:
    """Why flow `enn` cannot lower here (the LITECORE check's one line), or None."""
    from hil.sdk import require_enn_adaptor

    try:
        require_enn_adaptor()
    except UsageError as exc:
        return str(exc)
    return None


def case_record(case: Case, **fields: Any) -> dict[str, Any]:
    """A results.json case entry (docs/results-json.md), its verdict settled against the
    case's known failure, if it declares one (XFAIL / XPASS)."""
    record: dict[str, Any] = {
        "suite": case.suite,
        "precision": case.precision,
        "id": case.id,
        "classname": case.classname,
        "file": case.file,
        "line": case.line,
        "board": None,
        "verdict": Verdict.ERROR_INTERNAL.value,
        "message": "",
        "detail": "",
        "attempts": 0,
        "timings_s": {},
        "latency_ms": None,
        "memory": None,
        "board_state": None,
        "pte_bytes": None,
        "delegation": None,
        "outputs": [],
        "checker": None,
        "logs": {},
        "tags": list(case.tags),
        "started": None,
        "finished": None,
    }
    record.update(fields)
    return settle(case.expect, record)


class Run:
    """One `hil run`: owns the adb server, the boards and the results writer."""

    def __init__(
        self,
        options: RunOptions,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        on_lowered: Callable[[Any], None] | None = None,
        on_flow: Callable[[str, str], None] | None = None,
        on_probe: Callable[[Case, dict[str, Any]], None] | None = None,
    ) -> None:
        from hil.board.lease import Lease
        from hil.board.servers import BoardServers
        from hil.report.results import ResultsWriter

        self.options = options
        self.on_record = on_record
        self.on_lowered = on_lowered
        """Called with each `hil.lower.pool.Lowering` as it arrives (progress)."""
        self.on_flow = on_flow
        """Called with the chosen flow and why, once the boards are up."""
        self.on_probe = on_probe
        """Called with the case and each localization probe's entry as it finishes."""
        self.flow: str | None = None
        """The flow the run lowers with (chosen in `execute`)."""
        self.run_id = new_run_id()
        self.entries = list(options.inventory) or from_specs(options.boards)
        self.meta: dict[str, Any] = {
            "id": self.run_id,
            "status": "running",
            "started": _now(),
            "finished": None,
            "command": list(options.command),
            **_versions(),
            "sdk": None,
            "flow": None,
            "flow_requested": options.flow,
            "flow_reason": None,
            "chipset": options.chipset,
            "virtual": any(e.virtual for e in self.entries),
            "git_sha": _git_sha(),
            "shard": f"{options.shard[0]}/{options.shard[1]}",
            "boards": [],
            "usable_boards": None,
        }
        options.out_dir.mkdir(parents=True, exist_ok=True)
        self.writer = ResultsWriter(options.results_path, self.meta)
        options.junit_path.parent.mkdir(parents=True, exist_ok=True)
        write_junit(self.writer.current(), options.junit_path)
        self._lock = threading.Lock()
        self._queue: queue.Queue[_Work] = queue.Queue()
        self._pending = 0
        self._lowering_done = threading.Event()
        self._stop = threading.Event()
        self._live_boards: set[str] = set()
        self._boards_settled = threading.Event()
        self._starting = len(self.entries)
        self._recoveries: dict[str, Any] = {}
        self._runners: dict[str, BoardRunner] = {}
        """Live board name -> what its runner can execute."""
        self._usable = 0
        self.servers = BoardServers(options.adb_server)
        """The adb servers of the boards (hil's private one, labs')."""
        self._leases: dict[str, Lease] = {}
        self._unreachable: set[str] = set()
        """Boards whose recovery ladder ran out: nothing to clean up on them."""
        self._probation: set[str] = set()
        """Quarantined boards waiting for their health check (they may come back)."""
        self.lowered_from_cache = 0

    # -- results ------------------------------------------------------------------------
    @property
    def records(self) -> list[dict[str, Any]]:
        """The finished cases so far, as written to results.json (one copy in memory)."""
        return self.writer.cases

    def _record(self, record: dict[str, Any]) -> None:
        """Journal a finished case at once; JUnit is re-rendered when results.json was
        (hil.report.results: O(cases) over the run), and by `_close` at the end."""
        with self._lock:
            if self._stop.is_set():
                return  # interrupted: a case cut short by the stop is not a result
            if self.writer.add(record):
                # valid after any stop; durable at the end (hil/report/results.atomic_write_text)
                self._write_junit(durable=False)
            if self.on_record is not None:
                self.on_record(record)

    def _write_junit(self, durable: bool = True) -> None:
        write_junit(self.writer.current(), self.options.junit_path, durable)
        # junit-xml pretty-prints through a minidom tree, a web of reference cycles as large
        # as the run: collected now, it does not wait for a full collection while the
        # process's memory keeps its high-water mark
        gc.collect()

    def _close(self, status: str | None) -> None:
        """The run ends: no board thread records any more; results.json gets every case
        (and `status`, or stays `running` when hil itself failed), then JUnit."""
        with self._lock:
            self._stop.set()
            began = time.perf_counter()
            if status is None:
                self.writer.checkpoint()
            else:
                self.writer.finish(status)
            results_s = time.perf_counter() - began
            self._write_junit()
            log.info("results: %d cases written in %.2f s (results.json %.2f s, JUnit %.2f s)",
                     len(self.records), time.perf_counter() - began, results_s,
                     time.perf_counter() - began - results_s)

    # -- the run ------------------------------------------------------------------------
    def execute(self) -> list[dict[str, Any]]:
        """Run every case; returns the case records (also written to results.json)."""
        if not self.options.cases:  # an empty shard: no adb server, no boards
            self._close("complete")
            return self.records
        with ExitStack() as stack:
            stack.enter_context(self.servers)  # keepers closed before any server stops
            stack.callback(self._release_leases)  # a board thread cut short releases here
            threads = [
                threading.Thread(
                    target=self._board_thread, args=(stack, entry), name=f"board-{i}",
                    daemon=True,
                )
                for i, entry in enumerate(self.entries)
            ]
            for thread in threads:
                thread.start()
            try:
                while not self._boards_settled.wait(0.2):
                    pass
                if self._live_boards:
                    self._choose_flow()
                    self._lower_all()
                else:
                    self._fail_unlowered("no usable board (every board failed to start or was quarantined)")
                self._lowering_done.set()
                while any(t.is_alive() for t in threads):
                    for thread in threads:
                        thread.join(timeout=0.2)
                self._fail_leftovers("no usable board left to run it")
                self._close("complete")
            except KeyboardInterrupt:
                self._close("interrupted")  # before the boards and servers stop: no board
                # thread may write after this; those that stop at once remove the run's
                # folder from their board while the adb server still runs (a soak's boards
                # kept it: the cleanup came after the server had stopped)
                _join_within(threads, INTERRUPT_CLEANUP_S)
                raise
            except UsageError:
                self._close("refused")
                for thread in threads:  # they clean their boards up before the boards stop
                    thread.join(timeout=self.options.idle_timeout_s)
                raise
            except BaseException:  # a bug in hil: every finished case is written all the same
                self._close(None)
                raise
        return self.records

    def _choose_flow(self) -> None:
        """Choose (`auto`) or check the flow against every live board's runner; UsageError
        when some board cannot run it, before anything is lowered."""
        from hil.runner.profiles import choose_flow

        with self._lock:
            runners = [self._runners[name] for name in sorted(self._live_boards)]
        precisions = sorted({case.precision for case in self.options.cases})
        requested = self.options.flow
        sdk = _sdk_problem() if requested in ("auto", "enn") else None
        self.flow, reason = choose_flow(requested, runners, precisions, sdk)
        with self._lock:
            self.meta.update(flow=self.flow, flow_reason=reason)
            self.writer.update_run(flow=self.flow, flow_reason=reason)
        log.info("flow %s (%s)", self.flow, reason)
        if self.on_flow is not None:
            self.on_flow(self.flow, reason)

    def _fail_unlowered(self, reason: str) -> None:
        for case in self.options.cases:
            self._record(case_record(case, verdict=Verdict.ERROR_INFRA.value, message=reason))

    def _lower_all(self) -> None:
        from hil.lower.cache import ArtifactCache
        from hil.lower.pool import lower_cases

        assert self.flow is not None
        cases = self.options.cases
        cache = ArtifactCache(self.options.cache_dir) if self.options.cache_dir else None
        lowerings = lower_cases(
            cases, self.flow, self.options.chipset, self.options.out_dir / "artifacts",
            cache, self.options.jobs,
        )
        for lowering in lowerings:
            if self._stop.is_set():
                lowerings.close()
                return
            case = cases[lowering.index]
            if self.on_lowered is not None:
                self.on_lowered(lowering)
            if lowering.artifact is None:
                assert lowering.verdict is not None
                self._record(
                    case_record(case, verdict=lowering.verdict.value, message=lowering.message,
                                detail=lowering.detail)
                )
                continue
            if not self._live_boards and not self._probation:
                self._record(
                    case_record(case, verdict=Verdict.ERROR_INFRA.value,
                                message="no usable board (every board failed to start or was quarantined)")
                )
                continue
            with self._lock:
                self._pending += 1
                self.lowered_from_cache += lowering.cached
            self._queue.put(_Work(lowering.index, case, lowering.artifact, lowering.cached))

    def _fail_leftovers(self, reason: str) -> None:
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                return
            last = f"; last attempt: {work.history[-1]['message']}" if work.history else ""
            self._record(self._infra_record(work, reason + last))

    def _infra_record(
        self, work: _Work, reason: str, logs: dict[str, str] | None = None
    ) -> dict[str, Any]:
        return case_record(
            work.case,
            board=work.tried_on[-1] if work.tried_on else None,
            verdict=Verdict.ERROR_INFRA.value,
            message=reason[:500],
            attempts=len(work.tried_on),
            pte_bytes=work.artifact.pte_bytes,
            timings_s={"lower": self._lower_seconds(work)},
            logs=logs or {},
            earlier_attempts=list(work.history),
        )

    @staticmethod
    def _lower_seconds(work: _Work) -> float:
        """Seconds this run spent lowering the case (0 for a cache hit)."""
        return 0.0 if work.cached else round(sum(work.artifact.times_s.values()), 4)

    # -- boards -------------------------------------------------------------------------
    def _board_thread(self, stack: ExitStack, entry: InventoryEntry) -> None:
        name = entry.name
        board = None
        try:
            board = self._bring_up(stack, entry)
        except (InfraError, UsageError) as exc:
            log.error("%s: not usable: %s", name, exc)
            self._release_lease(name)
            with self._lock:
                self.meta["boards"].append({"name": name, "adb": entry.adb, "error": str(exc),
                                            **self._board_lab_fields(entry)})
                self.writer.update_run(boards=self.meta["boards"])
        finally:
            with self._lock:
                self._starting -= 1
                if board is not None:
                    self._live_boards.add(name)
                    self._usable += 1
                if self._starting == 0:
                    self.meta["usable_boards"] = self._usable
                    self.writer.update_run(usable_boards=self._usable)
                    self._boards_settled.set()
        if board is None:
            return
        try:
            self._work_loop(board)
        finally:
            self._release_lease(name)
            with self._lock:
                self._live_boards.discard(name)
            if name not in self._unreachable:  # a dead board has nothing to clean
                board.cleanup()
            if board.console is not None:
                board.console.close()

    def _bring_up(self, stack: ExitStack, entry: InventoryEntry) -> Any:
        """Take the board's lease, start (virtual) or reach the board, preflight it, open its
        console, install the runner; InfraError (the board is not used) when any of it fails."""
        from hil.board.adb import AdbBoard
        from hil.board.console import SerialConsole
        from hil.board.preflight import connect_keeping_server, inspect_board
        from hil.board.recovery import Recovery
        from hil.runner.profiles import VIRTUAL_PROFILE_PROPERTY, choose_profile

        name = entry.name
        idle_s = self.options.idle_timeout_s
        self._take_lease(entry)
        adb = self.servers.server_for(entry)
        bring_up = time.perf_counter()
        if entry.virtual:
            from hil.virtual.launcher import start_virtual_board

            root = Path(tempfile.mkdtemp(prefix=f"hil-{name}-"))
            extra = ["--link", self.options.virtual_link]
            if self.options.runner_profile:
                extra += ["--runner-profile", self.options.runner_profile]
            # warm: the executor's import is the board's start-up, not its first case's time
            process = start_virtual_board(root, self.options.chipset, name, extra, wait_warm=True)
            with self._lock:
                stack.callback(shutil.rmtree, root, ignore_errors=True)
                stack.callback(process.stop)
            entry = dataclasses.replace(
                entry, adb=process.address, console=process.console, power=process
            )
        address = entry.adb
        device = connect_keeping_server(entry, adb, self.servers.keeper_for(adb), address, idle_s)
        probe = AdbBoard(name, address, device, self.run_id, VIRTUAL_RUNNER,
                         self.options.timeout_s, idle_s)
        report = inspect_board(probe, entry, self.options.chipset, console=False)
        if report.problems:
            raise InfraError(f"preflight: {'; '.join(report.problems)}")
        runner = VIRTUAL_RUNNER if report.virtual else self.options.runner
        if runner is None:
            raise UsageError(
                f"--runner: {name} is a real board: pass the enn_executor_runner built for "
                "Android (scripts/build-enn.sh --build android, or $HIL_RUNNER in the exynos image)"
            )
        console = None
        if entry.console:
            log_path = self.options.out_dir / "console" / f"{name}.log"
            try:
                console = SerialConsole(entry.console, log_path, entry.console_baud).open()
            except InfraError as exc:
                log.warning("%s: running without a console: %s", name, exc)
        board = AdbBoard(name, address, device, self.run_id, runner, self.options.timeout_s,
                         idle_s, console)
        try:
            info = board.prepare()
        except InfraError:
            if console is not None:
                console.close()
            raise
        self._recoveries[name] = Recovery(
            board, self.servers.keeper_for(adb), adb.connect, adb.disconnect, network=entry.network,
            power=entry.power, expected_chipset=report.chipset, idle_s=idle_s,
            boot_s=self.options.boot_timeout_s,
        )
        choice = choose_profile(
            self.options.runner_profile, entry.runner_profile,
            info.properties.get(VIRTUAL_PROFILE_PROPERTY) if info.virtual else None,
            None if info.virtual else runner,
        )
        with self._lock:
            self._runners[name] = BoardRunner(name, choice, info.virtual)
            self.meta["boards"].append(
                {"name": info.name, "adb": info.adb, "chipset": info.chipset,
                 "virtual": info.virtual, "properties": info.properties,
                 "console": entry.console if console is not None else None,
                 "runner_pushes": board.runner_pushes, "runner_profile": choice.record(),
                 "start_s": round(time.perf_counter() - bring_up, 3), **self._board_lab_fields(entry)}
            )
            self.meta["virtual"] = any(b.get("virtual") for b in self.meta["boards"])
            self.writer.update_run(boards=self.meta["boards"], virtual=self.meta["virtual"])
        log.info("%s: ready (%s, chipset %s, runner profile %s%s)", name, address, info.chipset,
                 choice.profile.name, ", VIRTUAL" if info.virtual else "")
        return board

    def _take_lease(self, entry: InventoryEntry) -> None:
        """The board's lease (none for a virtual board hil starts): waits up to
        --board-wait while another run holds it; InfraError when it stays busy."""
        from hil.board.lease import acquire

        if entry.virtual:
            return

        def busy(holder: Any) -> None:
            log.warning("%s: busy, held by %s; waiting up to %g s (--board-wait)", entry.name,
                        holder.describe() if holder else "another process",
                        self.options.board_wait_s)

        lease = acquire(self.servers.lease_key(entry), self.run_id, self.options.board_wait_s,
                        busy, cancelled=self._stop)
        with self._lock:
            self._leases[entry.name] = lease

    def _release_lease(self, name: str) -> None:
        with self._lock:
            lease = self._leases.get(name)
        if lease is not None:
            lease.release()

    def _release_leases(self) -> None:
        with self._lock:
            leases = list(self._leases.values())
        for lease in leases:
            lease.release()

    def _board_lab_fields(self, entry: InventoryEntry) -> dict[str, Any]:
        """results.json board fields: the adb server it belongs to, and its lease (called
        with `_lock` held)."""
        lease = self._leases.get(entry.name)
        return {"adb_server": self.servers.address_for(entry) or "private",
                "lease": lease.record() if lease is not None else None}

    def _next_work(self, name: str) -> _Work | None:
        """The next case for board `name`; None when there is nothing left for it."""
        while not self._stop.is_set():
            try:
                work = self._queue.get(timeout=0.2)
            except queue.Empty:
                with self._lock:
                    if self._lowering_done.is_set() and self._pending == 0:
                        return None
                continue
            with self._lock:
                others = self._live_boards - {name} - set(work.tried_on)
            if name in work.tried_on and others:
                self._queue.put(work)  # retry elsewhere
                time.sleep(0.05)
                continue
            return work
        return None

    def _work_loop(self, board: Any) -> None:
        """Run cases on `board`; after an infrastructure error, retry the case (elsewhere
        when possible) and climb the recovery ladder. A board whose ladder runs out, or that
        failed QUARANTINE_AFTER times in a row, is quarantined (`_quarantine`): it may come
        back after a health check."""
        from hil.board.recovery import Rung, first_rung

        consecutive_infra = 0
        quarantines = 0
        good = 0
        while (work := self._next_work(board.name)) is not None:
            started = _now_ms()
            record, error = self._run_on(board, work)
            record.update(started=started, finished=_now_ms())
            if error is None:
                consecutive_infra = 0
                good += 1
                if good >= GOOD_STREAK:
                    quarantines = 0
                # a known failure on numbers (XFAIL) is localized too: its cause is the point
                failed_on = record.get("actual_verdict", record["verdict"])
                if self.options.localize and failed_on == Verdict.FAIL_MISMATCH.value:
                    record["localization"] = self._localize(board, work, record["outputs"])
                self._finish(record)
                continue
            consecutive_infra += 1
            good = 0
            if len(work.tried_on) <= self.options.retries:
                work.history.append(
                    {"board": board.name, "verdict": record["verdict"], "message": record["message"],
                     "started": started, "finished": record["finished"],
                     "logs": {name: text[-ATTEMPT_LOG_CHARS:] for name, text in record["logs"].items()}}
                )
                self._queue.put(work)
            else:
                self._finish(record)
            if self._stop.is_set():
                return  # interrupted: no recovery, the run is ending
            recovery = self._recoveries[board.name]
            start = first_rung(error)
            log.warning("%s: infrastructure error; recovery starts at %s", board.name, start.value)
            rung = recovery.recover(start)
            self._note_recovery(board.name, recovery.history)
            if rung is Rung.QUARANTINED or consecutive_infra >= QUARANTINE_AFTER:
                quarantines += 1
                why = (RECOVERY_FAILED if rung is Rung.QUARANTINED
                       else f"{consecutive_infra} infrastructure errors in a row")
                if not self._quarantine(board, recovery, why, rung is not Rung.QUARANTINED, quarantines):
                    return
                consecutive_infra = 0

    def _quarantine(
        self, board: Any, recovery: Any, why: str, reachable: bool, quarantines: int
    ) -> bool:
        """Take `board` out of the run. While other boards carry the run or may come back, or
        when it still answers (`reachable`), it sits out PROBATION_S (doubled per earlier
        quarantine since its last GOOD_STREAK, and per failed check), then gets a health
        check: True when it passed and the board is back. False when it is out for good:
        HEALTH_CHECKS checks failed, the run has no work left for it, or its ladder ran out
        while no other board was live or on probation (nobody waits for a dead last board:
        the run reports what is left)."""
        name = board.name
        with self._lock:
            others_live = bool((self._live_boards | self._probation) - {name})
            self._live_boards.discard(name)
            if not reachable:
                self._unreachable.add(name)
        if not reachable and not others_live:
            log.error("%s: quarantined for the rest of the run (%s)", name, why)
            self._note_recovery(name, recovery.history, quarantined=why)
            return False
        wait_s = PROBATION_S * 2 ** (quarantines - 1)
        log.error("%s: quarantined (%s); health check in %g s", name, why, wait_s)
        self._note_recovery(name, recovery.history, quarantined=why)
        with self._lock:
            self._probation.add(name)
        out_since = time.monotonic()
        try:
            for _check in range(HEALTH_CHECKS):
                if not self._sit_out(wait_s):
                    return False  # the run is over, or has nothing left for this board
                problem = self._health_problem(board, recovery)
                self._note_probation(name, why, time.monotonic() - out_since, problem)
                if problem is None:
                    log.warning("%s: back in the run (health check passed after %.0f s out)",
                                name, time.monotonic() - out_since)
                    with self._lock:
                        self._live_boards.add(name)
                    return True
                log.error("%s: health check failed: %s", name, problem)
                wait_s *= 2
            why = f"{why}; {HEALTH_CHECKS} health checks failed"
            log.error("%s: quarantined for the rest of the run (%s)", name, why)
            self._note_recovery(name, recovery.history, quarantined=why)
            return False
        finally:
            with self._lock:
                self._probation.discard(name)

    def _sit_out(self, seconds: float) -> bool:
        """Wait `seconds`; False as soon as the run stops or no case is left to run."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._stop.wait(0.2):
                return False
            with self._lock:
                if self._lowering_done.is_set() and self._pending == 0:
                    return False
        return True

    def _health_problem(self, board: Any, recovery: Any) -> str | None:
        """Why `board` is not fit to take cases again, or None: the recovery ladder must
        bring it back (HEALTHY), and it must take the run's workdir and runner again and let
        a file be written there."""
        from hil.board.recovery import Rung

        back = recovery.recover(Rung.RECONNECT) is Rung.HEALTHY
        with self._lock:
            (self._unreachable.discard if back else self._unreachable.add)(board.name)
        if not back:
            return f"{RECOVERY_FAILED} ({recovery.history[-1].message})"
        try:
            board.prepare()
            board.check_writable()
        except InfraError as exc:
            return str(exc)
        return None

    def _note_probation(self, name: str, why: str, out_s: float, problem: str | None) -> None:
        """A health check of a quarantined board in results.json (`run.boards[].probation`)."""
        with self._lock:
            for entry in self.meta["boards"]:
                if entry.get("name") == name:
                    entry.setdefault("probation", []).append(
                        {"why": why, "out_s": round(out_s, 1),
                         "health_check": problem or "passed", "back": problem is None})
                    if problem is None:
                        entry.pop("quarantined", None)
            self.writer.update_run(boards=self.meta["boards"])

    def _localize(self, board: Any, work: _Work, outputs: list[dict[str, Any]]) -> dict[str, Any]:
        """The case's `localization` block: its graph bisected on `board` (hil/localize).
        Probes are built in this process, so only once the run's own lowering is done."""
        from hil.localize import localize_case
        from hil.lower.cache import ArtifactCache

        assert self.flow is not None
        while not self._lowering_done.wait(0.2):
            if self._stop.is_set():  # interrupted: the record will not be written anyway
                return {"status": "incomplete", "reason": "interrupted", "probes": []}
        slot = f"c{work.index:04d}"
        out = self.options.out_dir / "cases" / slot / "localize"

        def run_probe(artifact: Any, name: str) -> Any:
            probe_slot = f"{slot}-{name}"
            execution = board.run(artifact, probe_slot, out / f"{name}-{board.name}", 1, 0)
            board.shell(["rm", "-rf", posixpath.join(board.workdir, probe_slot)])  # a model's probes add up
            return execution

        def report(entry: dict[str, Any]) -> None:
            if self.on_probe is not None:
                self.on_probe(work.case, entry)

        try:
            return localize_case(
                work.case, self.flow, self.options.chipset, run_probe, board=board.name,
                cache=ArtifactCache(self.options.cache_dir) if self.options.cache_dir else None,
                scratch=self.options.out_dir / "artifacts" / f"{slot}-probes", case_outputs=outputs,
                on_probe=report,
            )
        except Exception as exc:  # noqa: BLE001 - a bug in hil must not lose the case's result
            log.exception("%s: localization failed", work.case.key)
            return {"status": "incomplete", "reason": f"{type(exc).__name__}: {exc}"[:300],
                    "message": f"localization failed: {type(exc).__name__}: {exc}"[:300],
                    "detail": traceback.format_exc()[-8192:], "probes": []}

    def _note_recovery(
        self, name: str, steps: list[Any], quarantined: str | None = None
    ) -> None:
        with self._lock:
            for entry in self.meta["boards"]:
                if entry.get("name") == name:
                    entry["recovery"] = [
                        {"step": s.rung.value, "recovered": s.recovered, "message": s.message,
                         "seconds": s.seconds} for s in steps
                    ]
                    if quarantined:
                        entry["quarantined"] = quarantined
            self.writer.update_run(boards=self.meta["boards"])

    def _finish(self, record: dict[str, Any]) -> None:
        self._record(record)
        with self._lock:
            self._pending -= 1

    def _run_on(self, board: Any, work: _Work) -> tuple[dict[str, Any], InfraError | None]:
        """The case's record on `board`, and the infrastructure error if there was one.
        A case that did not pass carries the board's logcat tail and console excerpt."""
        from hil.board.watchdog import BoardSilent
        from hil.judge import judge

        work.tried_on.append(board.name)
        artifact = work.artifact
        slot = f"c{work.index:04d}"
        host_out = self.options.out_dir / "cases" / slot / f"output-{board.name}"
        plan = self.options.suite_latency.get(work.case.suite) or self.options.latency
        plan = plan or LatencyPlan(self.options.warmup, self.options.iterations)
        try:
            execution = board.run(
                artifact, slot, host_out, plan.iterations, plan.warmup, plan.noise
            )
            judgement = judge(work.case, artifact, execution)
        except InfraError as exc:
            logs = board.diagnostics(logcat=not isinstance(exc, BoardSilent))
            return self._infra_record(work, str(exc), logs), exc
        except Exception as exc:  # noqa: BLE001 - a bug in hil: record it, keep going
            return case_record(
                work.case, board=board.name, verdict=Verdict.ERROR_INTERNAL.value,
                message=f"{type(exc).__name__}: {exc}"[:300], detail=traceback.format_exc(),
                attempts=len(work.tried_on), earlier_attempts=list(work.history),
            ), None
        logs = {"runner": (execution.stdout + execution.stderr)[-65536:]}
        if not judgement.verdict.passed:
            logs.update(board.diagnostics())
        return case_record(
            work.case,
            board=board.name,
            verdict=judgement.verdict.value,
            message=judgement.message,
            attempts=len(work.tried_on),
            timings_s={"lower": self._lower_seconds(work), **execution.timings_s},
            cache_hit=work.cached,
            **execution.record_fields(),
            **artifact.record_fields(),
            outputs=judgement.output_records(),
            checker=judgement.checker_record(),
            logs=logs,
            earlier_attempts=list(work.history),
        ), None

