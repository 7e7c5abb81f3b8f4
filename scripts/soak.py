#!/usr/bin/env python3
"""Soak under chaos: thousands of cases on several virtual boards while random faults hit
them, and what came of it: cases lost, faults unhandled, resources leaked, speed kept.

A benchmark, not a test (figures; it exits 1 when an invariant does not hold):

1. N cases: copies of three tiny MLP cases under new ids, written as a manifest; the three
   are lowered once (flow portable) and every copy's cache entry is the same artifact, so
   `hil run` lowers nothing.
2. B virtual boards (`--link usb2`, a console pty, a power switch on their control FIFO),
   reached by `hil run` as network boards through its private adb server.
3. `hil -v run` as its own process; its progress lines say which case finished when, its
   log lines when a board starts recovering, is quarantined or comes back.
4. A chaos driver writes faults to the boards' control FIFOs: after each finished case, with
   probability `--chaos-rate`, one fault at a random moment of the next half second (so
   faults arrive mid-case, at a rate that follows the run's speed): every fault kind of
   `hil/virtual/faults.py` (kinds added later too, as bare specs) and the death of hil's adb
   server, drawn from a shuffled deck so that every kind comes before any repeats (an event
   fault that fires every time by default, as a bare `miscompute`, is drawn to fire once); some on
   two boards at once, and more while a board climbs its recovery ladder; only boards in the
   run (a quarantined board is not in use). State faults are cleared after a few seconds.
5. Afterwards: every planned case reported exactly once in results.json and JUnit; each
   fault's fate (the verdict of the attempt it fired in; "unhandled" when hil did not
   classify it: a runner fault that ended PASS, an ERROR_INTERNAL, a traceback);
   hil's RSS, fds and threads when the first and the last case finished; adb transports
   still open to the boards and processes left once hil has exited; cases/s of the first and
   last 10 % of cases; the time hil took to write its results at the end.

SIGTERM (or SIGINT) stops the soak the way CI stops a job: it is forwarded to `hil run`,
which must exit 130 within 10 s leaving a valid results.json and JUnit with every case it
reported; the soak then checks that, stops the boards and exits 130.

Usage: PYTHONPATH=. .venv/bin/python scripts/soak.py --cases 3000 --boards 4 \\
           --chaos-rate 0.02 --json soak.json
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import datetime as dt
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hil.virtual.faults import KINDS, parse_fault  # noqa: E402
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board  # noqa: E402

FLOW = "portable"
CHIPSET = "E9955"
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

SERVER_KILL = "adb-server-kill"
"""Not a board fault: SIGKILL of hil's private adb server (the matrix's "adb server dies")."""
CARDS: dict[str, tuple[str, ...]] = {
    "drop": ("drop,on=push,path=*.pte", "drop,on=exec", "drop,on=pull,path=*/output_0.bin",
             "drop,on=now"),
    "freeze": ("freeze,on=exec", "freeze,on=now"),
    "reboot": ("reboot,on=exec", "reboot,on=now"),
    "panic": ("panic,on=exec",),
    "crash": ("crash,signal=SEGV", "crash,signal=ABRT"),
    "storage-full": ("storage-full,on=push,path=*.pte", "storage-full,on=exec"),
    "slow": ("slow,delay=0.02",),
    "noise": ("noise,rel=0.5",),
    "miscompute": ("miscompute,times=1",),
}
"""Specs drawn for the kinds that have variants or need options (a bare `miscompute` would
hit every later program of its board); any other kind of KINDS is drawn bare."""
DURING_RECOVERY = ("drop,on=now", "reboot,on=now", "freeze,on=now", "auth-refused",
                   "wrong-chipset", "slow,delay=0.02", SERVER_KILL)
"""What may hit a board while it climbs the recovery ladder."""
STATE_HOLD_S = (3.0, 10.0)
"""A state fault holds this long (uniform), then `fault clear KIND`."""
PAIR_SHARE = 0.2
"""Share of injections that hit two boards at once."""
RECOVERY_SHARE = 0.5
"""Share of recoveries that get a fault while they run."""

MUST_FAIL_RUN = {"crash", "hang", "truncate-output", "missing-output"}
"""Runner faults: the attempt they fire in can only be FAIL_RUN (a PASS is a silent green)."""
MUST_FAIL_MISMATCH = {"miscompute", "noise"}
"""Wrong numbers (every program's outputs off by half their RMS): FAIL_MISMATCH, never PASS."""
EXPECTED = {
    **{kind: {"FAIL_RUN"} for kind in MUST_FAIL_RUN},
    **{kind: {"FAIL_MISMATCH"} for kind in MUST_FAIL_MISMATCH},
    **{kind: {"ERROR_INFRA"} for kind in ("drop", "freeze", "reboot", "panic", "storage-full",
                                          "readonly-data", SERVER_KILL)},
}
"""Verdicts an attempt hit by the kind is expected to get (for the report; only MUST_FAIL_RUN
and MUST_FAIL_MISMATCH are strict). Kinds not listed (wrong-chipset, auth-refused, slow, later
kinds) have none."""

PROGRESS = re.compile(r"^\[\s*(\d+)/(\d+)\] (\S+)\s+(\S+) \[(\S+)\]")
LOG_LINE = re.compile(r"^(\S+ \S+) (\w+) (\S+): (.*)$")
RECOVERY_START = re.compile(r"^(\S+): infrastructure error; recovery starts at (\S+)")
RECOVERY_STEP = re.compile(r"^(\S+): recovery (\S+): (board is back|failed)")
QUARANTINED = re.compile(r"^(\S+): quarantined(?: for the rest of the run)? \((.*)\)")
READMITTED = re.compile(r"^(\S+): back in the run \((.*)\)")
WRITTEN = re.compile(
    r"results: (\d+) cases written in ([\d.]+) s \(results.json ([\d.]+) s, JUnit ([\d.]+) s\)")
BOARD_FIRES = re.compile(r"^(\S+ \S+) WARNING \S+: fault (\S+) fires on (\S+)")


def log(message: str) -> None:
    """A progress line of the soak itself (stderr)."""
    sys.stderr.write(f"soak {time.strftime('%H:%M:%S')}: {message}\n")
    sys.stderr.flush()


# ----------------------------------------------------------------------------- processes
def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of `pid`, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0]


