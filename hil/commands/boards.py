"""`hil boards`: the boards of an inventory or `--board` specs, listed or preflighted (no lease
is taken: a board another run holds can be looked at); with `--labgrid HOST:PORT` the places of
a labgrid coordinator, with their tags, holder and whether that holder still runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hil.commands.common import CHIPSET_CHOICES, choice, lab_server
from hil.errors import UsageError
from hil.pool.sources import StaticSource
from hil.verdict import EXIT_INFRA


def cmd_boards(args: argparse.Namespace) -> int:
    """`hil boards`: a table of the boards; with --check, the full preflight."""
    from hil.board.preflight import preflight, render

    if args.chipset is not None:
        choice(args.chipset, CHIPSET_CHOICES, "--chipset")
    if args.idle_timeout <= 0:
        raise UsageError(f"--idle-timeout: {args.idle_timeout} is out of range")
    runner = Path(args.runner) if args.runner else None
    if runner is not None and not runner.is_file():
        raise UsageError(f"--runner: file not found: {runner}")
    from hil.pool.labgrid import coordinator_address

    address = coordinator_address(args.labgrid)
    if address is not None and (args.labgrid or not (args.inventory or args.board)):
        if args.inventory or args.board:
            raise UsageError("hil boards --labgrid: lists the coordinator's places; "
                             "leave out --inventory/--board")
        return _labgrid_places(address)
    if not args.inventory and not args.board:
        raise UsageError("hil boards: name the boards with --inventory FILE or --board SPEC, "
                         "or a labgrid coordinator with --labgrid HOST:PORT")
    entries = StaticSource.from_args(args.inventory, args.board).entries
    reports, servers = preflight(entries, args.check, args.chipset, runner, args.idle_timeout,
                                 lab_server(args.adb_server))
    sys.stdout.write(render(reports) + servers)
    return EXIT_INFRA if any(report.problems for report in reports) else 0


def _labgrid_places(address: str) -> int:
    """The coordinator's places: tags, holder, whether the holder is alive, reservation (exit 2
    when the coordinator cannot be reached)."""
    from hil.errors import InfraError
    from hil.pool.labgrid import place_rows, render_places

    try:
        rows = place_rows(address)
    except InfraError as exc:
        sys.stderr.write(f"hil boards: {exc}\n")
        return EXIT_INFRA
    sys.stdout.write(render_places(address, rows))
    return 0
