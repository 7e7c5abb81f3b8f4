"""The driver: starts the boards and `hil -v run`, carries out the deck's decisions on the
boards while hil runs, forwards SIGTERM/SIGINT to hil as CI stops a job, and hands what it
saw to the analysis (`Observed`): what hil printed and logged, the faults it injected and the
boards fired, and what was left running or connected once hil had exited."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.virtual.sandboxes import is_namespace_init

from .boards import Boards, Fired
from .cases import FLOW, prepare_cases
from .deck import SERVER_KILL, Dealer, Injection, is_state, kind_of
from .hilrun import Event, Finished, HilRun
from .procs import Sample, become_subreaper, descendants, live_lifeline, reap_orphans, settle_lifelines

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
CHIPSET = "E9955"
"""What the virtual boards report and the cases are lowered for."""
KILL_AFTER_S = 60
"""hil still running this long after its SIGTERM is killed."""
NOTE_EVERY_S = 60
"""Between two progress lines of the soak."""


@dataclass(frozen=True)
class Settings:
    """The soak's command line."""

    cases: int
    boards: int
    chaos_rate: float
    """Faults per finished case (a probability)."""
    link: str
    """The virtual boards' `--link`."""
    max_minutes: float
    """Bound of the run: SIGTERM to hil past it."""
    timeout: float
    """hil run --timeout."""
    idle_timeout: float
    """hil run --idle-timeout."""
    work: Path
    cache: Path


@dataclass
class Observed:
    """Everything one soak saw: the driver's output, the analysis's input."""

    seed: int
    """The dealer's random seed."""
    planned: list[str]
    """Case keys of the manifest."""
    out: Path
    """hil run --out (results.json, junit.xml)."""
    board_names: list[str]
    finished: list[Finished]
    events: list[Event]
    tracebacks: int
    results_write: tuple[int, float, float, float] | None
    first: Sample | None
    last: Sample | None
    peak: Sample | None
    injections: list[Injection]
    skipped: dict[str, str]
    """Fault kinds the deck left out, with why."""
    fired: list[Fired]
    hil_exit: int | None
    wall_s: float
    timed_out: bool
    interrupted: bool
    """A SIGTERM/SIGINT came while hil ran (or before the leftovers were counted)."""
    signalled: list[float]
    """When each SIGTERM/SIGINT came (monotonic), still filled while the boards stop: the
    soak exits 130 after any."""
    sigterm_to_exit_s: float | None
    processes_left: list[str]
    """Command lines left running once hil had exited, then once the boards had stopped."""
    adb_connections_left: int
    load_before: list[str]
    load_after: list[str]


class Chaos:
    """Injects the faults the dealer deals, after finished cases and into recoveries."""

    def __init__(self, boards: Boards, hil: HilRun, dealer: Dealer) -> None:
        self.boards = boards
        self.hil = hil
        self.dealer = dealer
        self.injections: list[Injection] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []

    def start(self) -> None:
        self.hil.on_recovery = self._recovering
        self.hil.on_case = self._case_finished

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            for timer in self._timers:
                timer.cancel()

    def _case_finished(self) -> None:
        if self._stop.is_set():
            return
        delay = self.dealer.after_case()
        if delay is not None:
            self._later(delay, self._strike)

    def _later(self, delay: float, action: Any, *args: Any) -> None:
        timer = threading.Timer(delay, action, args)
        timer.daemon = True
        with self._lock:
            self._timers = [t for t in self._timers if t.is_alive()]
            self._timers.append(timer)
        timer.start()

    def _strike(self) -> None:
        if self._stop.is_set():
            return
        with self.hil.lock:  # a quarantined board is not in use: nothing happens to it
            in_run = [name for name in self.boards.names if name not in self.hil.out_of_run]
        if not in_run:
            return
        spec, names = self.dealer.strike(in_run)
        for name in names:
            self.inject(name, spec, pair=len(names) > 1)

    def _recovering(self, board: str) -> None:
        if self._stop.is_set():
            return
        dealt = self.dealer.in_recovery()
        if dealt is not None:
            delay, spec = dealt
            self._later(delay, self._inject_in_recovery, board, spec)

    def _inject_in_recovery(self, board: str, spec: str) -> None:
        with self.hil.lock:
            still = board in self.hil.in_recovery
        if still and not self._stop.is_set():
            self.inject(board, spec, during_recovery=True)

    def inject(self, board: str, spec: str, pair: bool = False, during_recovery: bool = False) -> None:
        injection = Injection(time.time(), board, spec, kind_of(spec), during_recovery, pair)
        if spec == SERVER_KILL:
            pid = self.hil.adb_server_pid()
            if pid is None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        else:
            self.boards.control(board, f"fault {spec}")
            if is_state(spec):
                self._later(self.dealer.hold(), self._clear, injection)
        with self._lock:
            self.injections.append(injection)
        log.info("fault %s -> %s%s%s", spec, board, " (pair)" if pair else "",
                 " (during recovery)" if during_recovery else "")

    def _clear(self, injection: Injection) -> None:
        self.boards.control(injection.board, f"fault clear {injection.kind}")
        injection.cleared_at = time.time()
        log.info("fault clear %s -> %s", injection.kind, injection.board)