def descendants(root: int) -> dict[int, str]:
    """Living descendants of `root` (zombies left out): pid -> command line."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] not in ("Z", "X"):
                parents[stat[0]].append(int(entry))
    found: dict[int, str] = {}
    todo = list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()[:200]
        except OSError:
            continue
        todo += parents.get(pid, [])
    return found


def become_subreaper() -> None:
    """Orphans of everything started below this process are re-parented to it, so nothing
    hil leaves behind escapes `descendants(os.getpid())`."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        log("prctl(PR_SET_CHILD_SUBREAPER) failed: orphans may escape the count")


def reap_orphans(keep: set[int]) -> None:
    """Collect zombie children that are not ours to wait for (orphans re-parented here)."""
    for pid, _ in descendants_any(os.getpid()):
        if pid not in keep:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def descendants_any(root: int) -> list[tuple[int, str]]:
    """Direct children of `root`, zombies included: (pid, state)."""
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[0] == root:
                children.append((int(entry), stat[1]))
    return children


def tcp_connections() -> list[tuple[int, int, str]]:
    """(local port, remote port, inode) of every established loopback TCP connection."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if parts[3] != "01":  # ESTABLISHED
                    continue
                local = int(parts[1].rsplit(":", 1)[1], 16)
                remote = int(parts[2].rsplit(":", 1)[1], 16)
                found.append((local, remote, parts[9]))
    return found


@dataclass
class Sample:
    """hil's process at one moment."""

    at: float
    rss_mb: float
    fds: int
    threads: int
    adb_client_connections: int
    """hil's own TCP connections to its adb server."""
    fd_kinds: dict[str, int]
    """Open fds by what they are: socket, pipe, a device, a file's folder."""


def sample(pid: int, adb_port: int | None) -> Sample | None:
    """RSS, open fds, threads and adb client connections of `pid`; None once it is gone."""
    kinds: collections.Counter[str] = collections.Counter()
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = os.listdir(f"/proc/{pid}/fd")
        inodes = set()
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
                kinds[target.split(":")[0] if ":[" in target else str(Path(target).parent)] += 1
    except OSError:
        return None
    values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmRSS" not in values:  # a zombie
        return None
    clients = 0
    if adb_port is not None:
        clients = sum(1 for _l, remote, inode in tcp_connections()
                      if remote == adb_port and inode in inodes)
    return Sample(time.monotonic(), int(values["VmRSS"].split()[0]) / 1024,
                  len(fds), int(values["Threads"]), clients, dict(kinds))


# ----------------------------------------------------------------------------- cases
def prepare_cases(work: Path, count: int, cache: Path) -> list[str]:
    """Write the manifest of `count` copies, lower the three bases, give every copy the
    base's cache entry; returns the planned case keys."""
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
    for lowering in lower_cases(bases, FLOW, CHIPSET, work / "scratch", store, 1):
        if lowering.artifact is None:
            raise SystemExit(f"soak: lowering {bases[lowering.index].id} failed: {lowering.message}")
        folders[lowering.index] = lowering.artifact.folder
    seeded = 0
    for index, case in enumerate(cases):
        key = cache_key(case, FLOW, CHIPSET)
        target = cache / key[:2] / key
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(folders[index % len(VARIANTS)], target)
            seeded += 1
    log(f"{count} cases: 3 bases lowered/cached in {time.monotonic() - start:.1f} s, "
        f"{seeded} cache entries seeded")
    return [case.key for case in cases]


# ----------------------------------------------------------------------------- boards
POWER_SCRIPT = ("import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK); "
                "os.write(fd, sys.argv[2].encode() + b'\\n')")


