"""The scheduler: plan the cases, lower them, dispatch them to the board pool, retry
infrastructure errors on another board, and write every finished case at once.

Data flows one way: Case → Artifact → Execution → Judgement → case record → results.json,
from which JUnit and the console table are rendered.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
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
from hil.board.spec import BoardSpec
from hil.cases.case import Case
from hil.errors import InfraError, UsageError
from hil.verdict import Verdict

log = logging.getLogger(__name__)

CHIPSETS = ("E9955", "E9965")
"""Exynos chipsets the ENN backend supports (`SamsungChipset`)."""

QUARANTINE_AFTER = 2
"""Consecutive infrastructure errors after which a board is taken out of the run."""

VIRTUAL_RUNNER = Path(__file__).parent / "virtual" / "runner_front.py"
"""What hil installs as `enn_executor_runner` on a virtual board."""


@dataclass(frozen=True)
class RunOptions:
    """Everything `hil run` was asked to do, validated by the CLI."""

    cases: tuple[Case, ...]
    boards: tuple[BoardSpec, ...]
    flow: str
    flow_reason: str
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
    command: tuple[str, ...] = ()


@dataclass
class _Work:
    """A lowered case waiting for a board."""

    index: int
    case: Case
    artifact: Any
    tried_on: list[str] = field(default_factory=list)


def new_run_id() -> str:
    """`YYYYmmdd-HHMMSS-xxxxxx`: sortable, unique, safe as a device folder name."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def case_record(case: Case, **fields: Any) -> dict[str, Any]:
    """A results.json case entry (docs/results-json.md)."""
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
        "pte_bytes": None,
        "delegation": None,
        "outputs": [],
        "logs": {},
        "tags": list(case.tags),
    }
    record.update(fields)
    return record


