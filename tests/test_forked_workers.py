"""Workers forked from one host (hil/forked_workers.py, the lowering's): they share its imports,
a worker's death costs its task only, and ending the host ends them all at once."""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from pathlib import Path

from hil.forked_workers import TaskFailed, WorkerDied, Workers


def who_am_i(index: int, probe: str = "") -> tuple[int, int, int | None]:
    """This worker's pid, its parent's, and the pid of the process that imported `probe`
    (None: not imported in this process's memory)."""
    return os.getpid(), os.getppid(), getattr(sys.modules.get(probe), "IMPORTED_BY", None)


WARMED_BY: int | None = None
"""Set by `warm` in the process that called it."""


def warm(folder: str) -> None:
    global WARMED_BY
    WARMED_BY = os.getpid()
    Path(folder, f"warmed-{os.getpid()}").touch()


def warmed_by(index: int) -> tuple[int, int | None]:
    return os.getppid(), WARMED_BY


def dies_on_one(index: int) -> int:
    if index == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return index * 10


class NotInTheWorker:
    """Pickles here; its unpickling raises (as a class the worker cannot import would)."""

    def __reduce__(self):
        return _refuse, ()


def _refuse() -> None:
    raise ImportError("no module named 'elsewhere'")


def hangs(folder: str) -> None:
    Path(folder, str(os.getpid())).touch()
    time.sleep(300)


def run(workers: Workers, args: list[tuple], timeout_s: float = 120) -> dict[int, object]:
    for index, arg in enumerate(args):
        workers.submit(index, arg)
    workers.close()
    outcomes: dict[int, object] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while workers.waiting and time.monotonic() < deadline:
            for index, outcome in workers.outcomes(0.2):
                assert index not in outcomes, "an outcome came twice"
                outcomes[index] = outcome
    finally:
        workers.end()
    return outcomes


def ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def test_the_workers_share_the_hosts_imports_and_share_the_tasks(tmp_path: Path, monkeypatch):
    probe = f"probe_{os.getpid()}_{time.monotonic_ns()}"  # a module only this test has
    (tmp_path / f"{probe}.py").write_text("import os\nIMPORTED_BY = os.getpid()\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the host is spawned with this sys.path
    outcomes = run(Workers(who_am_i, 2, 6, preload=(probe,)), [(i, probe) for i in range(6)])
    assert sorted(outcomes) == list(range(6))
    pids = {pid for pid, _, _ in outcomes.values()}
    hosts = {ppid for _, ppid, _ in outcomes.values()}
    assert 1 <= len(pids) <= 2 and os.getpid() not in pids
    assert len(hosts) == 1 and os.getpid() not in hosts  # forked by the host, not by this process
    # each worker has the module in memory, imported once, by the host, before it forked
    assert {imported_by for _, _, imported_by in outcomes.values()} == hosts


def test_the_warm_up_runs_once_in_the_host_before_the_workers_fork(tmp_path: Path):
    warm_up = functools.partial(warm, str(tmp_path))
    outcomes = run(Workers(warmed_by, 2, 4, preload=(), warm_up=warm_up), [(i,) for i in range(4)])
    assert sorted(outcomes) == list(range(4))
    hosts = {host for host, _ in outcomes.values()}
    assert len(hosts) == 1 and {by for _, by in outcomes.values()} == hosts
    assert [p.name for p in tmp_path.iterdir()] == [f"warmed-{hosts.pop()}"]
    assert WARMED_BY is None  # not in this process


def test_a_worker_that_dies_costs_its_task_only():
    outcomes = run(Workers(dies_on_one, 2, 5, preload=()), [(i,) for i in range(5)])
    assert sorted(outcomes) == list(range(5))
    assert isinstance(outcomes[1], WorkerDied) and "SIGKILL" in str(outcomes[1])
    assert {i: outcomes[i] for i in (0, 2, 3, 4)} == {0: 0, 2: 20, 3: 30, 4: 40}


def test_a_task_whose_arguments_cannot_cross_fails_alone():
    args = [(0,), (lambda: 0,), (2,), (NotInTheWorker(),), (4,)]
    outcomes = run(Workers(dies_on_one, 2, 5, preload=()), args)
    assert sorted(outcomes) == list(range(5))
    assert {i: outcomes[i] for i in (0, 2, 4)} == {0: 0, 2: 20, 4: 40}
    assert type(outcomes[1]) is TaskFailed and "did not pickle" in str(outcomes[1])
    assert type(outcomes[3]) is TaskFailed and "did not unpickle in the worker" in str(outcomes[3])
    assert "elsewhere" in str(outcomes[3])


def test_ending_the_host_ends_its_busy_workers_at_once(tmp_path: Path):
    workers = Workers(hangs, 2, 2, preload=())
    for index in range(2):
        workers.submit(index, (str(tmp_path),))
    workers.close()
    deadline = time.monotonic() + 60
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert len(pids) == 2, "the workers never started their tasks"
    started = time.monotonic()
    workers.end()
    while not all(ended(pid) for pid in pids) and time.monotonic() - started < 10:
        time.sleep(0.05)
    assert all(ended(pid) for pid in pids), "a worker outlived its host"
    assert workers.waiting  # nothing was reported for the killed tasks


def test_a_host_that_ends_with_tasks_waiting_reports_each_of_them():
    workers = Workers(who_am_i, 1, 3, preload=())
    for index in range(3):
        workers.submit(index, (index,))
    # the host is killed before any worker could take a task
    os.kill(workers._host.pid, signal.SIGKILL)  # noqa: SLF001 - the host, as the OOM killer would
    outcomes: dict[int, object] = {}
    deadline = time.monotonic() + 60
    while workers.waiting and time.monotonic() < deadline:
        outcomes.update(workers.outcomes(0.2))
    workers.end()
    assert set(outcomes) <= {0, 1, 2} and len(outcomes) == 3
    died = [o for o in outcomes.values() if isinstance(o, WorkerDied)]
    assert died and all("host ended" in str(o) and "SIGKILL" in str(o) for o in died)


def test_closing_with_no_task_ends_everything():
    workers = Workers(who_am_i, 2, 0, preload=())
    workers.close()
    assert not workers.waiting
    workers.end()
    assert workers._host.exitcode == 0  # noqa: SLF001