def _board_time(stamp: str) -> float:
    """Epoch seconds of a log timestamp `2026-11-30 19:19:20,915` (local time)."""
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class Boards:
    """The virtual boards of the soak: started, reachable, controllable, stopped."""

    def __init__(self, work: Path, count: int, link: str) -> None:
        self.work = work
        self.names = [f"soak-{i}" for i in range(count)]
        self.processes: dict[str, VirtualBoardProcess] = {}
        self._lock = threading.Lock()
        self.link = link

    def start(self) -> None:
        for name in self.names:
            self.processes[name] = start_virtual_board(
                self.work / name, CHIPSET, name,
                ["--link", self.link, "--console", str(self.work / f"{name}.tty"),
                 "--reboot-seconds", "0.5"])
        deadline = time.monotonic() + 600
        for board in self.processes.values():
            while "virtual executor warm in" not in board.log_path.read_text(errors="replace"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"soak: {board.address}: executor not warm in 600 s")
                time.sleep(0.2)
        log(f"{len(self.names)} boards up: " + ", ".join(b.address for b in self.processes.values()))

    def inventory(self) -> Path:
        path = self.work / "inventory.yaml"
        entries = [
            {"name": name, "adb": board.address, "chipset": CHIPSET,
             "console": str(self.work / f"{name}.tty"),
             "power": {"cycle": [sys.executable, "-c", POWER_SCRIPT,
                                 str(board.root / "run" / "control"), "power cycle"]}}
            for name, board in self.processes.items()
        ]
        path.write_text(json.dumps({"boards": entries}, indent=1))
        return path

    def control(self, name: str, line: str) -> None:
        with self._lock:
            try:
                self.processes[name].control(line)
            except Exception as exc:  # noqa: BLE001 - the board may be mid-reboot: note it
                log(f"{name}: control {line!r} failed: {exc}")

    def ports(self) -> dict[str, int]:
        return {name: int(b.address.rsplit(":", 1)[1]) for name, b in self.processes.items()}

    def fired(self) -> list[tuple[float, str, str, str]]:
        """(time, board, kind, event) of every event fault the boards logged as fired."""
        found = []
        for name, board in self.processes.items():
            for line in board.log_path.read_text(errors="replace").splitlines():
                match = BOARD_FIRES.match(line)
                if match:
                    found.append((_board_time(match.group(1)), name, match.group(2), match.group(3)))
        return sorted(found)

    def transports_open(self) -> int:
        """TCP connections an adb server still holds to the boards."""
        ports = set(self.ports().values())
        return sum(1 for local, _remote, _inode in tcp_connections() if local in ports)

    def processes_inside(self) -> dict[int, str]:
        """Processes running below the board processes (shells, runners)."""
        found: dict[int, str] = {}
        for board in self.processes.values():
            found.update(descendants(board.pid))
        return found

    def stop(self) -> None:
        for board in self.processes.values():
            board.stop()


# ----------------------------------------------------------------------------- hil
@dataclass
class Injection:
    """One fault the chaos driver caused."""

    at: float
    """Epoch seconds."""
    board: str
    spec: str
    kind: str
    during_recovery: bool = False
    pair: bool = False
    cleared_at: float | None = None
    """State faults: when `fault clear KIND` went out."""


