"""Worker processes forked from one host process, so they share its imports.

hil's lowering (hil/lower/pool.py) has its workers import torch and the exporter once:
```
hil run --spawn--> host: imports torch and executorch.exir once (most of a lowering worker's
                   |      start: ~12 s of CPU on a slow machine), then forks the workers
                   +--fork--> worker 1 .. worker N: take tasks from one queue, send outcomes
                                                    on one pipe (a lock keeps messages whole)
```

Each spawned worker of a `ProcessPoolExecutor` imported torch and the exporter itself; forked
from the host, the workers start with them imported. The host ends with its workers, and the
workers die with the host (`PR_SET_PDEATHSIG`: the host has one thread, the one that forks),
so killing the host ends the work at once. multiprocessing's own "forkserver" would share
the import too, but it is one server per process that outlives the pool (hundreds of MB for the
rest of a run) and only a private function stops it.

A worker that dies (a crash in the exporter, the kernel's OOM killer) costs its case only: the
host reports it and forks another, at most once per task. A task's arguments are pickled when it
is submitted and unpickled once its worker has said it took it, so a task that cannot cross
fails alone instead of leaving the run waiting for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

from hil import lifeline

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when the process that forked it ends (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the prctl
        os._exit(1)


def _send(outcomes: Connection, lock: Any, message: tuple[Any, ...]) -> None:
    """One whole message on the pipe all the workers and the host share."""
    with lock:
        outcomes.send(message)


def _work(task_of: Callable[..., Any], tasks: Any, outcomes: Connection, lock: Any,
          host: int) -> None:
    """A worker: run `task_of` on each task's arguments until the None that ends it. "took"
    is on the pipe before the task starts, so a worker's death is laid to its task."""
    _die_with_parent(host)
    while (task := tasks.get()) is not None:
        index, pickled = task
        _send(outcomes, lock, ("took", os.getpid(), index))
        try:
            args = pickle.loads(pickled)  # noqa: S301 - written by the process that started us
        except Exception as exc:  # noqa: BLE001 - the task's outcome says it
            outcome: Any = TaskFailed(f"its arguments did not unpickle in the worker: {exc!r}")
        else:
            outcome = task_of(*args)
        _send(outcomes, lock, ("done", os.getpid(), index, outcome))


def _host(task_of: Callable[..., Any], tasks: Any, outcomes: Connection, lock: Any, jobs: int,
          replacements: int, preload: tuple[str, ...], warm_up: Callable[[], Any] | None) -> None:
    """The host: import `preload` once, call `warm_up`, fork `jobs` workers, replace those
    that die (at most `replacements` times), end when they have all ended."""
    for name in preload:
        with contextlib.suppress(ImportError):  # a worker that needs it reports the failure
            importlib.import_module(name)
    if warm_up is not None:
        try:
            warm_up()
        except Exception:  # noqa: BLE001, S110 - a task that meets the same failure reports it
            pass
    fork = multiprocessing.get_context("fork")
    running: dict[Any, multiprocessing.process.BaseProcess] = {}

    def start() -> None:
        worker = fork.Process(target=_work, args=(task_of, tasks, outcomes, lock, os.getpid()))
        worker.start()
        running[worker.sentinel] = worker

    for _ in range(jobs):
        start()
    while running:
        for sentinel in wait(list(running)):
            worker = running.pop(sentinel)
            worker.join()
            if worker.exitcode != 0:
                _send(outcomes, lock, ("died", worker.pid, worker.exitcode))
                if replacements > 0:
                    replacements -= 1
                    start()


class TaskFailed(Exception):
    """The outcome of a task that could not be run: its arguments did not pickle here or
    unpickle in the worker, or (WorkerDied) its worker or the host ended first."""


class WorkerDied(TaskFailed):
    """The outcome of a task whose worker ended while it held the task, or that was still
    waiting when the host ended."""


class Workers:
    """`jobs` worker processes forked from one host that imported `preload` and called
    `warm_up` (what every task would otherwise build for itself in each worker), running
    `task_of` (a module-level function: the host unpickles it by name; `warm_up` too, or a
    `functools.partial` of one) on the tasks given to `submit`; `replacements` bounds how
    many workers that die are replaced (one per task will do)."""

    def __init__(self, task_of: Callable[..., Any], jobs: int, replacements: int,
                 preload: tuple[str, ...], warm_up: Callable[[], Any] | None = None) -> None:
        spawn = multiprocessing.get_context("spawn")
        self._tasks = spawn.Queue()
        self._outcomes, writer = spawn.Pipe(duplex=False)
        self._lock = spawn.Lock()  # held until the host has it: its semaphore dies with it
        self._jobs = jobs
        self._held: dict[int, int] = {}  # worker pid -> index of the task it holds
        self._waiting: set[int] = set()
        self._unsent: list[tuple[int, TaskFailed]] = []  # tasks whose arguments did not pickle
        self._host = spawn.Process(
            target=_host, name="hil-workers-host",
            args=(task_of, self._tasks, writer, self._lock, jobs, replacements, preload, warm_up),
        )
        with lifeline.tied_environ():  # the host and its workers die with this process
            self._host.start()
        writer.close()  # the host's tree holds the only write ends: EOF once it has ended

    def submit(self, index: int, args: tuple[Any, ...]) -> None:
        """Queue task `index`; call `close` after the last."""
        try:
            pickled = pickle.dumps(args)
        except Exception as exc:  # noqa: BLE001 - the task's outcome says it
            self._unsent.append((index, TaskFailed(f"its arguments did not pickle: {exc!r}")))
            return
        self._waiting.add(index)
        self._tasks.put((index, pickled))

    def close(self) -> None:
        """No more tasks: each worker ends after the queue's last."""
        for _ in range(self._jobs):
            self._tasks.put(None)

    @property
    def waiting(self) -> bool:
        """Some task has no outcome yet."""
        return bool(self._waiting or self._unsent)

    def outcomes(self, timeout: float) -> Iterator[tuple[int, Any]]:
        """(index, outcome) for each task finished within `timeout` seconds, then any more at
        hand. The outcome of a task whose worker died is a WorkerDied; so is every waiting
        task's once the host and its workers have all ended."""
        while self._unsent:
            yield self._unsent.pop(0)
        ready = self._outcomes.poll(timeout)
        while ready:
            try:
                kind, pid, *rest = self._outcomes.recv()
            except EOFError:
                self._host.join()
                ended = WorkerDied(f"the workers' host ended ({_exit_reason(self._host.exitcode)})")
                for index in sorted(self._waiting):
                    yield index, ended
                self._waiting.clear()
                return
            if kind == "took":
                self._held[pid] = rest[0]
            elif kind == "done":
                self._held.pop(pid, None)
                self._waiting.discard(rest[0])
                yield rest[0], rest[1]
            elif pid in self._held:  # "died" while holding a task
                index = self._held.pop(pid)
                self._waiting.discard(index)
                yield index, WorkerDied(f"the worker died ({_exit_reason(rest[0])})")
            ready = self._outcomes.poll(0)

    def end(self) -> None:
        """End the host now, its workers with it, whatever they are doing; then release the
        queues. After the last outcome, it only waits for them to end."""
        if self._waiting and self._host.is_alive():
            self._host.kill()
        self._host.join()
        self._outcomes.close()
        self._tasks.close()
        self._tasks.cancel_join_thread()  # nothing is left to read what was not read


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"
