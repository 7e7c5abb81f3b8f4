"""Boards in, usable boards out: board sources (sources.py) give entries; the pool (pool.py)
leases them, brings them up (bringup.py), keeps their health (health.py: recovery, quarantine,
probation) and serves them to a dispatcher — a run's scheduler, a localization, a held board."""