@dataclass
class HilRun:
    """`hil -v run` as a child process, watched through its output and /proc."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[str] | None = None
    finished: list[tuple[float, int, str, str, str]] = field(default_factory=list)
    """(epoch, n, verdict, key, board) per progress line."""
    events: list[tuple[float, str, str, str]] = field(default_factory=list)
    """(epoch, kind, board, detail): recovery start/step, quarantine, re-admission."""
    tracebacks: int = 0
    results_write: tuple[int, float, float, float] | None = None
    """Cases, seconds to write results.json and JUnit at the end, of which results.json, JUnit."""
    first: Sample | None = None
    last: Sample | None = None
    peak: Sample | None = None
    adb_port: int | None = None
    in_recovery: set[str] = field(default_factory=set)
    out_of_run: set[str] = field(default_factory=set)
    """Boards quarantined and not back (yet)."""
    on_recovery: Any = None
    on_case: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, bufsize=1)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        threading.Thread(target=self._sample_loop, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        with (self.log_path.parent / "hil.stdout").open("w") as copy:
            for line in self.process.stdout:
                copy.write(line)
                match = PROGRESS.match(line)
                if not match:
                    continue
                done, total = int(match.group(1)), int(match.group(2))
                with self.lock:
                    self.finished.append((time.time(), done, match.group(3), match.group(4),
                                          match.group(5)))
                if done == 1 or done == total:
                    self._take_sample(first=done == 1)
                if self.on_case is not None:
                    self.on_case()

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        with self.log_path.open("w") as copy:
            for line in self.process.stderr:
                copy.write(line)
                copy.flush()
                if "Traceback (most recent call last)" in line or line.startswith("Exception in thread"):
                    self.tracebacks += 1
                match = LOG_LINE.match(line.rstrip("\n"))
                if match:
                    self._log_event(match.group(4))

    def _log_event(self, message: str) -> None:
        now = time.time()
        written = WRITTEN.search(message)
        if written:
            self.results_write = (int(written.group(1)), float(written.group(2)),
                                  float(written.group(3)), float(written.group(4)))
        for kind, pattern in (("recovery", RECOVERY_START), ("step", RECOVERY_STEP),
                              ("quarantined", QUARANTINED), ("back", READMITTED)):
            match = pattern.match(message)
            if not match:
                continue
            board = match.group(1)
            with self.lock:
                self.events.append((now, kind, board, match.group(2)))
                if kind == "recovery":
                    self.in_recovery.add(board)
                elif kind == "quarantined" or (kind == "step" and match.group(3) == "board is back"):
                    self.in_recovery.discard(board)
                if kind == "quarantined":
                    self.out_of_run.add(board)
                elif kind == "back":
                    self.out_of_run.discard(board)
            if kind == "recovery" and self.on_recovery is not None:
                self.on_recovery(board)

    def _take_sample(self, first: bool = False) -> None:
        if self.process is None:
            return
        taken = sample(self.process.pid, self.adb_port)
        if taken is None:
            return
        with self.lock:
            if first:
                self.first = taken
            elif self.first is not None:
                self.last = taken
            if self.peak is None or taken.rss_mb > self.peak.rss_mb:
                self.peak = taken

    def _sample_loop(self) -> None:
        assert self.process is not None
        while self.process.poll() is None:
            if self.adb_port is None:
                self.adb_port = self._find_adb_port()
            time.sleep(2.0)
            if self.first is not None:
                taken = sample(self.process.pid, self.adb_port)
                with self.lock:
                    if taken is not None and (self.peak is None or taken.rss_mb > self.peak.rss_mb):
                        self.peak = taken

    def adb_server_pid(self) -> int | None:
        """The private adb server hil started (its child `adb -P PORT ... server`)."""
        assert self.process is not None
        for pid, command in descendants(self.process.pid).items():
            if " nodaemon server" in command and command.split()[0].endswith("adb"):
                return pid
        return None

    def _find_adb_port(self) -> int | None:
        assert self.process is not None
        for command in descendants(self.process.pid).values():
            match = re.search(r" -P (\d+) nodaemon server", command)
            if match:
                return int(match.group(1))
        return None


# ----------------------------------------------------------------------------- chaos
class Chaos:
    """Writes faults to the boards, `rate` per finished case, until stopped."""

    def __init__(self, boards: Boards, hil: HilRun, rate: float, rng: random.Random) -> None:
        self.boards = boards
        self.hil = hil
        self.rate = rate
        self.rng = rng
        self.injections: list[Injection] = []
        self.skipped: dict[str, str] = {}
        self._deck: list[str] = []
        self._cards = self._all_cards()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []

    def _all_cards(self) -> list[str]:
        cards = [SERVER_KILL]
        for kind in KINDS:
            for spec in CARDS.get(kind, (kind,)):
                try:
                    fault = parse_fault(spec)
                except Exception as exc:  # noqa: BLE001 - a later kind that needs options
                    self.skipped[kind] = str(exc)
                    continue
                if not fault.is_state and fault.times == 0:  # a later kind firing every time
                    spec += ",times=1"  # by default (as a bare `miscompute`): once, like the rest
                cards.append(spec)
        return cards

    def _draw(self) -> str:
        if not self._deck:
            self._deck = list(self._cards)
            self.rng.shuffle(self._deck)
        return self._deck.pop()

    def start(self) -> None:
        self.hil.on_recovery = self._recovering
        self.hil.on_case = self._case_finished

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            for timer in self._timers:
                timer.cancel()

    def _case_finished(self) -> None:
        if self._stop.is_set() or self.rng.random() >= self.rate:
            return
        self._later(self.rng.uniform(0.0, 0.5), self._strike)

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
        spec = self._draw()
        two = len(in_run) > 1 and spec != SERVER_KILL and self.rng.random() < PAIR_SHARE
        names = self.rng.sample(in_run, 2 if two else 1)
        for name in names:
            self.inject(name, spec, pair=two)

    def _recovering(self, board: str) -> None:
        if self._stop.is_set() or self.rng.random() >= RECOVERY_SHARE:
            return
        self._later(self.rng.uniform(0.05, 1.0), self._inject_in_recovery, board,
                    self.rng.choice(DURING_RECOVERY))

    def _inject_in_recovery(self, board: str, spec: str) -> None:
        with self.hil.lock:
            still = board in self.hil.in_recovery
        if still and not self._stop.is_set():
            self.inject(board, spec, during_recovery=True)

    def inject(self, board: str, spec: str, pair: bool = False, during_recovery: bool = False) -> None:
        kind = SERVER_KILL if spec == SERVER_KILL else spec.split(",")[0]
        injection = Injection(time.time(), board, spec, kind, during_recovery, pair)
        if spec == SERVER_KILL:
            pid = self.hil.adb_server_pid()
            if pid is None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        else:
            self.boards.control(board, f"fault {spec}")
            if parse_fault(spec).is_state:
                self._later(self.rng.uniform(*STATE_HOLD_S), self._clear, injection)
        with self._lock:
            self.injections.append(injection)
        log(f"fault {spec} -> {board}{' (pair)' if pair else ''}"
            f"{' (during recovery)' if during_recovery else ''}")

    def _clear(self, injection: Injection) -> None:
        self.boards.control(injection.board, f"fault clear {injection.kind}")
        injection.cleared_at = time.time()


# ----------------------------------------------------------------------------- analysis
def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def attempts_of(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every attempt on a board: board, verdict, started, finished (epoch), case key."""
    found = []
    for case in cases:
        key = f"{case['suite']}.{case['precision']}.{case['id']}"
        for attempt in [*(case.get("earlier_attempts") or []), case]:
            if attempt.get("board") and attempt.get("started"):
                found.append({"key": key, "board": attempt["board"], "verdict": attempt["verdict"],
                              "message": (attempt.get("message") or "")[:160],
                              "started": _epoch(attempt["started"]),
                              "finished": _epoch(attempt["finished"])})
    return sorted(found, key=lambda a: a["started"])


def junit_keys(path: Path) -> collections.Counter[str]:
    root = ET.parse(path).getroot()  # noqa: S314 - hil's own file
    return collections.Counter(f"{tc.get('classname')}.{tc.get('name')}" for tc in root.iter("testcase"))


THROUGHPUT_SHARE = 0.1
"""The first and the last 10 % of the cases, by the order they finished..."""
THROUGHPUT_TRIM = 0.01
"""...each window moved in by 1 % of the cases: the first ones wait for the boards'
executors to warm up, and the last ones are the drain (idle boards waiting for a straggler
that is retried after an infrastructure error), neither of which is a speed of hil."""


