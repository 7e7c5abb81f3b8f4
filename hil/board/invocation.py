"""A case's run shell on a board: its runner invocations as one device command.

Where the runner lives (`RUNNER_PATH`), the folders a case needs (`folder_markers`), and
the argument lists of the shell that runs a case (`run_chain`): the board's state read and
its cool-down wait, then one invocation per iteration in its own `runs/<i>/` folder, each
recording its PID (the host kills exactly it at the deadline) and marked on stderr, under a
board-side backstop (`timeout`) and, where it works, `time -v`. The runner's own side of
the contract is `hil/runner/contract.py`; its C++ is upstream's
`examples/samsung/executor_runner/`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from hil.board.commands import device_command
from hil.board.thermal import thermal_script
from hil.latency_plan import NoiseControl

DEVICE_ROOT = "/data/local/tmp/hil"
RUNNER_NAME = "enn_executor_runner"
RUNNER_PATH = posixpath.join(DEVICE_ROOT, "bin", RUNNER_NAME)
"""Where the runner lives on a board, across runs: pushed only when its sha256 differs."""
PID_FILE = "runner.pid"
RUNS_FOLDER = "runs"
"""Under a case's folder, `runs/<i>/` is invocation i's current folder: where the runner
writes its `statistics.txt`, so that every invocation keeps its own without a process to
move it."""
INVOCATION_MARKER = "hil: runner invocation"
"""The stderr line hil prints before each runner invocation of a case: it separates the
invocations' logs, and its absence after a failure means the run shell's own setup failed."""
_INVOKE = f'echo $$ > "$1" && shift && echo "{INVOCATION_MARKER}" >&2 && exec "$@"'
"""Constant script run as `sh -c SCRIPT sh PID_FILE RUNNER ARGS...`: records the runner's
PID (the shell execs into the runner) so the host can kill exactly it, and marks the
invocation."""
_LOOP = ('n=$1 base=$2 && shift 2 && i=0 && while [ "$i" -lt "$n" ]; do '
         'mkdir -p "$base/$i" && cd "$base/$i" && "$@" || exit; i=$((i + 1)); done')
"""Constant script run as `sh -c SCRIPT sh N RUNS_FOLDER INVOCATION...`: the N invocations of a
case whose unrolled chain would not fit in one shell request (`SHELL_REQUEST_BUDGET`); it stops
at the first that fails, with its exit status, as the `&&` chain does."""
SHELL_REQUEST_BUDGET = 16 * 1024
"""Largest run shell command sent unrolled. The adb server takes a service request of at most
65,535 bytes (its length is 4 hex digits: AOSP `adb/adb_io.cpp` `SendProtocolString`); one
invocation is about 600 bytes, so `--iterations 110` or more used to fail with `closed`."""
FOLDER_MARKER = ".hil-folder"
"""The empty file pushed into each folder a case needs (`folder_markers`)."""
KILL_RECORDED = 'kill -KILL "$(cat runner.pid)"'
PEAK_RSS = ("command", "time", "-v")
"""Prefix of each invocation on a board whose `time -v` works (toybox, `toys/posix/time.c`:
`wait4()`'s `ru_maxrss` printed as `Max RSS (KiB): N` on stderr when the child ends).
`command` makes the shell look `time` up as a program: in mksh and bash `time` is a
keyword. It wraps `timeout`, whose own `wait` takes the runner's usage in (`ru_maxrss` of a
process covers its reaped children), so the backstop still signals the runner itself, and
toybox `timeout` exits 128+N for a runner killed by signal N, which `time` passes on."""
BACKSTOP_STATUS = 124
"""What `timeout` (toybox, coreutils) exits with when its time ran out and its TERM ended the
runner: the board-side backstop fired. (A runner killed by anyone else exits 128+N.)"""
BACKSTOP_KILL_AFTER_S = 2
"""Seconds the backstop waits after its TERM before it sends KILL."""


def run_chain(
    case_dir: str, inputs: Sequence[str], iterations: int, warmup: int, noise: NoiseControl,
    fresh: bool = True, *, timeout_s: float, idle_timeout_s: float, measures_rss: bool,
) -> list[list[str]]:
    """The argument lists of a case's run shell (joined with `&&`): unless `fresh` (the
    push has just made the folders, `folder_markers`), clean the case's folder and make
    them; read the board's state and wait for it to cool; then one runner invocation per
    iteration, each in its own `runs/<i>/` folder. `timeout_s`, `idle_timeout_s`: the
    board's limits (the backstop's time comes from them); `measures_rss`: the board's
    `time -v` works (`PEAK_RSS`)."""
    # The host kills the runner by its PID at the deadline. The board-side backstop ends an
    # invocation that outlives it anyway (the kill failed, the host lost track) before the
    # watchdog would call the board silent, so a hung runner stays a TIMEOUT.
    backstop_s = timeout_s + idle_timeout_s / 2
    invocation = [
        *(PEAK_RSS if measures_rss else ()),
        "timeout", "-k", str(BACKSTOP_KILL_AFTER_S), f"{backstop_s:g}",
        "sh", "-c", _INVOKE, "sh", posixpath.join(case_dir, PID_FILE),
        RUNNER_PATH,
        "--model", posixpath.join(case_dir, "model.pte"),
        "--input", " ".join(inputs),
        "--output_path", posixpath.join(case_dir, "out"),
        "--num_executions", "1",
        "--warm_up", str(warmup),
        "--dump_statistics",
    ]  # fmt: skip
    folders = [posixpath.join(case_dir, RUNS_FOLDER, str(index)) for index in range(iterations)]
    runs: list[list[str]] = []
    for folder in folders:
        runs += [["cd", folder], invocation]
    if fresh:  # the push made the folders (`folder_markers`)
        setup = []
    else:
        setup = [["rm", "-rf", "out", RUNS_FOLDER, PID_FILE], ["mkdir", "-p", "out", *folders]]
    cool = ["eval", thermal_script(round(noise.cooldown_c * 1000), noise.cooldown_max_s)]
    chain = [["cd", case_dir], *setup, cool, *runs]
    if len(device_command(*chain)) <= SHELL_REQUEST_BUDGET:
        return chain
    setup = [] if fresh else [["rm", "-rf", "out", RUNS_FOLDER, PID_FILE], ["mkdir", "-p", "out"]]
    loop = ["sh", "-c", _LOOP, "sh", str(iterations), posixpath.join(case_dir, RUNS_FOLDER), *invocation]
    return [["cd", case_dir], *setup, cool, loop]


def folder_markers(case_dir: str, iterations: int) -> list[tuple[bytes, str, int]]:
    """Empty files whose push makes a case's `out/` and `runs/<i>/` folders: adbd creates the
    parents of a pushed file (`fixed_push_mkdir`), in the connection that goes up anyway, so
    the run shell needs no `mkdir` process."""
    folders = ["out", *(posixpath.join(RUNS_FOLDER, str(i)) for i in range(iterations))]
    return [(b"", posixpath.join(case_dir, folder, FOLDER_MARKER), 0o644) for folder in folders]
