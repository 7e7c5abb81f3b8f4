"""`hil flash`: put the inventory's known-good images on boards (hil/provision), each board in a
thread of its own under its lease, and say per board which steps ran and how long they took.

Exit codes: 0 every board flashed (or, with `--if-needed`, already at its build) · 2 a flash
failed (the step is named) · 3 bad usage or inventory (a board without images, an image file
missing).
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.board.inventory import InventoryEntry, load_inventory, select_boards
from hil.errors import InfraError, UsageError, Where
from hil.verdict import EXIT_INFRA, EXIT_OK


def check_images(entries: Sequence[InventoryEntry], inventory: str | None) -> None:
    """UsageError naming the inventory, the board and the field when an image file of a board
    is missing or empty: a typo is the user's to fix before any board leaves adb."""
    for entry in entries:
        provisioning = entry.provisioning
        if provisioning is None:
            continue
        where = Where(Path(inventory or "inventory"), f"board {entry.name}")
        for image in provisioning.images:
            if not image.path.is_file():
                raise where.error(f"images.{image.partition}", f"{image.path}: no such file")
            if image.path.stat().st_size == 0:
                raise where.error(f"images.{image.partition}", f"{image.path}: empty file")


def cmd_flash(args: argparse.Namespace) -> int:
    """`hil flash`: flash the chosen boards; one line per step, a verdict per board."""
    from hil.commands.common import lab_server

    for name in ("idle_timeout", "boot_timeout", "flash_timeout"):
        if not 0 < getattr(args, name) < math.inf:  # nan and inf are out too
            raise UsageError(f"--{name.replace('_', '-')}: {getattr(args, name)} is out of range")
    if args.board_wait < 0:
        raise UsageError(f"--board-wait: {args.board_wait} is out of range")
    entries = select_boards(load_inventory(Path(args.inventory)), args.board)
    chosen = [e for e in entries if e.provisioning is not None and e.provisioning.flashable]
    for entry in entries:
        if entry not in chosen:
            if args.board:
                raise UsageError(f"--board {entry.name}: no images in {args.inventory}")
            sys.stdout.write(f"{entry.name}: no images in the inventory: skipped\n")
    if not chosen:
        raise UsageError(f"{args.inventory}: no board has images to flash")
    check_images(chosen, args.inventory)
    from hil.board.servers import BoardServers

    results: dict[str, dict[str, Any]] = {}
    with BoardServers(lab_server(args.adb_server)) as servers:
        threads = [threading.Thread(target=_flash_one, args=(entry, args, servers, results),
                                    name=f"flash-{entry.name}", daemon=True) for entry in chosen]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    failed = False
    for entry in chosen:
        outcome = results.get(entry.name) or {"error": "no outcome (interrupted?)"}
        sys.stdout.write(render_outcome(entry.name, outcome))
        failed = failed or bool(outcome.get("error"))
    return EXIT_INFRA if failed else EXIT_OK


def _flash_one(entry: InventoryEntry, args: argparse.Namespace, servers: Any,
               results: dict[str, dict[str, Any]]) -> None:
    """Lease, reach and flash one board; its outcome in `results[name]`."""
    from hil.board.lease import acquire

    try:
        lease = acquire(servers.lease_key(entry), f"flash-{uuid.uuid4().hex[:8]}", args.board_wait)
    except InfraError as exc:
        results[entry.name] = {"error": str(exc)}
        return
    try:
        results[entry.name] = flash_board(entry, args, servers)
    except InfraError as exc:
        results[entry.name] = {**getattr(exc, "report", {}), "error": str(exc)}
    finally:
        lease.release()


def flash_board(entry: InventoryEntry, args: argparse.Namespace, servers: Any) -> dict[str, Any]:
    """One board: its build read, then (unless `--if-needed` finds it at its build) its flash.
    A board adb cannot reach is flashed all the same when it is in fastboot already, or has
    power control (hil/provision/flasher.py)."""
    from hil.board.adb import AdbBoard
    from hil.board.preflight import VIRTUAL_RUNNER, connect
    from hil.board.recovery import Recovery
    from hil.provision import Provisioner, flasher_for, needs_flash, read_build

    provisioning = entry.provisioning
    assert provisioning is not None
    server = servers.server_for(entry)
    try:
        device = connect(entry, server, entry.adb, args.idle_timeout)
    except InfraError:  # down: the flash's first step finds another way in, or says why not
        device = server.client.device(serial=entry.adb)
    board = AdbBoard(entry.name, entry.adb, device, "flash", VIRTUAL_RUNNER, args.idle_timeout,
                     args.idle_timeout)
    adb = Recovery(board, servers.keeper_for(server), server.connect, server.disconnect,
                   network=entry.network, power=entry.power, idle_s=args.idle_timeout,
                   boot_s=args.boot_timeout)
    before = read_build(adb, provisioning)
    if args.if_needed and not needs_flash(provisioning, before):
        return {"before": before, "after": before, "steps": [], "skipped": True}
    flasher = flasher_for(provisioning, args.flash_timeout)
    return Provisioner(entry.name, provisioning, flasher, adb, entry.power,
                       args.boot_timeout).flash("hil flash", before)


def render_outcome(name: str, outcome: dict[str, Any]) -> str:
    """A board's flash as lines: each step with its time, then the verdict."""
    lines = [f"{name}: {s['step']}: {'ok' if s['ok'] else 'FAILED'} ({s['seconds']:.2f} s)"
             + (f" {s['message']}" if s.get("message") else "")  # how: "power-cycled into ..."
             for s in outcome.get("steps") or []]
    if outcome.get("error"):
        lines.append(f"{name}: FAILED: {outcome['error']}")
    elif outcome.get("skipped"):
        lines.append(f"{name}: already at the expected build {outcome.get('before')!r}: nothing flashed")
    else:
        lines.append(f"{name}: flashed {', '.join(outcome.get('written') or [])}; build "
                     f"{outcome.get('before')!r} -> {outcome.get('after')!r}")
    return "\n".join(lines) + "\n"
