"""scripts/soak.py's parts, in the order data flows: deck → driver → analysis.

`deck` decides the faults; `cases`, `boards`, `hilrun` and `procs` are what the `driver` starts
and watches; `analysis` (with `pace`) turns what the driver saw (`driver.Observed`) into the
JSON report and its invariants. No module imports one later in that order.
"""
