"""A run: its options (options.py), its scheduler (scheduler.py: flow, lowering, dispatch,
retries, records), one attempt of a case on a board (attempt.py) and the records it writes
(records.py). Boards come from the pool (hil/pool)."""

from hil.run.options import RunOptions
from hil.run.scheduler import Run

__all__ = ["Run", "RunOptions"]