class Run:
    """One `hil run`: owns the adb server, the boards and the results writer."""

    def __init__(
        self, options: RunOptions, on_record: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        from hil.report.results import ResultsWriter

        self.options = options
        self.on_record = on_record
        self.run_id = new_run_id()
        self.meta: dict[str, Any] = {
            "id": self.run_id,
            "status": "running",
            "started": _now(),
            "finished": None,
            "command": list(options.command),
            **_versions(),
            "sdk": None,
            "flow": options.flow,
            "flow_reason": options.flow_reason,
            "chipset": options.chipset,
            "virtual": any(b.virtual for b in options.boards),
            "git_sha": _git_sha(),
            "shard": f"{options.shard[0]}/{options.shard[1]}",
            "boards": [],
        }
        options.out_dir.mkdir(parents=True, exist_ok=True)
        self.writer = ResultsWriter(options.results_path, self.meta)
        self._lock = threading.Lock()
        self._queue: queue.Queue[_Work] = queue.Queue()
        self._pending = 0
        self._lowering_done = threading.Event()
        self._stop = threading.Event()
        self._live_boards: set[str] = set()
        self._boards_settled = threading.Event()
        self._starting = len(options.boards)
        self.records: list[dict[str, Any]] = []

    # -- results ------------------------------------------------------------------------
    def _record(self, record: dict[str, Any]) -> None:
        with self._lock:
            if self._stop.is_set():
                return  # interrupted: a case cut short by the stop is not a result
            self.records.append(record)
            self.writer.add(record)
            if self.on_record is not None:
                self.on_record(record)

    # -- the run ------------------------------------------------------------------------
    def execute(self) -> list[dict[str, Any]]:
        """Run every case; returns the case records (also written to results.json)."""
        with ExitStack() as stack:
            from hil.adbserver import AdbServer

            adb = stack.enter_context(AdbServer())
            threads = [
                threading.Thread(
                    target=self._board_thread,
                    args=(stack, adb, spec, f"virtual-{i}" if spec.virtual else spec.adb),
                    name=f"board-{i}",
                    daemon=True,
                )
                for i, spec in enumerate(self.options.boards)
            ]
            for thread in threads:
                thread.start()
            try:
                self._lower_all()
                self._lowering_done.set()
                while any(t.is_alive() for t in threads):
                    for thread in threads:
                        thread.join(timeout=0.2)
                self._fail_leftovers("no usable board left to run it")
                self.writer.finish("complete")
            except KeyboardInterrupt:
                self._stop.set()
                self.writer.finish("interrupted")
                raise
        return self.records

    def _lower_all(self) -> None:
        from hil.lower import LoweringFailed, build_artifact

        for index, case in enumerate(self.options.cases):
            if self._stop.is_set():
                return
            if self._boards_settled.is_set() and not self._live_boards:
                self._record(
                    case_record(case, verdict=Verdict.ERROR_INFRA.value,
                                message="no usable board (every board failed to start)")
                )
                continue
            start = time.perf_counter()
            folder = self.options.out_dir / "cases" / f"c{index:04d}" / "artifact"
            try:
                artifact = build_artifact(case, self.options.flow, self.options.chipset, folder)
            except LoweringFailed as exc:
                self._record(
                    case_record(
                        case, verdict=exc.verdict.value, message=exc.message, detail=exc.detail,
                        timings_s={"lower": round(time.perf_counter() - start, 4)},
                    )
                )
                continue
            except UsageError:
                raise
            except Exception as exc:  # noqa: BLE001 - a bug in hil: record it, keep going
                self._record(
                    case_record(case, verdict=Verdict.ERROR_INTERNAL.value,
                                message=f"{type(exc).__name__}: {exc}"[:300],
                                detail=traceback.format_exc())
                )
                continue
            with self._lock:
                self._pending += 1
            self._queue.put(_Work(index, case, artifact))

    def _fail_leftovers(self, reason: str) -> None:
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                return
            self._record(self._infra_record(work, reason))

    def _infra_record(self, work: _Work, reason: str) -> dict[str, Any]:
        return case_record(
            work.case,
            board=work.tried_on[-1] if work.tried_on else None,
            verdict=Verdict.ERROR_INFRA.value,
            message=reason[:500],
            attempts=len(work.tried_on),
            pte_bytes=work.artifact.pte_bytes,
            timings_s={"lower": round(sum(work.artifact.times_s.values()), 4)},
        )

    # -- boards -------------------------------------------------------------------------
    def _board_thread(self, stack: ExitStack, adb: Any, spec: BoardSpec, name: str) -> None:
        board = None
        try:
            board = self._bring_up(stack, adb, spec, name)
        except (InfraError, UsageError) as exc:
            log.error("%s: not usable: %s", name, exc)
            with self._lock:
                self.meta["boards"].append({"name": name, "adb": spec.adb, "error": str(exc)})
                self.writer.update_run(boards=self.meta["boards"])
        finally:
            with self._lock:
                self._starting -= 1
                if board is not None:
                    self._live_boards.add(name)
                if self._starting == 0:
                    self._boards_settled.set()
        if board is None:
            return
        try:
            self._work_loop(board)
        finally:
            with self._lock:
                self._live_boards.discard(name)
            board.cleanup()

    def _bring_up(self, stack: ExitStack, adb: Any, spec: BoardSpec, name: str) -> Any:
        from hil.board.adb import AdbBoard

        address = spec.adb
        if spec.virtual:
            from hil.virtual.launcher import start_virtual_board

            root = Path(tempfile.mkdtemp(prefix=f"hil-{name}-"))
            process = start_virtual_board(root, self.options.chipset, name)
            with self._lock:
                stack.callback(shutil.rmtree, root, ignore_errors=True)
                stack.callback(process.stop)
            address = process.address
        if spec.network or spec.virtual:
            device = adb.connect(address, timeout=30.0)
        else:
            device = adb.client.device(serial=address)
        probe = AdbBoard(name, address, device, self.run_id, VIRTUAL_RUNNER, self.options.timeout_s)
        is_virtual = probe.properties().get("ro.hil.virtual") == "1"
        runner = VIRTUAL_RUNNER if is_virtual else self.options.runner
        if runner is None:
            raise UsageError(
                f"--runner: {name} is a real board: pass the enn_executor_runner built for "
                "Android (backends/samsung/build.sh --build android)"
            )
        board = AdbBoard(name, address, device, self.run_id, runner, self.options.timeout_s)
        info = board.prepare()
        with self._lock:
            self.meta["boards"].append(
                {"name": info.name, "adb": info.adb, "chipset": info.chipset,
                 "virtual": info.virtual, "properties": info.properties}
            )
            self.meta["virtual"] = any(b.get("virtual") for b in self.meta["boards"])
            self.writer.update_run(boards=self.meta["boards"], virtual=self.meta["virtual"])
        log.info("%s: ready (%s, chipset %s%s)", name, address, info.chipset,
                 ", VIRTUAL" if info.virtual else "")
        return board

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
        consecutive_infra = 0
        while (work := self._next_work(board.name)) is not None:
            record = self._run_on(board, work)
            if record["verdict"] == Verdict.ERROR_INFRA.value:
                consecutive_infra += 1
                retry = len(work.tried_on) <= self.options.retries
                quarantined = consecutive_infra >= QUARANTINE_AFTER
                if retry:
                    self._queue.put(work)
                else:
                    self._finish(record)
                if quarantined:
                    log.error("%s: quarantined after %d infrastructure errors", board.name,
                              consecutive_infra)
                    return
                continue
            consecutive_infra = 0
            self._finish(record)

    def _finish(self, record: dict[str, Any]) -> None:
        self._record(record)
        with self._lock:
            self._pending -= 1

    def _run_on(self, board: Any, work: _Work) -> dict[str, Any]:
        from hil.judge import judge

        work.tried_on.append(board.name)
        artifact = work.artifact
        slot = f"c{work.index:04d}"
        host_out = self.options.out_dir / "cases" / slot / f"output-{board.name}"
        try:
            execution = board.run(
                artifact, slot, host_out, self.options.iterations, self.options.warmup
            )
            judgement = judge(work.case, artifact, execution)
        except InfraError as exc:
            return self._infra_record(work, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug in hil: record it, keep going
            return case_record(
                work.case, board=board.name, verdict=Verdict.ERROR_INTERNAL.value,
                message=f"{type(exc).__name__}: {exc}"[:300], detail=traceback.format_exc(),
                attempts=len(work.tried_on),
            )
        return case_record(
            work.case,
            board=board.name,
            verdict=judgement.verdict.value,
            message=judgement.message,
            attempts=len(work.tried_on),
            timings_s={"lower": round(sum(artifact.times_s.values()), 4), **execution.timings_s},
            latency_ms=execution.latency_ms,
            pte_bytes=artifact.pte_bytes,
            delegation={
                "delegated_calls": artifact.delegated_calls,
                "delegated_ops": list(artifact.delegated_ops),
                "undelegated_ops": list(artifact.undelegated_ops),
            },
            outputs=[
                {"index": c.index, "shape": list(c.shape), "dtype": c.dtype,
                 "max_abs": c.max_abs, "max_rel": c.max_rel, "mae": c.mae,
                 "sqnr_db": c.sqnr_db, "atol": work.case.tolerance.atol,
                 "rtol": work.case.tolerance.rtol, "ok": c.ok}
                for c in judgement.comparisons
            ],
            logs={"runner": (execution.stdout + execution.stderr)[-65536:]},
        )

