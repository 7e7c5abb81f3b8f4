#!/usr/bin/env python3
"""pytest for ./scripts/test: with no test path among the arguments, pytest processes at once
— the container tests (tests/container: docker builds and container runs, mostly waiting on
dockerd and I/O) and the rest of tests/ in two halves (`groups`) — instead of one after the
other. With a test path (`./scripts/test tests/board -k lease`) or HIL_TEST_SERIAL=1, one
plain pytest run, as before.

Each gets every argument (`-q`, `--full`, `--durations=25`, `-k`...). Their lines are streamed
as they come, prefixed with the group's name; each process's closing report (FAILURES, the
durations, the short summary) is held back and printed whole, unprefixed, when that process
ends. The exit code is pytest's: 0 when all passed (or some collected nothing: `-k` may
select tests of one group only), 5 when none collected a test, else the worst failure. A
process counts as green only when it exited 0 *and* printed pytest's closing summary line
(`12 passed in 3.4s`): one that exited 0 without it (a test that called `os._exit(0)`) or
whose exit code is unknown is a failure (UNFINISHED).

usage: parallel-pytest.py [PYTEST_ARGS...]   (run from the repository root)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

SECOND_HALF = ("tests/board", "tests/pool", "tests/cases", "tests/bisection/test_runner.py",
               "tests/bisection/test_python.py")
"""Folders and files that run as a third process, `rest-2`, beside `rest` (the rest of
tests/): their tests wait a lot (boards' timeouts, probation, runner deadlines, the
bisections' board runs), so the two halves and the container tests (mostly waiting on dockerd)
keep two cores busy. Chosen by the durations of a whole run (`--durations=0`)."""


WAITING = ("tests/container", "tests/scripts/test_soak.py", "tests/provision", "tests/devicefarm",
           "tests/virtual", "tests/workflow", "tests/bisection/test_firmware.py", "tests/localize")
"""The `container` process: docker's tests, the soak, which waits on its boards' recoveries
and probation most of its time (its load stays under 1), provisioning (reboots into the
bootloader and back, fastboot's waits) and devicefarm's holders (idle limits, leases); and
the virtual board's and the workflow's tests (80 s together on a warm machine), which keep
`rest-2` (the models' lowering, the longest lane of a cold CI run) from ending last; and the
firmware bisections (boards rebooting after each flash) and localization's end-to-end runs,
which even out the three lanes' times."""


def groups() -> list[tuple[str, list[str]]]:
    """(name, pytest paths) of the processes run at once; `rest-2` only where its folders exist."""
    second = [path for path in SECOND_HALF if Path(path).exists()]
    rest = ["tests", "--ignore=tests/container", *(f"--ignore={path}" for path in second)]
    waiting = [path for path in WAITING if Path(path).exists()]
    rest += [f"--ignore={path}" for path in waiting[1:]]
    return [("container", waiting), ("rest", rest)] + ([("rest-2", second)] if second else [])
NO_TESTS = 5
"""pytest's exit code when it collected no test."""
_REPORT = re.compile(r"^=+ (?!test session starts)\S.* =+$")
"""The first line of pytest's closing report (a `=== title ===` rule other than the header)."""
_SUMMARY = re.compile(r"^(?:=+ )?(?:no tests ran|\d+ [a-z]+(?:, \d+ [a-z]+)*) in \d+(?:\.\d+)?s\b.*$")
"""pytest's closing summary line (`=== 3 passed, 1 skipped in 2.01s ===`, `-q`: `3 passed in
2.01s`, `no tests ran in 0.01s`): printed only by a session that reached its end."""
UNFINISHED = 3
"""The exit code given to a process that exited 0 without its closing summary, or whose exit
code is missing: pytest's "internal error" (the session did not end as pytest ends one)."""
_OPTIONS_WITH_VALUE = frozenset({
    "-k", "-m", "-p", "-c", "-o", "-W", "--durations", "--basetemp", "--rootdir", "--ignore",
    "--deselect", "--confcutdir", "--junit-xml", "--junitxml", "--maxfail", "--tb", "-r",
    "--override-ini", "--log-level", "--log-file", "--import-mode", "--capture",
})


def test_paths(args: list[str]) -> list[str]:
    """The arguments that name tests (`tests/x.py`, `tests/x.py::test_y`, a folder): not
    options, not an option's value, and existing on disk."""
    found, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            skip = arg in _OPTIONS_WITH_VALUE
            continue
        if Path(arg.split("::", 1)[0]).exists():
            found.append(arg)
    return found


def lane_exit(code: int | None, summary_seen: bool) -> int:
    """A process's exit code as counted: UNFINISHED when the code is missing, or 0 without
    pytest's closing summary line."""
    if code is None or (code == 0 and not summary_seen):
        return UNFINISHED
    return code


def combined_exit(codes: list[int | None]) -> int:
    """One pytest exit code for the processes' codes; a missing code is UNFINISHED."""
    codes = [UNFINISHED if code is None else code for code in codes]
    failures = [code for code in codes if code not in (0, NO_TESTS)]
    if failures:
        return max(failures)
    return NO_TESTS if all(code == NO_TESTS for code in codes) else 0


class _Group:
    def __init__(self, name: str, paths: list[str], args: list[str], width: int, lock: threading.Lock):
        self.name = name
        self.paths = paths
        self.prefix = f"{name:<{width}} | "
        self.lock = lock
        self.start = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-m", "pytest", *paths, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()
        self.code: int | None = None
        """The exit code as counted (`lane_exit`); None until the process ended."""
        self.seconds = 0.0

    def _pump(self) -> None:
        report: list[str] = []
        summary_seen = False
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            summary_seen = summary_seen or bool(_SUMMARY.match(line.strip()))
            if report or _REPORT.match(line):
                report.append(line)
                continue
            with self.lock:
                print(self.prefix + line, flush=True)
        returned = self.process.wait()
        self.code = lane_exit(returned, summary_seen)
        self.seconds = time.monotonic() - self.start
        with self.lock:
            print(f"{'=' * 20} {self.name}: pytest {' '.join(self.paths)} "
                  f"(exit {returned}, {self.seconds:.0f} s) {'=' * 20}", flush=True)
            for line in report:
                print(line)
            if self.code != returned:
                print(f"scripts/test: {self.name} exited {returned} without pytest's closing "
                      f"summary line: it did not finish; counted as exit {self.code}")
            sys.stdout.flush()


def _serial(args: list[str]) -> int:
    """One plain pytest run, its lines passed through as they come, its exit code counted as
    a lane's (`lane_exit`: 0 only with the closing summary line)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches pytest from the terminal
    process = subprocess.Popen([sys.executable, "-u", "-m", "pytest", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    signal.signal(signal.SIGTERM, lambda signum, _frame: process.send_signal(signum))
    summary_seen = False
    assert process.stdout is not None
    for raw in process.stdout:
        sys.stdout.buffer.write(raw)
        sys.stdout.flush()
        summary_seen = summary_seen or bool(_SUMMARY.match(raw.decode(errors="replace").strip()))
    returned = process.wait()
    code = lane_exit(returned, summary_seen)
    if code != returned:
        print(f"scripts/test: pytest exited {returned} without its closing summary line: it did "
              f"not finish; counted as exit {code}", flush=True)
    return code


def main(args: list[str]) -> int:
    if test_paths(args) or os.environ.get("HIL_TEST_SERIAL"):
        return _serial(args)
    lock = threading.Lock()
    planned = groups()
    width = max(len(name) for name, _ in planned)
    running = [_Group(name, paths, args, width, lock) for name, paths in planned]

    def forward(signum: int, _frame: object) -> None:
        for group in running:
            if group.process.poll() is None:
                group.process.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    # Ctrl-C reaches the children from the terminal (one process group): each stops its session
    # and prints its report; forwarding it again would make it a second, hard interrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for group in running:
        group.thread.join()
    code = combined_exit([group.code for group in running])
    print("scripts/test: " + ", ".join(f"{g.name} exit {g.code} in {g.seconds:.0f} s" for g in running)
          + f" -> exit {code}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