def boards_in_run(events: list[tuple[float, str, str, str]], names: list[str], low: float,
                  high: float) -> float:
    """The mean number of boards in the run (not quarantined) between `low` and `high`."""
    out: set[str] = set()
    changes = sorted((t, kind, board) for t, kind, board, _ in events if kind in ("quarantined", "back"))
    total, since = 0.0, low
    for at, kind, board in changes:
        if at > low:
            total += (min(at, high) - since) * (len(names) - len(out))
            since = min(at, high)
        if at >= high:
            break
        (out.add if kind == "quarantined" else out.discard)(board)
    total += (high - since) * (len(names) - len(out))
    return total / (high - low) if high > low else float(len(names) - len(out))


def throughput(finished: list[tuple[float, int, str, str, str]],
               events: list[tuple[float, str, str, str]], names: list[str]) -> dict[str, Any]:
    """Cases per second over the first and the last THROUGHPUT_SHARE of the finished cases
    (trimmed by THROUGHPUT_TRIM, and untrimmed), per tenth of the run, and per board in the
    run (quarantined boards left out: the speed of hil, not the chaos's toll)."""
    times = sorted(t for t, *_ in finished)
    count = len(times)
    if count < 50:
        return {"first": None, "last": None, "ratio": None, "raw_ratio": None, "deciles": [],
                "per_board_ratio": None}

    def span(low: float, high: float) -> list[float]:
        return times[int(count * low): max(int(count * low) + 2, int(count * high))]

    def rate(low: float, high: float) -> float | None:
        chunk = span(low, high)
        return (len(chunk) - 1) / (chunk[-1] - chunk[0]) if chunk[-1] > chunk[0] else None

    def per_board(low: float, high: float) -> float | None:
        chunk, speed = span(low, high), rate(low, high)
        boards = boards_in_run(events, names, chunk[0], chunk[-1])
        return speed / boards if speed and boards else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(b / a, 3) if a and b else None

    share, trim = THROUGHPUT_SHARE, THROUGHPUT_TRIM
    first, last = rate(trim, trim + share), rate(1 - trim - share, 1 - trim)
    return {"first": first, "last": last, "ratio": ratio(first, last),
            "raw_ratio": ratio(rate(0, share), rate(1 - share, 1)),
            "per_board_ratio": ratio(per_board(trim, trim + share),
                                     per_board(1 - trim - share, 1 - trim)),
            "deciles": [round(r, 2) if (r := rate(i / 10, (i + 1) / 10)) else None for i in range(10)],
            "boards_in_run_deciles": [
                round(boards_in_run(events, names, span(i / 10, (i + 1) / 10)[0],
                                    span(i / 10, (i + 1) / 10)[-1]), 2) for i in range(10)]}


STEADY_GAP_S = 2.0
"""A board's attempt follows its previous one within this: no recovery or sit-out between."""


