"""When a board is given up: the pool's policy after an infrastructure error.

```
case ok ───────────────► in_a_row = 0, good += 1 (GOOD_STREAK forgets earlier quarantines)
infrastructure error ──► recovery ladder (hil/board/recovery.py)
   ladder ran out, or QUARANTINE_AFTER errors in a row ──► quarantined
quarantined ──► sits out PROBATION_S x 2^(quarantines-1) ──► health check
   passed ──► back in the run        failed ──► wait doubles; HEALTH_CHECKS failures: out for good
```

A board whose ladder ran out while no other board is live or on probation is out at once:
nobody waits for a dead last board (the run reports what is left).
"""

from __future__ import annotations

from dataclasses import dataclass

RECOVERY_FAILED = "recovery failed"
"""Why a board whose recovery ladder ran out was quarantined."""
QUARANTINE_AFTER = 2
"""Consecutive infrastructure errors after which a board is taken out of the run, even when
the recovery ladder brought it back each time (it then gets a health check later)."""
PROBATION_S = 30.0
"""How long a board quarantined for infrastructure errors in a row stays out before its
health check; doubled for each later quarantine of the same board and each failed check."""
HEALTH_CHECKS = 3
"""Failed health checks in a row after which a quarantined board stays out of the run."""
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
        """Count a quarantine; the first wait before its health check (seconds)."""
        self.quarantines += 1
        self.in_a_row = 0
        return PROBATION_S * 2 ** (self.quarantines - 1)
