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
# The numbers below come from the soak (scripts/soak.py --cases 3000 --boards 4
# --chaos-rate 0.03 --seed 20261201: 152 faults of every kind) on the policy before them
# (first probation 30 s, doubling without a cap): 15 quarantines on 4 boards (1 to 6 each;
# 9 for 2 errors in a row, after a drop, freeze, reboot or the adb server's death, 6 for a
# ladder that ran out while a state fault held: auth-refused, wrong-chipset, readonly-data).
# 14 came back at their first health check, 30-34 s out; the 15th (its check met the adb
# server just killed) at its second, 92 s out. Those waits were capacity lost: boards in
# the run under 3 in five deciles (2.4 at worst, mean 3.1 of 4; a second run: 2.1, 3.0);
# of about 760 board-seconds out of the run (a third of the run's), 530 were the waits, the
# rest the ladders. What holds a board out in the soak lasts seconds: a state fault holds
# 3-10 s from its injection, a ladder took at most 11 s.
# A first probation of 5 s (checks at 5, 15, 35 s out), twice: 14 and 12 quarantines, 23 of
# 26 back at their first check (5-8 s out; 10-17 s for a repeat within GOOD_STREAK), the
# other 3 at their second (16 s out), boards in the run 3.2-4.0 and 2.9-4.0 per decile
# (mean 3.7 both), 0 lost, 0 unhandled; the 2.9: a readonly-data dealt to two boards at once,
# both quarantined a second later, both checks at 5 s still read-only, both back only at
# 16 s. Then 3 s, doubling per failed check (checks at 3, 9, 21 s out), once: 17
# quarantines, 5 of them failed their first check (a state fault still held) and were back
# at 9-10 s; boards in the run 3.0-4.0 per decile (mean 3.6; the 2.96: three boards out
# 10 s each in a 21 s decile), capacity_lost 26 % (311 of 1,209 board-seconds, about 80 of
# them probation); 0 lost, 0 unhandled. Hence the second check also after 3 s, doubling
# from the third, and a fourth check before a board is given up (at about 24 s out). The
# cost of a short probation is a flapping board's, and the cap bounds it. With these numbers
# (load average 41 at the start, 13 at the end): 14 quarantines, every board back (first
# checks passed 9 of 14; the other 5 at their second check, 6.8-9.4 s out); boards in
# the run 3.5-4.0 per decile (mean 3.8); capacity_lost 22.5 % (307 of 1,361 board-seconds,
# about 72 of them probation, the rest ladders); 0 lost, 0 unhandled; the soak 551 s (main's
# policy: 746 and 822 s, at load 1-21 and 17-24). Stop 28, hil faster (soak 204 s, load
# ~1): boards in the run 2.86-4.0 per decile (mean 3.46), capacity_lost 42 % (about half of
# it probation); GOOD_STREAK 3 instead of 10, once: 2.79-3.7 (mean 3.25), 51 %. The faster the
# cases, the more of them a state fault's seconds reach, and the more quarantines.
# Stop 29 (soak 115-155 s; the soak now also counts a board out while a state fault dealt to
# it still held, `boards_in_run_or_held_deciles`): these numbers, twice: worst tenth 2.48 and
# 1.91 boards in the run (mean 3.54, 3.15), 3.56 and 2.75 counting those held (mean 3.81,
# 3.67); of 51 and 72 quarantined board-seconds, 21 and 28 outside a held fault (the policy's
# share: waiting past the fault, the checks, ladders after event faults). A first check at
# 1 s (6 checks), twice: worst 2.1 and 2.34, held 3.21 and 3.59, 24 and 19 board-s not held.
# A check at once for a board's first quarantine while it answers (then 3 s, doubling), once:
# worst 1.93, held 3.22, 32 board-s not held. No variant is better beyond the runs' spread; a
# worst tenth is two or three boards holding a state fault at once (/data read-only, the adb
# key refused) in a tenth of 12-15 s, which no waiting policy gives back.
# Stop 38 split each quarantine of that soak (seed 20261201) into the seconds a state fault
# held it and the rest. Two runs on the policy before (first wait 3 s, then 3, 6, 12 s): 39.3
# and 41.1 board-s outside a held fault: quarantines after event faults, the board fit at once
# (3.1-6.1 s each, 18.8 board-s in one run), and the waits from a fault's clearing to the next
# check (22.4). Hence a first quarantine checked at once and a failing board checked every
# CHECK_EVERY_S, given up after GIVE_UP_S (as before, about 24 s): three runs, 15.0, 22.0 and
# 16.7 board-s outside a held fault (6.7-12.8 after event faults: later quarantines' waits;
# 6.9-9.2 past a clearing: a check's second and its own time), worst tenth counting the held
# 3.47, 3.19, 3.5 (3.3, 3.21 before); the boards in the run still 2.35-2.43 in the first
# tenth, where this seed holds three boards with state faults for 5-7 s each.
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