def steady_pace(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """hil's own pace, apart from the chaos's toll: the median time a board spends per
    passing attempt (the attempt plus the idle time since its previous one ended), over the
    first and the last THROUGHPUT_SHARE of such attempts. Throughput also counts boards out of
    the run, recoveries and timeouts; this does not, so a hil that slows down with the
    number of cases (a per-case cost growing with the run) shows here."""
    previous: dict[str, float] = {}
    paces: list[tuple[float, float]] = []
    for attempt in sorted(attempts, key=lambda a: a["started"]):
        board, before = attempt["board"], previous.get(attempt["board"])
        previous[board] = attempt["finished"]
        if attempt["verdict"] != "PASS" or before is None or attempt["started"] - before > STEADY_GAP_S:
            continue
        paces.append((attempt["finished"], attempt["finished"] - before))
    paces.sort()
    window = int(len(paces) * THROUGHPUT_SHARE)
    if window < 10:
        return {"steady_case_ms_first": None, "steady_case_ms_last": None,
                "steady_speed_last_vs_first": None}
    first = statistics.median(p for _t, p in paces[:window])
    last = statistics.median(p for _t, p in paces[-window:])
    return {"steady_case_ms_first": round(first * 1000, 1), "steady_case_ms_last": round(last * 1000, 1),
            "steady_speed_last_vs_first": round(first / last, 3) if last > 0 else None}


def fault_fates(injections: list[Injection], fired: list[tuple[float, str, str, str]],
                attempts: list[dict[str, Any]], hil: HilRun) -> dict[str, Any]:
    """Per fault kind: injected, fired, during recovery, on two boards, the verdicts of the
    attempts they fired in, and how many were unhandled."""
    by_board: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for attempt in attempts:
        by_board[attempt["board"]].append(attempt)

    def attempt_at(board: str, at: float, slack: float = 0.05) -> dict[str, Any] | None:
        """The attempt running on `board` at `at`: the one that contains it, else the nearest
        within `slack` (stamps are to the millisecond; a fault the soak applies itself lands
        a little after the soak's stamp of it)."""
        attempts = by_board.get(board, [])
        inside = [a for a in attempts if a["started"] <= at <= a["finished"]]
        if inside:
            return max(inside, key=lambda a: a["started"])
        near = [a for a in attempts if a["started"] - slack <= at <= a["finished"] + slack]
        return min(near, key=lambda a: min(abs(at - a["started"]), abs(at - a["finished"])),
                   default=None)

    kinds: dict[str, dict[str, Any]] = {}
    for injection in injections:
        entry = kinds.setdefault(injection.kind, {
            "injected": 0, "fired": 0, "during_recovery": 0, "pair": 0,
            "outcomes": collections.Counter(), "unhandled": 0, "examples": []})
        entry["injected"] += 1
        entry["during_recovery"] += injection.during_recovery
        entry["pair"] += injection.pair
    unhandled: list[str] = []
    for at, board, kind, event in fired:
        entry = kinds.setdefault(kind, {"injected": 0, "fired": 0, "during_recovery": 0, "pair": 0,
                                        "outcomes": collections.Counter(), "unhandled": 0,
                                        "examples": []})
        entry["fired"] += 1
        # the board stamps an event fault inside its attempt: 42 ms after a PASS is the next
        # attempt's (one a SIGTERM left out of the results), not that PASS's
        attempt = attempt_at(board, at, slack=0.002)
        outcome = attempt["verdict"] if attempt else "between cases"
        entry["outcomes"][outcome] += 1
        if attempt and len(entry["examples"]) < 3:
            entry["examples"].append(f"{attempt['key']}: {attempt['verdict']} {attempt['message']}")
        bad = outcome == "ERROR_INTERNAL" or (kind in MUST_FAIL_RUN | MUST_FAIL_MISMATCH
                                                      and outcome == "PASS")
        if bad:
            entry["unhandled"] += 1
            unhandled.append(f"{kind} on {event} at {board} {at:.3f}: {outcome} "
                             f"({attempt['key'] if attempt else '-'})")
    # faults applied at once (on=now, the adb server's death) and state faults: no board line
    for injection in injections:
        if injection.kind == SERVER_KILL or ",on=now" in injection.spec or parse_fault_safe(injection.spec):
            entry = kinds[injection.kind]
            entry["fired"] += 1
            attempt = attempt_at(injection.board, injection.at)
            entry["outcomes"][attempt["verdict"] if attempt else "between cases"] += 1
            if attempt and len(entry["examples"]) < 3:
                entry["examples"].append(f"{attempt['key']}: {attempt['verdict']} {attempt['message']}")
    for entry in kinds.values():
        entry["outcomes"] = dict(entry["outcomes"])
    return {"kinds": kinds, "unhandled": unhandled}


def parse_fault_safe(spec: str) -> bool:
    """True for a state fault spec."""
    try:
        return parse_fault(spec).is_state
    except Exception:  # noqa: BLE001 - SERVER_KILL and the like
        return False


def unexplained(attempts: list[dict[str, Any]], injections: list[Injection],
                fired: list[tuple[float, str, str, str]]) -> list[str]:
    """Attempts that did not pass with no fault on their board (nor the adb server's death)
    since the board's previous attempt ended: a failure the chaos did not cause."""
    moments: dict[str, list[float]] = collections.defaultdict(list)
    global_moments: list[float] = []
    for injection in injections:
        if injection.kind == SERVER_KILL:
            global_moments.append(injection.at)
        else:
            moments[injection.board].append(injection.at)
            if injection.cleared_at:
                moments[injection.board].append(injection.cleared_at)
    for at, board, _kind, _event in fired:
        moments[board].append(at)
    found = []
    previous: dict[str, float] = {}
    active: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for injection in injections:
        if injection.kind != SERVER_KILL and parse_fault_safe(injection.spec):
            active[injection.board].append((injection.at, injection.cleared_at or math.inf))
    for attempt in attempts:
        board, since = attempt["board"], previous.get(attempt["board"], 0.0) - 1.0
        until = attempt["finished"] + 1.0
        previous[board] = attempt["finished"]
        if attempt["verdict"] == "PASS":
            continue
        near = [t for t in moments[board] + global_moments if since <= t <= until]
        held = [w for w in active[board] if w[0] <= until and w[1] >= since]
        if not near and not held:
            found.append(f"{attempt['key']} on {board}: {attempt['verdict']}")
    return found


def main() -> int:  # noqa: C901 - one straight script
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--boards", type=int, default=4)
    parser.add_argument("--chaos-rate", type=float, default=0.02,
                        help="faults per finished case (a probability, default 0.02)")
    parser.add_argument("--link", default="usb2")
    parser.add_argument("--max-minutes", type=float, default=60.0, help="bound of the run")
    parser.add_argument("--timeout", type=float, default=10.0, help="hil run --timeout")
    parser.add_argument("--idle-timeout", type=float, default=10.0, help="hil run --idle-timeout")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--work", type=Path, help="keep everything here (default: a temporary folder)")
    parser.add_argument("--cache-dir", type=Path, help="artifact cache (default: hil's)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()

    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    become_subreaper()
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    started = time.monotonic()
    work = args.work or Path(tempfile.mkdtemp(prefix="hil-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    from hil.lower.cache import default_cache_dir

    cache = args.cache_dir or default_cache_dir()
    planned = prepare_cases(work, args.cases, cache)
    out = work / "out"
    boards = Boards(work, args.boards, args.link)
    stop_requested: list[float] = []
    """When SIGTERM or SIGINT reached the soak (monotonic)."""
    exit_code: int | None = None
    sigterm_to_exit: float | None = None
    hil: HilRun | None = None
    chaos: Chaos | None = None
    figures: dict[str, Any] = {}
    try:
        boards.start()
        argv = [sys.executable, "-m", "hil", "-v", "run", "--inventory", str(boards.inventory()),
                "--suite", str(work / f"{SUITE}.yaml"), "--flow", FLOW, "--out", str(out),
                "--cache-dir", str(cache), "--jobs", "1", "--retries", "1",
                "--timeout", str(args.timeout), "--idle-timeout", str(args.idle_timeout),
                "--boot-timeout", "30"]
        env = dict(os.environ, HIL_LEASE_DIR=str(work / "leases"),
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        hil = HilRun(argv, env, work / "hil.log")

        def forward(signum: int, _frame: Any) -> None:
            stop_requested.append(time.monotonic())
            if hil is not None and hil.process is not None and hil.process.poll() is None:
                hil.process.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        hil.start()
        chaos = Chaos(boards, hil, args.chaos_rate, rng)
        chaos.start()
        log(f"hil run started (pid {hil.process.pid}); chaos {args.chaos_rate:g} faults per case, "
            f"seed {seed}")
        assert hil.process is not None
        deadline = started + args.max_minutes * 60
        last_note = 0.0
        timed_out = False
        while hil.process.poll() is None:
            time.sleep(0.2)
            if time.monotonic() > deadline and not timed_out:
                log(f"over --max-minutes {args.max_minutes:g}: stopping hil")
                timed_out = True
                hil.process.send_signal(signal.SIGTERM)
            stopped = stop_requested[0] if stop_requested else deadline if timed_out else None
            if stopped is not None and time.monotonic() - stopped > 60:
                log("hil still runs 60 s after SIGTERM: killing it")
                hil.process.kill()
            if time.monotonic() - last_note > 60:
                last_note = time.monotonic()
                log(f"{len(hil.finished)}/{len(planned)} cases reported, "
                    f"{len(chaos.injections)} faults injected")
        exit_code = hil.process.returncode
        if stop_requested:
            sigterm_to_exit = time.monotonic() - stop_requested[0]
        chaos.stop()
        time.sleep(0.5)  # the readers take the last lines
        wall = time.monotonic() - started

        # what is left once hil has exited (the boards still run)
        inside = boards.processes_inside()
        board_pids = {b.pid for b in boards.processes.values()}
        below_soak = {pid: cmd for pid, cmd in descendants(os.getpid()).items()
                      if pid not in board_pids and pid not in inside}
        transports = boards.transports_open()
        fired = boards.fired()
        figures = analyse(planned, out, hil, chaos, fired, boards)
        figures.update(
            seed=seed, hil_exit=exit_code, wall_s=round(wall, 1), timed_out=timed_out,
            interrupted=bool(stop_requested),
            sigterm_to_exit_s=round(sigterm_to_exit, 2) if sigterm_to_exit is not None else None,
            processes_left=len(inside) + len(below_soak),
            processes_left_detail=sorted({**inside, **below_soak}.values()),
            adb_connections_left=transports,
            load_before=load_before,
        )
    finally:
        if chaos is not None:
            chaos.stop()
        if hil is not None and hil.process is not None and hil.process.poll() is None:
            hil.process.kill()
            hil.process.wait()
        boards.stop()
    time.sleep(0.5)
    reap_orphans(set())
    after_stop = descendants(os.getpid())
    figures["processes_left"] = figures.get("processes_left", 0) + len(after_stop)
    figures.setdefault("processes_left_detail", []).extend(sorted(after_stop.values()))
    figures["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    failures = invariants(figures)
    figures["invariants_failed"] = failures
    text = json.dumps(figures, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    for failure in failures:
        log(f"INVARIANT FAILED: {failure}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    if stop_requested:
        return 130
    return 1 if failures else 0


def analyse(planned: list[str], out: Path, hil: HilRun, chaos: Chaos,
            fired: list[tuple[float, str, str, str]], boards: Boards) -> dict[str, Any]:
    """The soak's figures from results.json, the JUnit file and what was watched."""
    results_path, junit_path = out / "results.json", out / "junit.xml"
    figures: dict[str, Any] = {"planned": len(planned)}
    try:
        from hil.report.results import load_results

        document = load_results(results_path)
        cases = document["cases"]
        figures["results_valid"] = True
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        figures["results_valid"] = f"{type(exc).__name__}: {exc}"
        document, cases = {"run": {}}, []
    try:
        in_junit = junit_keys(junit_path)
        figures["junit_valid"] = True
    except Exception as exc:  # noqa: BLE001
        figures["junit_valid"] = f"{type(exc).__name__}: {exc}"
        in_junit = collections.Counter()
    in_results = collections.Counter(f"{c['suite']}.{c['precision']}.{c['id']}" for c in cases)
    printed = collections.Counter(key for _t, _n, _v, key, _b in hil.finished)
    planned_set = set(planned)
    interrupted = document["run"].get("status") == "interrupted"
    expected = set(printed) if interrupted else planned_set
    figures["reported"] = len(in_results)
    figures["duplicates"] = (sum(n - 1 for n in in_results.values() if n > 1)
                             + sum(n - 1 for n in in_junit.values() if n > 1))
    figures["lost"] = (len(expected - set(in_results)) + len(expected - set(in_junit))
                       + len(set(in_results) - planned_set))
    figures["reported_not_printed"] = len(set(in_results) - set(printed))
    figures["status"] = document["run"].get("status")
    figures["verdicts"] = dict(collections.Counter(c["verdict"] for c in cases))

    infra = collections.Counter()
    for case in cases:
        chain = [a["verdict"] for a in case.get("earlier_attempts") or []] + [case["verdict"]]
        if "ERROR_INFRA" in chain:
            if case["verdict"] == "PASS":
                infra["retried to PASS"] += 1
            elif case["verdict"] == "ERROR_INFRA":
                infra["reported ERROR_INFRA"] += 1
            else:
                infra[f"retried to {case['verdict']}"] += 1
    figures["infra_errors"] = dict(infra)
    board_figures = {}
    for entry in document["run"].get("boards") or []:
        name = entry.get("name")
        board_figures[name] = {
            "quarantined": [d for _t, kind, b, d in hil.events if kind == "quarantined" and b == name],
            "came_back": sum(1 for _t, kind, b, _d in hil.events if kind == "back" and b == name),
            "recoveries": sum(1 for _t, kind, b, _d in hil.events if kind == "recovery" and b == name),
            "cases": sum(1 for c in cases if c.get("board") == name),
            "error": entry.get("error"),
        }
    figures["boards"] = board_figures
    figures["boards_not_usable"] = {n: b["error"] for n, b in board_figures.items() if b["error"]}
    figures["boards_quarantined"] = sum(1 for b in board_figures.values() if b["quarantined"])
    figures["boards_came_back"] = sum(1 for b in board_figures.values() if b["came_back"])

    attempts = attempts_of(cases)
    fates = fault_fates(chaos.injections, fired, attempts, hil)
    figures["faults_injected"] = len(chaos.injections)
    figures["faults_during_recovery"] = sum(i.during_recovery for i in chaos.injections)
    figures["faults_on_two_boards"] = sum(i.pair for i in chaos.injections)
    figures["fault_kinds"] = fates["kinds"]
    figures["fault_kinds_not_injected"] = sorted(
        ({*KINDS, SERVER_KILL} - set(chaos.skipped)) - {i.kind for i in chaos.injections})
    figures["fault_kinds_skipped"] = chaos.skipped
    figures["unhandled_detail"] = fates["unhandled"]
    errors_internal = [c for c in cases if c["verdict"] == "ERROR_INTERNAL"]
    figures["unhandled_faults"] = len(fates["unhandled"]) + hil.tracebacks + sum(
        1 for c in errors_internal if not any("ERROR_INTERNAL" in u for u in fates["unhandled"]))
    figures["hil_tracebacks"] = hil.tracebacks
    figures["unexplained_failures"] = unexplained(attempts, chaos.injections, fired)

    speed = throughput(hil.finished, hil.events, boards.names)
    figures["throughput_first_cases_per_s"] = round(speed["first"], 3) if speed["first"] else None
    figures["throughput_last_cases_per_s"] = round(speed["last"], 3) if speed["last"] else None
    figures["throughput_last_vs_first"] = speed["ratio"]
    figures["throughput_last_vs_first_untrimmed"] = speed["raw_ratio"]
    figures["throughput_per_board_in_run_last_vs_first"] = speed["per_board_ratio"]
    figures["boards_in_run_deciles"] = speed.get("boards_in_run_deciles")
    figures["throughput_deciles"] = speed["deciles"]
    figures.update(steady_pace(attempts))
    first, last = hil.first, hil.last
    if first and last:
        figures.update(
            rss_start_mb=round(first.rss_mb, 1), rss_end_mb=round(last.rss_mb, 1),
            rss_growth_mb=round(last.rss_mb - first.rss_mb, 1),
            rss_peak_mb=round(hil.peak.rss_mb, 1) if hil.peak else None,
            fds_start=first.fds, fds_end=last.fds, fd_growth=last.fds - first.fds,
            threads_start=first.threads, threads_end=last.threads,
            thread_growth=last.threads - first.threads,
            adb_client_connections_start=first.adb_client_connections,
            adb_client_connections_end=last.adb_client_connections,
            fd_kinds_start=first.fd_kinds, fd_kinds_end=last.fd_kinds,
        )
    else:
        figures.update(rss_growth_mb=None, fd_growth=None, thread_growth=None)
    written = hil.results_write
    figures["results_write_s"] = written[2] if written else None
    figures["junit_write_s"] = written[3] if written else None
    return figures


FD_SLACK = 8
THREAD_SLACK = 8


def invariants(figures: dict[str, Any]) -> list[str]:
    """What must hold after any soak, interrupted or not."""
    failed = []
    for key in ("lost", "duplicates", "unhandled_faults", "processes_left", "adb_connections_left"):
        if figures.get(key) != 0:
            failed.append(f"{key} = {figures.get(key)}")
    if figures.get("boards_not_usable"):  # a soak of boards that never came up soaks nothing
        failed.append(f"boards not usable: {figures['boards_not_usable']}")
    for key in ("results_valid", "junit_valid"):
        if figures.get(key) is not True:
            failed.append(f"{key}: {figures.get(key)}")
    for key, slack in (("fd_growth", FD_SLACK), ("thread_growth", THREAD_SLACK)):
        value = figures.get(key)
        if value is not None and abs(value) > slack:
            failed.append(f"{key} = {value} (more than +-{slack})")
    if figures.get("interrupted"):
        if figures.get("hil_exit") != 130:
            failed.append(f"hil exited {figures.get('hil_exit')} after SIGTERM, not 130")
        if (figures.get("sigterm_to_exit_s") or 0) > 10:
            failed.append(f"hil took {figures['sigterm_to_exit_s']} s to exit after SIGTERM")
    else:
        if figures.get("timed_out"):
            failed.append("the run did not end within --max-minutes")
        if figures.get("reported") != figures.get("planned"):
            failed.append(f"reported {figures.get('reported')} of {figures.get('planned')}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
