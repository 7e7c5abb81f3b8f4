"""`hil boards`: the boards of an inventory or `--board` specs, listed or preflighted (no lease
is taken: a board another run holds can be looked at); with `--labgrid HOST:PORT` the places of
a labgrid coordinator, with their tags, holder and whether that holder still runs. With none
of these, the boards the default adb server sees (`--adb-server`, HIL_ADB_SERVER, adb's own
ADB_SERVER_SOCKET / ANDROID_ADB_SERVER_ADDRESS/PORT, else 127.0.0.1:5037) and, when
LG_COORDINATOR names one, the coordinator's places."""

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
    if args.labgrid:
        if args.inventory or args.board:
            raise UsageError("hil boards --labgrid: lists the coordinator's places; "
                             "leave out --inventory/--board")
        return _labgrid_places(address)
    if not args.inventory and not args.board:
        code = _default_server_boards(args.adb_server)
        if address is None:
            sys.stdout.write("labgrid coordinator: none set (--labgrid HOST:PORT or LG_COORDINATOR)\n")
            return code
        sys.stdout.write(f"labgrid coordinator {address} (LG_COORDINATOR):\n")
        return max(code, _labgrid_places(address))
    entries = StaticSource.from_args(args.inventory, args.board).entries
    reports, servers = preflight(entries, args.check, args.chipset, runner, args.idle_timeout,
                                 lab_server(args.adb_server))
    sys.stdout.write(render(reports) + servers)
    return EXIT_INFRA if any(report.problems for report in reports) else 0


def _default_server(flag: str | None) -> tuple[str, str]:
    """(HOST:PORT, where it came from) of the adb server `hil boards` lists by default."""
    import os

    from hil.adbaddress import CHOICE_ENV, DEFAULT_SERVER, OWN_SERVER, lab_server_from_env

    address = lab_server(flag)
    if address == OWN_SERVER:
        raise UsageError("hil boards --adb-server own: hil's private server holds no board until a "
                         "run connects one; name the boards with --inventory or --board")
    if address is None:
        return DEFAULT_SERVER, "adb's default"
    if flag:
        return address, "--adb-server"
    if os.environ.get(CHOICE_ENV):
        return address, CHOICE_ENV
    assert address == lab_server_from_env()
    socket = os.environ.get("ADB_SERVER_SOCKET", "").strip()
    return address, "ADB_SERVER_SOCKET" if socket else "ANDROID_ADB_SERVER_ADDRESS/PORT"


def _default_server_boards(flag: str | None) -> int:
    """The serial and state of every board the default adb server sees (exit 2 when it does
    not answer: hil starts no server of its own for this)."""
    from hil.adbserver import LabAdbServer
    from hil.errors import InfraError

    address, source = _default_server(flag)
    server = LabAdbServer(address, socket_timeout=10.0)
    try:
        server.start()
        devices = server.devices()
    except InfraError as exc:
        sys.stderr.write(f"hil boards: {exc}\n")
        return EXIT_INFRA
    sys.stdout.write(f"adb server {address} ({source}): {len(devices)} board(s)\n")
    if devices:
        width = max(len("serial"), *(len(serial) for serial, _ in devices))
        sys.stdout.write(f"{'serial':<{width}}  state\n")
        for serial, state in devices:
            sys.stdout.write(f"{serial:<{width}}  {state}\n")
        sys.stdout.write("(hil boards --board SERIAL --check: the full preflight of one)\n")
    return 0


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
