"""The kinds of answer `hil bisect` gives and the exit code of each (light: `hil --help` and
the help records read it without importing the bisection)."""

from __future__ import annotations

CULPRIT, RANGE, NOT_REPRODUCED, NOT_BISECTABLE, NO_BOARD, INTERRUPTED = (
    "culprit", "range", "not_reproduced", "not_bisectable", "no_board", "interrupted")
EXIT_CULPRIT, EXIT_RANGE, EXIT_NOT_REPRODUCED, EXIT_NOT_BISECTABLE = 0, 4, 5, 6
EXIT_NO_BOARD, EXIT_INTERRUPTED = 2, 130
"""2 and 130 keep hil's meanings (infrastructure, interrupted); 3 is bad usage as everywhere."""
EXIT_CODES = {CULPRIT: EXIT_CULPRIT, RANGE: EXIT_RANGE, NOT_REPRODUCED: EXIT_NOT_REPRODUCED,
              NOT_BISECTABLE: EXIT_NOT_BISECTABLE, NO_BOARD: EXIT_NO_BOARD,
              INTERRUPTED: EXIT_INTERRUPTED}
"""Exit code per kind of answer."""
MEANINGS = {
    EXIT_CULPRIT: "a culprit, confirmed: it failed 3 of 3 runs and its parent passed 3 of 3 (latency: "
                  "significantly slower by at least half the regression); bisect.json answer.culprit",
    EXIT_NO_BOARD: "no usable board, or none left (the state is kept: run it again)",
    EXIT_RANGE: "a range: skipped candidates, an unconfirmed culprit, factors that fail only "
                "together, or changed elements without candidates (without any, no board is used)",
    EXIT_NOT_REPRODUCED: "not reproduced (a good run failed or a bad one passed: flaky; latency: "
                         "not slower)",
    EXIT_NOT_BISECTABLE: "not bisectable: the latency shift is smaller than the noise (figures in "
                         "bisect.json)",
    EXIT_INTERRUPTED: "interrupted: run the same command again to go on",
}
"""What each exit code means (the epilog of `hil bisect --help`)."""