def _loadavg() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def run(settings: Settings, dealer: Dealer, seed: int) -> Observed:
    """One soak from the cases to the boards stopped; raises SystemExit when it cannot start."""
    become_subreaper()
    load_before = _loadavg()
    started = time.monotonic()
    work = settings.work
    manifest, planned = prepare_cases(work, settings.cases, settings.cache, CHIPSET)
    out = work / "out"
    boards = Boards(work, settings.boards, settings.link, CHIPSET)
    try:
        boards.start()
        argv = [sys.executable, "-m", "hil", "-v", "run", "--inventory", str(boards.inventory()),
                "--suite", str(manifest), "--flow", FLOW, "--out", str(out),
                "--cache-dir", str(settings.cache), "--jobs", "1", "--retries", "1",
                "--timeout", str(settings.timeout), "--idle-timeout", str(settings.idle_timeout),
                "--boot-timeout", "30"]
        env = dict(os.environ, HIL_LEASE_DIR=str(work / "leases"),
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        hil = HilRun(argv, env, REPO, work / "hil.log")
        chaos = Chaos(boards, hil, dealer)
        try:
            stop_requested = _forward_stop_signals(hil)
            hil.start()
            chaos.start()
            assert hil.process is not None
            log.info("hil run started (pid %d); chaos %g faults per case, seed %d",
                     hil.process.pid, settings.chaos_rate, seed)
            timed_out = _watch(hil, chaos, stop_requested, started + settings.max_minutes * 60,
                               settings.max_minutes, len(planned))
            sigterm_to_exit = time.monotonic() - stop_requested[0] if stop_requested else None
            chaos.stop()
            time.sleep(0.5)  # the readers take the last lines
            wall = time.monotonic() - started

            # what is left once hil has exited (the boards still run); hil's lifeline watcher
            # ends what hil left, then itself: give it its moment
            settle_lifelines()
            left = _left_running(boards)
            transports = boards.transports_open()
            fired = boards.fired()
            interrupted = bool(stop_requested)
        finally:
            chaos.stop()
            if hil.running():
                assert hil.process is not None
                hil.process.kill()
                hil.process.wait()
    finally:
        boards.stop()
    time.sleep(0.5)
    settle_lifelines()
    reap_orphans()
    left += sorted(cmd for cmd in descendants(os.getpid()).values() if not live_lifeline(cmd))
    return Observed(
        seed=seed, planned=planned, out=out, board_names=boards.names, finished=hil.finished,
        events=hil.events, tracebacks=hil.tracebacks, results_write=hil.results_write,
        first=hil.first, last=hil.last, peak=hil.peak, injections=chaos.injections,
        skipped=dealer.skipped, fired=fired, hil_exit=hil.process.returncode, wall_s=round(wall, 1),
        timed_out=timed_out, interrupted=interrupted, signalled=stop_requested,
        sigterm_to_exit_s=round(sigterm_to_exit, 2) if sigterm_to_exit is not None else None,
        processes_left=left, adb_connections_left=transports, load_before=load_before,
        load_after=_loadavg(),
    )


SHELLS_SETTLE_S = 10.0
"""How long the boards get to end the shells of hil's closed streams once hil has exited: a
board sees its adb connection drop, then kills each command; on a loaded CI machine that took
longer than the half second it had (one `bwrap` counted as left in a CI soak)."""


def _left_running(boards: Boards) -> list[str]:
    """The command lines still running below the boards (not the boards themselves) or below
    the soak once hil has exited: polled for at most SHELLS_SETTLE_S, so that only what stays
    counts."""
    deadline = time.monotonic() + SHELLS_SETTLE_S
    while True:
        inside, board_pids = boards.processes_inside(), boards.pids()
        below_soak = {pid: cmd for pid, cmd in descendants(os.getpid()).items()
                      if pid not in board_pids and pid not in inside and not live_lifeline(cmd)
                      and not is_namespace_init(cmd)}  # a running board's own (boards.py)
        left = {**inside, **below_soak}
        if not left or time.monotonic() > deadline:
            if left:
                log.info("still running %.0f s after hil exited: %s", SHELLS_SETTLE_S,
                         "; ".join(left.values()))
            return sorted(left.values())
        reap_orphans()
        time.sleep(0.2)


def _forward_stop_signals(hil: HilRun) -> list[float]:
    """SIGTERM and SIGINT of the soak go to `hil run` as a SIGTERM; returns the list that
    gets the moment (monotonic) each signal came."""
    stop_requested: list[float] = []

    def forward(_signum: int, _frame: Any) -> None:
        stop_requested.append(time.monotonic())
        if hil.running():
            assert hil.process is not None
            hil.process.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return stop_requested


def _watch(hil: HilRun, chaos: Chaos, stop_requested: list[float], deadline: float,
           max_minutes: float, planned: int) -> bool:
    """Wait for hil to exit: SIGTERM past the deadline, SIGKILL KILL_AFTER_S after a SIGTERM
    (the soak's or the deadline's), a progress line every NOTE_EVERY_S. True when the
    deadline passed."""
    assert hil.process is not None
    last_note = 0.0
    timed_out = False
    while hil.process.poll() is None:
        time.sleep(0.2)
        if time.monotonic() > deadline and not timed_out:
            log.info("over --max-minutes %g: stopping hil", max_minutes)
            timed_out = True
            hil.process.send_signal(signal.SIGTERM)
        stopped = stop_requested[0] if stop_requested else deadline if timed_out else None
        if stopped is not None and time.monotonic() - stopped > KILL_AFTER_S:
            log.info("hil still runs %d s after SIGTERM: killing it", KILL_AFTER_S)
            hil.process.kill()
        if time.monotonic() - last_note > NOTE_EVERY_S:
            last_note = time.monotonic()
            log.info("%d/%d cases reported, %d faults injected", len(hil.finished), planned,
                     len(chaos.injections))
    return timed_out
