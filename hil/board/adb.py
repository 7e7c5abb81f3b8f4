"""An Exynos board reached through adb (adbutils): real boards and virtual ones alike.

Device commands are argument lists quoted and joined with `&&` (`commands.py`); nothing a
case or a user supplies reaches a shell unquoted, and every name hil puts in a device path
passes `safe_name`. A case's run shell is written by `invocation.py`; what its invocations
produced comes back as an `Execution` (`execution.py`). Everything a run writes lives in its workdir
`/data/local/tmp/hil/<run-id>/`, removed by `cleanup()`; only the runner stays, at
`/data/local/tmp/hil/bin/`, so it is pushed again only when its sha256 changes.

Every call to the board is time-limited (`watchdog.py`): a runner past its deadline on a
board that still answers is killed by its PID (verdict FAIL_RUN, TIMEOUT); a board that
stops answering for the idle timeout is an InfraError (ERROR_INFRA). A crash line on the
board's console during a case turns the case into a `ConsoleCrash` (ERROR_INFRA).

The board's traffic goes through hil's own adb connections (`connection.py`, `sync.py`,
`kept_shell.py`): adbutils' shell and sync paths cost more of their own than a small case
does. A case opens none: the board's sync connection and its kept shell serve every case.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import adbutils

from hil.attention import NeedsPerson
from hil.board import limits
from hil.board.commands import device_command, safe_name
from hil.board.connection import shell_v2
from hil.board.console import Console, ConsoleCrash
from hil.board.execution import Execution, latency_record, memory_record
from hil.board.invocation import (
    BACKSTOP_STATUS,
    DEVICE_ROOT,
    INVOCATION_MARKER,
    KILL_RECORDED,
    PEAK_RSS,
    RUNNER_PATH,
    RUNS_FOLDER,
    folder_markers,
    run_chain,
)
from hil.board.kept_shell import KeptShell
from hil.board.sync import SyncFailed, SyncSession, push_files
from hil.board.thermal import WAITING_MARK, parse_state, waiting_line
from hil.board.watchdog import BoardSilent, Watch, bounded
from hil.errors import InfraError
from hil.latency import stability
from hil.latency_plan import NoiseControl
from hil.runner.contract import ENN_NOT_USABLE, STATISTICS_FILE, board_fault, parse_log

if TYPE_CHECKING:
    from hil.lower.artifact import Artifact

log = logging.getLogger(__name__)

LOGCAT_LINES = 200
"""Lines of `logcat -d` attached to a result that did not pass."""
ADB_ERRORS = (adbutils.AdbError, EOFError, TimeoutError, ConnectionError, OSError)
"""What adbutils raises when a board or the link fails (see reference/adb-protocol.md)."""

CHIPSET_PROPS = ("ro.soc.model", "ro.hardware.chipname", "ro.board.platform")
"""Where the chipset is read from, in order of trust."""

KILL_AFTER_FAILURE_S = 10.0
"""The longest a failed case waits for the board to kill the runner it may have left."""
CLEANUP_S = 30.0
"""The end-of-run removal of a board's workdir may take this long, plus CLEANUP_PER_CASE_S per
case folder in it."""
CLEANUP_PER_CASE_S = 0.05


def chipset_from_props(props: dict[str, str]) -> str | None:
    """`S5E9955` / `s5e9955` → `E9955`; None when no property names an Exynos SoC."""
    for key in CHIPSET_PROPS:
        match = re.search(r"e(\d{4})", props.get(key, "").lower())
        if match:
            return f"E{match.group(1)}"
    return None


@dataclass(frozen=True)
class BoardInfo:
    """What a board says about itself once prepared."""

    name: str
    adb: str
    chipset: str | None
    virtual: bool
    properties: dict[str, str] = field(default_factory=dict)


class AdbBoard:
    """A board behind an adbutils device: `prepare()`, `run(artifact)`, `cleanup()`."""

    def __init__(
        self,
        name: str,
        address: str,
        device: adbutils.AdbDevice,
        run_id: str,
        runner: Path,
        timeout_s: float,
        idle_timeout_s: float = 30.0,
        console: Console | None = None,
    ) -> None:
        self.name = name
        self.address = address
        self.device = device
        self.workdir = posixpath.join(DEVICE_ROOT, safe_name(run_id, "run id"))
        self.runner = runner
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.console = console
        """The board's serial console, watched for crashes during each case."""
        self.runner_pushes = 0
        """How often this board object pushed the runner (once at most, unless it changed)."""
        self.measures_rss = False
        """`time -v` works on the board: each invocation's peak RSS is measured (`prepare`)."""
        self._cases_run = 0
        self._console_mark = 0
        self._case_dirs: set[str] = set()
        """Case folders this board has run in (a second run there cleans up first)."""
        self.running_case: str | None = None
        """The folder of the case whose runner is running now (killed by `cleanup` after a stop)."""
        self._runner_started: str | None = None
        """The folder of the case whose run shell was sent and has not returned: its runner
        may be running (killed by its PID when the case fails with an exception)."""
        self._sync: SyncSession | None = None
        """The board's sync connection, kept from case to case (closed after a failed case)."""
        self._kept: KeptShell | None = None
        """The board's kept shell, which runs each case's run shell (closed after a failed
        case)."""

    def _shell(
        self,
        argv_chain: Sequence[Sequence[str]],
        timeout: float,
        on_stderr: Callable[[bytes], None] | None = None,
    ) -> adbutils.ShellReturn:
        """The chain through shell v2, in a thread of its own that may take no longer than
        `timeout` + the idle timeout."""
        command = device_command(*argv_chain)
        try:
            return bounded(
                lambda: shell_v2(self.device, command, timeout, on_stderr),
                timeout + self.idle_timeout_s, f"{self.name}: shell {argv_chain[0][0]}",
            )
        except ADB_ERRORS as exc:
            raise InfraError(f"{self.name}: shell failed: {type(exc).__name__}: {exc}") from exc

    def shell(self, *argvs: Sequence[str]) -> adbutils.ShellReturn:
        """Run argument lists chained with `&&`, bounded by the idle timeout."""
        return self._shell(argvs, timeout=self.idle_timeout_s)

    def _probe(self, sync: SyncSession) -> None:
        """InfraError unless adbd answers a sync STAT on the case's own sync connection: the
        watchdog's probe while a runner is timed (`Watch` bounds its wait). It was a
        `shell,v2:` request running `true`, for which adbd forks a shell every second beside
        the runner being measured, and then a sync connection of its own per probe."""
        try:
            sync.stat(DEVICE_ROOT)
        except ADB_ERRORS as exc:
            raise InfraError(f"{self.name}: sync STAT failed: {type(exc).__name__}: {exc}") from exc

    def properties(self) -> dict[str, str]:
        """All `getprop` properties."""
        result = self._shell([["getprop"]], timeout=self.idle_timeout_s)
        props = dict(re.findall(r"^\[([^\]]+)\]: \[([^\]]*)\]", result.stdout, re.MULTILINE))
        if result.returncode != 0 or not props:
            raise InfraError(f"{self.name}: getprop failed (exit {result.returncode})")
        return props

    def prepare(self) -> BoardInfo:
        """Read the board's identity, create the run's workdir and install the runner."""
        props = self.properties()
        info = BoardInfo(
            name=self.name,
            adb=self.address,
            chipset=chipset_from_props(props),
            virtual=props.get("ro.hil.virtual") == "1",
            properties={k: v for k, v in props.items() if k.startswith(("ro.", "sys.boot"))},
        )
        result = self.shell(["mkdir", "-p", self.workdir, posixpath.dirname(RUNNER_PATH)])
        if result.returncode != 0:
            raise InfraError(f"{self.name}: cannot create {self.workdir}: {result.stderr.strip()}")
        self._install_runner()
        self.measures_rss = self.shell(PEAK_RSS + ("true",)).returncode == 0
        if not self.measures_rss:
            log.info("%s: no working `time -v`: the runner's peak RSS is not measured", self.name)
        return info

    def check_writable(self) -> None:
        """InfraError unless a file can be created and removed in the run's workdir (a
        board whose `/data` went read-only answers every other check)."""
        probe = posixpath.join(self.workdir, ".hil-health")
        result = self.shell(["touch", probe], ["rm", "-f", probe])
        if result.returncode != 0:
            raise InfraError(f"{self.name}: cannot write in {self.workdir}: "
                             f"{_last_line(result.stderr + result.stdout)}")

    def runner_sha256(self) -> str | None:
        """sha256 of the runner installed on the board; None when there is none."""
        result = self.shell(["sha256sum", RUNNER_PATH])
        digest = result.stdout.split()[:1]
        return digest[0] if result.returncode == 0 and digest else None

    def _install_runner(self) -> None:
        """Push the runner only when the board's copy differs (to a temporary name, then
        renamed, so a concurrent run never executes half a file)."""
        local_sha = hashlib.sha256(self.runner.read_bytes()).hexdigest()
        if self.runner_sha256() == local_sha:
            return
        partial = f"{RUNNER_PATH}.{posixpath.basename(self.workdir)}.partial"
        try:
            push_files(self.device, [(self.runner, partial, 0o755)], timeout=self.idle_timeout_s)
        except (*ADB_ERRORS, SyncFailed) as exc:
            raise InfraError(f"{self.name}: runner push failed: {exc}") from exc
        result = self.shell(["mv", "-f", partial, RUNNER_PATH])
        if result.returncode != 0:
            raise InfraError(f"{self.name}: cannot install the runner: {result.stderr.strip()}")
        self.runner_pushes += 1
        log.info("%s: runner installed at %s (sha256 %s)", self.name, RUNNER_PATH, local_sha[:12])

    def run(
        self,
        artifact: Artifact,
        slot: str,
        iterations: int,
        warmup: int,
        noise: NoiseControl | None = None,
    ) -> Execution:
        """Push the artifact into `<workdir>/<slot>`, run it, pull its outputs (kept in
        memory: `Execution.outputs`).

        No adb connection of its own and three round trips: the board's sync connection
        (`sync.SyncSession`, kept from case to case) takes the `.pte` and inputs up, carries
        the watchdog's probes while the runner runs and brings the outputs and every
        `statistics.txt` down; the case's run shell, written to the board's kept shell
        (`kept_shell.KeptShell`, kept likewise), runs the case. It reads the board's thermal
        and clock state and waits for it to cool (`noise`, `thermal.py`), then invokes the
        runner once per iteration (`--warm_up W --num_executions 1`), so each invocation's
        timing line is one latency sample. `noise` None: the defaults.
        """
        noise = noise or NoiseControl()
        case_dir = posixpath.join(self.workdir, safe_name(slot, "case slot"))
        inputs = [artifact.input_file(i) for i in range(len(artifact.inputs))]
        uploads: list[tuple[Path | bytes, str, int]] = [
            (artifact.pte, posixpath.join(case_dir, "model.pte"), 0o644)
        ]
        uploads += [
            (path, posixpath.join(case_dir, safe_name(path.name, "input file")), 0o644)
            for path in inputs
        ]
        remote_inputs = [remote for _local, remote, _mode in uploads[1:]]
        fresh = case_dir not in self._case_dirs  # a retry on this board reuses the folder
        self._case_dirs.add(case_dir)
        if fresh:
            uploads += folder_markers(case_dir, iterations)
        self._console_mark = self.console.mark() if self.console is not None else 0
        if self._sync is not None and self._sync.device is not self.device:
            self.close_links()  # the board was reached anew (recovery): so are its links
        if self._sync is None:
            self._sync = SyncSession(self.device, self.idle_timeout_s)
            self._kept = KeptShell(self.device, self.idle_timeout_s)
        try:
            assert self._kept is not None  # opened with the sync connection, closed with it
            execution = self._run(self._sync, self._kept, artifact, case_dir, uploads, remote_inputs, fresh,
                                  iterations, warmup, noise)
        except BaseException as exc:
            self.close_links()  # in an unknown state: the next case opens new ones
            self._kill_left_runner(exc)
            if isinstance(exc, InfraError):
                self._check_console()  # a crash on the console explains the failure best
            raise
        self._check_console()
        return execution

    def _kill_left_runner(self, failure: BaseException) -> None:
        """After a case failed with an exception while its run shell ran: kill its runner by
        the PID it recorded. Closing the kept shell does not end it: adbd sends the `sh`
        SIGHUP and closes its pipes (AOSP `daemon/shell_service.cpp`), and the runner, under
        `timeout` in a process group of its own, lives on to its backstop. Best effort, bounded;
        not tried on a board that has just not answered (`failure` a BoardSilent or a timeout):
        recovery reboots it or its backstop ends the runner."""
        case_dir, self._runner_started = self._runner_started, None
        if case_dir is None:
            return
        if isinstance(failure, BoardSilent) or isinstance(failure.__cause__, TimeoutError):
            log.info("%s: no answer: the runner of %s is left to recovery", self.name, case_dir)
            return
        try:
            result = self._shell([["cd", case_dir], ["sh", "-c", KILL_RECORDED]],
                                 timeout=min(self.idle_timeout_s, KILL_AFTER_FAILURE_S))
        except InfraError as exc:
            log.warning("%s: the runner of %s may still run (no kill: %s)", self.name, case_dir, exc)
            return
        if result.returncode != 0:
            log.info("%s: no runner of %s left to kill: %s", self.name, case_dir, _last_line(result.stderr))

    def close_links(self) -> None:
        """Close the board's sync connection (a probe stuck on it ends at once) and its kept
        shell (adbd ends the `sh`)."""
        sync, self._sync = self._sync, None
        kept, self._kept = self._kept, None
        if sync is not None:
            sync.close()
        if kept is not None:
            kept.close()

    def _run(
        self,
        sync: SyncSession,
        kept: KeptShell,
        artifact: Artifact,
        case_dir: str,
        uploads: list[tuple[Path | bytes, str, int]],
        inputs: list[str],
        fresh: bool,
        iterations: int,
        warmup: int,
        noise: NoiseControl,
    ) -> Execution:
        start = time.perf_counter()
        try:
            sync.push(uploads)  # (on a new connection when the one an earlier case left was cut)
        except (*ADB_ERRORS, SyncFailed) as exc:
            raise InfraError(f"{self.name}: push failed: {type(exc).__name__}: {exc}") from exc
        push_s = time.perf_counter() - start

        chain = self.run_chain(case_dir, inputs, iterations, warmup, noise, fresh)
        deadline_s = self.timeout_s * iterations + noise.cooldown_max_s
        start = time.perf_counter()
        self.running_case = self._runner_started = case_dir
        watch = Watch(lambda: self._probe(sync), self.idle_timeout_s, deadline_s,
                      lambda: self._kill_runner(case_dir), f"{self.name}: runner")
        try:  # read in this thread, the watchdog asked between two waits for output
            result = kept.run(device_command(*chain), watch.poll, self._announce_cooldown, watch.heard)
        except ADB_ERRORS as exc:
            raise InfraError(f"{self.name}: run shell failed: {type(exc).__name__}: {exc}") from exc
        except limits.BoardOverflow as exc:
            raise limits.BoardOverflow(f"{self.name}: run shell: {exc}") from exc
        finally:
            self.running_case = None
        self._runner_started = None  # the run shell has returned: no runner of it runs
        exec_s = time.perf_counter() - start
        parts = result.stderr.split(INVOCATION_MARKER + "\n")
        if result.returncode != 0 and len(parts) == 1:
            raise InfraError(
                f"{self.name}: the run shell's setup in {case_dir} failed (exit {result.returncode}): "
                f"{_last_line(result.stderr + result.stdout)}"
            )
        state = parse_state(parts[0])
        if state.cooldown and state.cooldown["waited_s"]:
            log.warning("%s: waited %d s for the board to cool (%s -> %s °C, threshold %g °C)",
                        self.name, state.cooldown["waited_s"], state.cooldown["start_c"],
                        state.cooldown["end_c"], state.cooldown["threshold_c"])
        logs = tuple(parse_log(part) for part in parts[1:])
        timed_out = watch.deadline_hit or result.returncode == BACKSTOP_STATUS
        if result.returncode != 0 and logs and not timed_out:
            trouble = board_fault(logs[-1], result.returncode)
            if trouble is not None and ENN_NOT_USABLE in trouble:
                raise NeedsPerson(f"{self.name}: {trouble}")  # no reboot brings a library back
            if trouble is not None:
                raise InfraError(f"{self.name}: {trouble}")

        start = time.perf_counter()
        outputs: list[bytes | None] = []
        statistics: list[bytes | None] = []
        if result.returncode == 0:
            names = [f"out/output_{i}.bin" for i in range(len(artifact.outputs))]
            names += [posixpath.join(RUNS_FOLDER, str(i), STATISTICS_FILE) for i in range(iterations)]
            remotes = [posixpath.join(case_dir, name) for name in names]
            sizes = {remote: limits.STATISTICS_MAX for remote in remotes[len(artifact.outputs):]}
            sizes.update((remote, meta.nbytes) for remote, meta in zip(remotes, artifact.outputs,
                                                                       strict=False))
            try:  # each file its expected size (plus slack): what a board sends is bounded (limits.py)
                pulled = sync.pull(remotes, sizes)
            except ADB_ERRORS as exc:
                raise InfraError(f"{self.name}: pull failed: {type(exc).__name__}: {exc}") from exc
            except limits.BoardOverflow as exc:
                raise limits.BoardOverflow(f"{self.name}: pull: {exc}") from exc
            outputs = [pulled[remote] for remote in remotes[: len(artifact.outputs)]]
            statistics = [pulled[remote] for remote in remotes[len(artifact.outputs) :]]
        pull_s = time.perf_counter() - start
        latency = latency_record(logs, statistics, warmup)
        if latency is not None:
            latency.update(stability(latency, noise.cv_limit, state.still_hot))
        return Execution(
            exit_code=result.returncode,
            stdout=result.stdout,
            stderr=result.stderr,
            timed_out=timed_out,
            logs=logs,
            outputs=tuple(outputs),
            timings_s={"push": round(push_s, 4), "exec": round(exec_s, 4), "pull": round(pull_s, 4)},
            latency_ms=latency,
            memory=memory_record(artifact.planned_memory(), parts[1:] if self.measures_rss else None),
            board_state=state.record(),
        )

    def run_chain(
        self, case_dir: str, inputs: Sequence[str], iterations: int, warmup: int, noise: NoiseControl,
        fresh: bool = True,
    ) -> list[list[str]]:
        """This board's run shell for a case (`invocation.run_chain` with its limits)."""
        return run_chain(case_dir, inputs, iterations, warmup, noise, fresh, timeout_s=self.timeout_s,
                         idle_timeout_s=self.idle_timeout_s, measures_rss=self.measures_rss)

    def _announce_cooldown(self, chunk: bytes) -> None:
        """Log the board's cool-down line as it arrives (the wait can take minutes)."""
        if WAITING_MARK not in chunk:  # most packets: the runner's own output
            return
        for line in chunk.decode("utf-8", "replace").splitlines():
            waiting = waiting_line(line)
            if waiting is not None:
                log.warning("%s: %s", self.name, waiting)

    def _kill_runner(self, case_dir: str) -> None:
        """Kill the runner of `case_dir` by the PID it recorded (InfraError when the board
        does not answer)."""
        log.warning("%s: runner past its deadline of %g s: killing it", self.name, self.timeout_s)
        result = self._shell([["cd", case_dir], ["sh", "-c", KILL_RECORDED]],
                             timeout=self.idle_timeout_s)
        if result.returncode != 0:
            log.warning("%s: kill of the runner failed: %s", self.name, result.stderr.strip())

    def _check_console(self) -> None:
        if self.console is not None:
            line = self.console.crash_line(self._console_mark)
            if line is not None:
                raise ConsoleCrash(self.name, line)

    def diagnostics(self, logcat: bool = True) -> dict[str, str]:
        """For a result that did not pass: a `logcat -d` tail (unless `logcat` is False:
        the board does not answer) and the console lines written since the case began."""
        logs: dict[str, str] = {}
        if logcat:
            try:
                result = self._shell([["logcat", "-d", "-t", str(LOGCAT_LINES)]],
                                     timeout=min(self.idle_timeout_s, 10.0))
                logs["logcat"] = "\n".join(result.stdout.splitlines()[-LOGCAT_LINES:])
            except InfraError as exc:
                logs["logcat"] = f"(no logcat: {exc})"
        if self.console is not None:
            logs["uart"] = self.console.excerpt(self._console_mark)
        return logs

    def cleanup(self) -> None:
        """Remove the run's workdir from the board (best effort: the board may be gone); a
        runner still running a case (the run was stopped mid-case) is killed first, by the PID
        it recorded, rather than left to the board-side backstop."""
        running = self.running_case
        self.close_links()
        try:
            if running is not None:
                self._shell([["cd", running], ["sh", "-c", KILL_RECORDED]], timeout=30)
            # `rm` says nothing until it is done: its time grows with the run's case folders
            # (3,125 a board after a 50,000-case run on 16 boards took longer than 30 s)
            self._shell([["rm", "-rf", self.workdir]],
                        timeout=CLEANUP_S + CLEANUP_PER_CASE_S * len(self._case_dirs))
        except InfraError as exc:
            log.warning("%s: cleanup of %s failed: %s", self.name, self.workdir, exc)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
