"""The virtual board's off-host measuring mode (`hil virtual-board --device-time`).

In this mode the board measures hil, not itself: a runner exec runs ExecuTorch's host runtime
only the first time it sees a program+inputs pair (by content) and keeps the outputs; later
execs of the same pair write those same bytes and spend a modelled device time per execution
by sleeping, without burning host CPU, so N boards on one host cost hil's work only. The
runner's console lines, checks, exit codes and files stay those of a real exec; only the time
is modelled:

- `measured`: every execution (warm-up, 1st, timed) takes the latency that the pair's first
  real exec measured (the median of its executions); loading the method takes what it took.
- `MS` (a number): every execution takes MS milliseconds, the real ones included (padded
  with a sleep); loading the method takes what it took the first time.

The board says so: property `ro.hil.virtual.device_time` (hil puts it in results.json's
`run.boards[].device_time`), and its log counts the runtime's real runs and the replays.
"""

from __future__ import annotations

import hashlib
import logging
import statistics
import threading
from dataclasses import dataclass, field
from typing import Any

from hil.errors import UsageError

log = logging.getLogger(__name__)

DEVICE_TIME_PROPERTY = "ro.hil.virtual.device_time"
"""The board's off-host mode (`measured` or the fixed ms per execution); absent: off."""
MEASURED = "measured"


def parse_device_time(text: str, where: str = "--device-time") -> str:
    """`measured` or a fixed number of milliseconds per execution (>= 0), normalised;
    UsageError otherwise."""
    if text == MEASURED:
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3_600_000 or value != value:
        raise UsageError(f"{where} {text!r}: expected `measured` or milliseconds per execution (>= 0)")
    return f"{value:g}"


def digest(data: bytes) -> bytes:
    """The content key of a program or of its inputs."""
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass(frozen=True)
class InputMeta:
    """What the runner checks of an input and how it builds its tensor."""

    nbytes: int
    sizes: tuple[int, ...]
    dtype: Any


@dataclass
class Replay:
    """One program+inputs pair's outcome: the last execution's status and outputs (tensors),
    and the per-execution latency its real exec measured."""

    status: int
    outputs: tuple[Any, ...]
    execution_ms: float


@dataclass
class ProgramReplays:
    """What the first real exec of a program taught: its inputs, its load time, and the
    outcome per inputs digest."""

    inputs: tuple[InputMeta, ...]
    load_ms: float
    by_inputs: dict[bytes, Replay] = field(default_factory=dict)


class OffHost:
    """The replay store of one board's executor (execs are serialised by the executor)."""

    def __init__(self, device_time: str, max_pairs: int = 4096, max_bytes: int = 256 << 20) -> None:
        self.device_time = parse_device_time(device_time)
        self._programs: dict[bytes, ProgramReplays] = {}
        self._pairs = 0
        self._max_pairs = max_pairs
        self._bytes = 0
        self._max_bytes = max_bytes
        """What the kept inputs and outputs may take in all (a model's outputs are megabytes:
        4,096 pairs of them would be gigabytes a board)."""
        self._lock = threading.Lock()
        self.runtime_runs = 0
        """Execs that ran the host runtime (a pair seen for the first time)."""
        self.replays = 0
        """Execs answered from the store."""

    def program(self, program: bytes) -> ProgramReplays | None:
        """What is known of a program (by digest), or None before its first real exec."""
        return self._programs.get(program)

    def learn_program(self, program: bytes, inputs: tuple[InputMeta, ...], load_ms: float) -> None:
        """Keep a program's inputs and load time after its method loaded for real."""
        with self._lock:
            self._programs.setdefault(program, ProgramReplays(inputs, load_ms))

    def replay(self, program: bytes, inputs: bytes) -> Replay | None:
        """The stored outcome of a pair (counted as a replay), or None."""
        known = self._programs.get(program)
        found = known.by_inputs.get(inputs) if known is not None else None
        if found is not None:
            self.replays += 1
            log.info("off-host: replayed a stored program+inputs (runtime runs %d, replays %d)",
                     self.runtime_runs, self.replays)
        return found

    def learn(self, program: bytes, inputs: bytes, status: int, outputs: tuple[Any, ...],
              executions_ms: list[float]) -> None:
        """Keep a real exec's outcome (the store stops growing at `max_pairs` or `max_bytes`)."""
        self.runtime_runs += 1
        log.info("off-host: ran the host runtime for a new program+inputs (runtime runs %d, "
                 "replays %d)", self.runtime_runs, self.replays)
        known = self._programs.get(program)
        size = len(inputs) + sum(int(getattr(o, "nbytes", 0)) for o in outputs)
        if known is None or self._pairs >= self._max_pairs or self._bytes + size > self._max_bytes:
            return  # the pair runs the host runtime each time: slower, never wrong
        latency = statistics.median(executions_ms) if executions_ms else 0.0
        kept = tuple(o.clone() if hasattr(o, "clone") else o for o in outputs)
        known.by_inputs[inputs] = Replay(status, kept, latency)
        self._pairs += 1
        self._bytes += size

    def execution_ms(self, replay: Replay) -> float:
        """The modelled time of one execution of a replayed pair."""
        return replay.execution_ms if self.device_time == MEASURED else float(self.device_time)

    def fixed_ms(self) -> float:
        """The fixed time of one execution, 0 when `measured`."""
        return 0.0 if self.device_time == MEASURED else float(self.device_time)
