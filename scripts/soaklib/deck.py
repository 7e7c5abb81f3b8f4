"""The deck of faults: which fault is dealt, when, and to which board.

Decisions only; nothing here touches a board (the driver carries them out):

- the cards: every kind of `hil/virtual/faults.py` (kinds added later too, as bare specs; not
  its PROVISIONING_KINDS: a soak flashes no board) and
  the death of hil's adb server, shuffled so that every kind comes before any repeats;
- after each finished case, with probability `rate`, one card at a random moment of the next
  half second (so faults arrive mid-case, at a rate that follows the run's speed), on one
  board in the run or, a fifth of the time, on two at once;
- one recovery in two gets a fault while the board climbs its ladder;
- a state fault holds a few seconds, then is cleared.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

from hil.virtual.faults import KINDS, parse_fault

SERVER_KILL = "adb-server-kill"
"""Not a board fault: SIGKILL of hil's private adb server (the matrix's "adb server dies")."""
CARDS: dict[str, tuple[str, ...]] = {
    "drop": ("drop,on=push,path=*.pte", "drop,on=exec", "drop,on=pull,path=*/output_0.bin",
             "drop,on=now"),
    "freeze": ("freeze,on=exec", "freeze,on=now"),
    "reboot": ("reboot,on=exec", "reboot,on=now"),
    "panic": ("panic,on=exec",),
    "crash": ("crash,signal=SEGV", "crash,signal=ABRT"),
    "storage-full": ("storage-full,on=push,path=*.pte", "storage-full,on=exec"),
    "slow": ("slow,delay=0.02",),
    "noise": ("noise,rel=0.5",),
    "miscompute": ("miscompute,times=1",),
}
"""Specs drawn for the kinds that have variants or need options (a bare `miscompute` would
hit every later program of its board); any other kind of KINDS is drawn bare."""
DURING_RECOVERY = ("drop,on=now", "reboot,on=now", "freeze,on=now", "auth-refused",
                   "wrong-chipset", "slow,delay=0.02", SERVER_KILL)
"""What may hit a board while it climbs the recovery ladder."""
STRIKE_WITHIN_S = (0.0, 0.5)
"""A fault dealt after a finished case comes this long after it (uniform)."""
RECOVERY_WITHIN_S = (0.05, 1.0)
"""A fault dealt to a recovery comes this long after the recovery started (uniform)."""
STATE_HOLD_S = (3.0, 10.0)
"""A state fault holds this long (uniform), then `fault clear KIND`."""
PAIR_SHARE = 0.2
"""Share of injections that hit two boards at once."""
RECOVERY_SHARE = 0.5
"""Share of recoveries that get a fault while they run."""


@dataclass
class Injection:
    """One fault dealt to a board (the driver fills in when it went out and was cleared)."""

    at: float
    """Epoch seconds."""
    board: str
    spec: str
    kind: str
    during_recovery: bool = False
    pair: bool = False
    cleared_at: float | None = None
    """State faults: when `fault clear KIND` went out."""


def kind_of(spec: str) -> str:
    """The fault kind of a card (SERVER_KILL for the adb server's death)."""
    return SERVER_KILL if spec == SERVER_KILL else spec.split(",")[0]


def is_state(spec: str) -> bool:
    """True for a state fault's spec (False for SERVER_KILL and any spec that does not parse)."""
    try:
        return parse_fault(spec).is_state
    except Exception:  # noqa: BLE001 - SERVER_KILL and the like
        return False


def build_cards() -> tuple[list[str], dict[str, str]]:
    """Every card of the deck, and the kinds left out (a later kind that needs options) with
    the parser's reason. An event fault that fires every time by default (as a bare
    `miscompute`) is dealt to fire once, like the rest."""
    cards = [SERVER_KILL]
    skipped: dict[str, str] = {}
    for kind in KINDS:
        for spec in CARDS.get(kind, (kind,)):
            try:
                fault = parse_fault(spec)
            except Exception as exc:  # noqa: BLE001 - a later kind that needs options
                skipped[kind] = str(exc)
                continue
            cards.append(spec if fault.is_state or fault.times != 0 else f"{spec},times=1")
    return cards, skipped


class Dealer:
    """Deals the deck: every decision of the chaos, from the soak's seed.

    Each kind of decision draws from its own stream of the seed, so what the k-th finished
    case brings (a fault or none, and which card) does not depend on when recoveries happen
    to start: a seed deals the same cards to the same cases on any machine.
    """

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        """Faults per finished case (a probability)."""
        self.cards, self.skipped = build_cards()
        self._strikes = random.Random(f"{seed} strikes")
        self._shuffles = random.Random(f"{seed} shuffles")
        self._boards = random.Random(f"{seed} boards")
        self._recoveries = random.Random(f"{seed} recoveries")
        self._holds = random.Random(f"{seed} holds")
        self._deck: list[str] = []
        self._lock = threading.Lock()

    def draw(self) -> str:
        """The next card; a fresh shuffle of all of them once the deck is empty."""
        with self._lock:
            if not self._deck:
                self._deck = list(self.cards)
                self._shuffles.shuffle(self._deck)
            return self._deck.pop()

    def after_case(self) -> float | None:
        """Seconds from a finished case to the fault it brings; None: no fault this time."""
        with self._lock:
            if self._strikes.random() >= self.rate:
                return None
            return self._strikes.uniform(*STRIKE_WITHIN_S)

    def strike(self, in_run: list[str]) -> tuple[str, list[str]]:
        """A card and the boards it hits (two boards: a pair) among the boards in the run."""
        spec = self.draw()
        with self._lock:
            two = len(in_run) > 1 and spec != SERVER_KILL and self._boards.random() < PAIR_SHARE
            return spec, self._boards.sample(in_run, 2 if two else 1)

    def in_recovery(self) -> tuple[float, str] | None:
        """Seconds after a recovery started and the card that hits the recovering board then;
        None: this recovery is left alone."""
        with self._lock:
            if self._recoveries.random() >= RECOVERY_SHARE:
                return None
            return self._recoveries.uniform(*RECOVERY_WITHIN_S), self._recoveries.choice(DURING_RECOVERY)

    def hold(self) -> float:
        """Seconds a state fault holds before it is cleared."""
        with self._lock:
            return self._holds.uniform(*STATE_HOLD_S)
