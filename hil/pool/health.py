"""When a board is given up: the pool's policy after an infrastructure error.

```
case ok ───────────────► in_a_row = 0, good += 1 (GOOD_STREAK forgets earlier quarantines)
infrastructure error ──► recovery ladder (hil/board/recovery.py)
   ladder ran out, or QUARANTINE_AFTER errors in a row ──► quarantined
quarantined ──► its first health check: at once for a board's first quarantine, after
                min(PROBATION_S x 2^(quarantines-2), PROBATION_MAX_S) for a later one
   passed ──► back in the run at once
   failed ──► another CHECK_EVERY_S later, for as long as the checks have failed for less
              than GIVE_UP_S; then out for the run
```

A board whose ladder ran out while no other board is live or on probation is out at once:
nobody waits for a dead last board (the run reports what is left).

The guarantees: a board that stays broken fails its health checks and is out for the run
once they have failed for GIVE_UP_S since its first (it eats no case: a board on probation
takes none); a board that is fit again is back within CHECK_EVERY_S (and a check's own time)
of its first check; a board that flaps (passes its checks, fails its cases) costs at most
QUARANTINE_AFTER attempts per PROBATION_MAX_S, each retried on another board, until
GOOD_STREAK cases in a row clear it.
"""

from __future__ import annotations

from dataclasses import dataclass

RECOVERY_FAILED = "recovery failed"
"""Why a board whose recovery ladder ran out was quarantined."""
QUARANTINE_AFTER = 2
"""Consecutive infrastructure errors after which a board is taken out of the run, even when
the recovery ladder brought it back each time (it then gets a health check later)."""
# Why these numbers. What takes a board out in the soak (scripts/soak.py) lasts seconds: a
# state fault (/data read-only, the wrong chipset, the adb key refused) holds 3-10 s, an event
# fault (a drop, a freeze, a reboot, the adb server's death) is over once the ladder has run.
# So most quarantined boards are fit again at their first health check, and every second a
# board waits past that is capacity lost: with a first check after 30 s, 14 of 15 quarantined
# boards passed it, and the boards in the run fell to 2.1-2.4 of 4 in a tenth of the run.
# Hence a first quarantine checked at once, and a failing board checked every CHECK_EVERY_S:
# the policy's own cost is the seconds from a fault's clearing to the next check, which checks
# at 3, 6 and 12 s out made about 22 board-seconds a run and a check every second 6-10. A board
# quarantined again soon (before GOOD_STREAK good cases) may be flapping (passes its checks,
# fails its cases): it sits out PROBATION_S, doubling to PROBATION_MAX_S, which bounds what it
# costs; a GOOD_STREAK of 3 instead of 10 lost more capacity, not less.
# Today's figures (scripts/soak.py --cases 3000 --boards 4 --chaos-rate 0.03 --seed 20261201,
# three runs at 0.9.0 on a 2-core VM): 88-101 s, 0 cases lost, 0 faults unhandled, capacity
# lost 40-44 %; 6-14 of 57-72 quarantined board-seconds outside a held fault (the policy's
# share); in the worst tenth 3.58-3.73 boards in the run or held by a fault, 1.94-2.64 in the
# run. The latter falls below 3 where the deck deals state faults to several boards at once
# within a tenth of 9-12 s: the faults' own seconds, which no waiting policy gives back.
PROBATION_S = 3.0
"""How long a board quarantined for the second time (since its last GOOD_STREAK) stays out
before its first health check; doubled for each later quarantine, up to PROBATION_MAX_S. A
first quarantine gets its check at once."""
PROBATION_MAX_S = 60.0
"""The longest sit-out before a health check (the doubling's cap): a board that flaps
(passes its check, fails its cases) costs the run at most QUARANTINE_AFTER attempts a minute."""
CHECK_EVERY_S = 1.0
"""The wait after a failed health check before the next (each check is a climb of the
recovery ladder from its reconnect: a fraction of a second on a board that answers)."""
GIVE_UP_S = 24.0
"""A quarantined board whose health checks have failed for this long since its first one is
out for the rest of the run."""
GOOD_STREAK = 10
"""Cases in a row without an infrastructure error after which a board's earlier quarantines
no longer lengthen the next one."""


@dataclass
class BoardHealth:
    """One board's counters over a run."""

    in_a_row: int = 0
    """Infrastructure errors in a row."""
    quarantines: int = 0
    """Quarantines since the last GOOD_STREAK."""
    good: int = 0
    """Cases in a row without an infrastructure error."""

    def passed(self) -> None:
        """A case ended without an infrastructure error."""
        self.in_a_row = 0
        self.good += 1
        if self.good >= GOOD_STREAK:
            self.quarantines = 0

    def failed(self) -> None:
        """A case ended in an infrastructure error."""
        self.in_a_row += 1
        self.good = 0

    def quarantine_reason(self, ladder_ran_out: bool) -> str | None:
        """Why the board leaves the run now, or None (it stays)."""
        if ladder_ran_out:
            return RECOVERY_FAILED
        if self.in_a_row >= QUARANTINE_AFTER:
            return f"{self.in_a_row} infrastructure errors in a row"
        return None

    def quarantined(self) -> float:
        """Count a quarantine; the wait before its first health check (seconds)."""
        self.quarantines += 1
        self.in_a_row = 0
        if self.quarantines == 1:
            return 0.0
        return min(PROBATION_S * 2.0 ** min(self.quarantines - 2, 32), PROBATION_MAX_S)
