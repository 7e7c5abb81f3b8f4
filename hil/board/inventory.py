"""The board inventory: which boards a lab has, how to reach, watch and power them.

```yaml
boards:
  - name: e9955-a                 # required, [A-Za-z0-9._-], unique
    adb: R3CX40ABCDE              # required: adb serial or host:port (network adb)
    adb_server: lab-host-2:5037   # optional: the adb server that owns it (default: see servers.py)
    chipset: E9955                # required: what getprop must report
    console: /dev/ttyUSB0         # optional: a device path, socket://host:port, rfc2217://host:port
    console_baud: 115200          # optional (default 115200)
    power:                        # optional: one argv (or one string, split like a shell) per action
      off: [usbrelay, BITFT_1=0]
      on: [usbrelay, BITFT_1=1]
      cycle: [pdu-ctl, cycle, "3"]    # optional: default off, wait, on
      bootloader: [lab-ctl, fastboot-boot, a]   # optional: a cycle that comes up in fastboot
    tags: [lab-a, nightly]        # optional
    runner_profile: hil           # optional: upstream | hil (what its runner can execute)
    images: {boot: boot.img}      # optional, with flash_order, expected_build, product,
    fastboot: R3CX40ABCDE         #   fastboot: what it should run (hil/board/images.py)
  - name: e9965-b
    adb: 192.168.1.50:5555
    chipset: E9965
    power: {relay: /dev/ttyUSB1, channel: 2}   # a USB serial relay (LCUS protocol)
  - name: lab1-a                  # a labgrid place instead of `adb:` (hil run --labgrid HOST:PORT);
    labgrid: {place: lab1-a}      # or {tags: {soc: e9955}, count: 2}; adb, console and power
                                  # come from the place's resources (hil/pool/labgrid.py)
```

Entries are plain validated records (what a board is); the drivers in `adb.py`,
`console.py` and `power.py` take them. Every error names the file, the entry and the field.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hil.adbaddress import parse_server
from hil.board.images import Provisioning, parse_provisioning
from hil.board.inventory_fields import (
    ADB_ENTRY_FIELDS,
    LABGRID_ENTRY_FIELDS,
    LABGRID_FIELDS,
    POWER_COMMAND_FIELDS,
    RELAY_FIELDS,
)
from hil.board.labgrid_spec import LabgridRequest, check_tags
from hil.board.power import CommandPower, PowerControl, SerialRelayPower
from hil.board.spec import BoardSpec, parse_boards
from hil.document import yaml_error_line
from hil.errors import UsageError, Where, cause_in_words, closest, unknown_name
from hil.fields import names
from hil.runner.profiles import PROFILES

CHIPSETS = ("E9955", "E9965")
NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_ADB = re.compile(r"^(?:[A-Za-z0-9._-]{1,64}|[A-Za-z0-9.-]{1,253}:\d{1,5})$")
_CONSOLE_SCHEMES = ("socket://", "rfc2217://")
_FIELDS = ADB_ENTRY_FIELDS
_LABGRID_FIELDS = LABGRID_ENTRY_FIELDS
"""An entry that is a labgrid place (`labgrid:` instead of `adb:`): hil/pool/labgrid.py."""
_POWER_COMMANDS = tuple(field.name for field in POWER_COMMAND_FIELDS)
_RELAY_FIELDS = names(RELAY_FIELDS)
_PLACE_FIELDS = names(LABGRID_FIELDS)


@dataclass(frozen=True)
class InventoryEntry:
    """One board: identity and the resources to reach it."""

    name: str
    """Unique name, used in results and log file names."""
    adb: str
    """adb serial or `host:port`; empty for a virtual board hil starts itself."""
    chipset: str | None = None
    """The chipset getprop must report; None: whatever the run targets."""
    console: str | None = None
    """Serial console URL (a device path, `socket://`, `rfc2217://`)."""
    console_baud: int = 115200
    """Console baud rate."""
    power: PowerControl | None = None
    """How to switch its power; None: no power control (the ladder stops at reboot)."""
    tags: tuple[str, ...] = ()
    """Free-form labels."""
    virtual: bool = False
    """A virtual board that hil starts and stops (`--board virtual`)."""
    adb_server: str | None = None
    """`HOST:PORT` of the adb server the board belongs to (a lab's; hil only uses it);
    None: decided by `hil.board.servers`."""
    runner_profile: str | None = None
    """What its runner can execute (`hil/runner/profiles.py`); None: learnt otherwise."""
    labgrid: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    """For a labgrid place (hil/pool/labgrid.py): coordinator, place, exporter, host,
    reservation, holder, tags — recorded as results.json `run.boards[].labgrid`."""
    provisioning: Provisioning | None = field(default=None, compare=False, hash=False)
    """Its known-good images and expected build (hil/board/images.py); None: not provisioned."""

    @property
    def network(self) -> bool:
        """Reached with `adb connect` rather than over USB."""
        return ":" in self.adb

    @property
    def key(self) -> str:
        """The board's adb id, with `@SERVER` when the entry names its server."""
        return f"{self.adb}@{self.adb_server}" if self.adb_server else self.adb


def load_inventory(path: Path) -> list[InventoryEntry]:
    """Parse and validate an inventory file: its boards reached over adb (its labgrid
    entries: `load_lab_inventory`)."""
    return load_lab_inventory(path)[0]


def load_lab_inventory(path: Path) -> tuple[list[InventoryEntry], list[LabgridRequest]]:
    """Parse and validate an inventory file: the boards reached over adb, and the entries
    that ask a labgrid coordinator for a place (`labgrid: {place: NAME}` or
    `labgrid: {tags: {KEY: VALUE}, count: N}`)."""
    if not path.is_file():
        raise UsageError(f"--inventory: file not found: {path}")
    where = Where(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{yaml_error_line(path, exc)} (not a readable YAML inventory)") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not a readable YAML inventory: {cause_in_words(exc)}") from exc
    if not isinstance(data, dict) or set(data) != {"boards"}:
        raise where.error("top level", "expected a mapping with only a 'boards' list")
    raw = data["boards"]
    if not isinstance(raw, list) or not raw:
        raise where.error("boards", "expected a non-empty list of boards")
    entries = [_entry(path, index, item) for index, item in enumerate(raw)
               if not (isinstance(item, dict) and "labgrid" in item)]
    requests = [_labgrid_entry(path, index, item) for index, item in enumerate(raw)
                if isinstance(item, dict) and "labgrid" in item]
    names = [e.name for e in entries] + [r.label for r in requests]
    duplicates = sorted({v for v in names if names.count(v) > 1})
    if duplicates:
        raise where.error("boards", f"name {duplicates[0]!r} appears twice")
    boards = [e.key for e in entries]
    duplicates = sorted({v for v in boards if boards.count(v) > 1})
    if duplicates:
        raise where.error("boards", f"adb {duplicates[0]!r} appears twice")
    return entries, requests


def _named(path: Path, index: int, item: dict[str, Any]) -> tuple[str, Where]:
    """An entry's checked `name`, and where its errors point from then on."""
    where = Where(path, f"boards[{index}]")
    name = _text(where, item, "name", required=True)
    assert name is not None
    if not NAME.match(name):
        raise where.error("name", f"{name!r}: letters, digits, '.', '_' and '-' only (<= 64)")
    return name, Where(path, f"boards[{index}] ({name})")


def _labgrid_entry(path: Path, index: int, item: dict[str, Any]) -> LabgridRequest:
    """`{name, labgrid: {place: NAME} | {tags: {K: V}, count: N}, chipset?, runner_profile?}`."""
    name, where = _named(path, index, item)
    unknown = set(item) - _LABGRID_FIELDS
    if unknown:
        raise where.error(sorted(unknown)[0], "not for a labgrid entry (allowed: "
                          f"{', '.join(sorted(_LABGRID_FIELDS))}; the place's exporter says the rest)")
    raw = item["labgrid"]
    if (not isinstance(raw, dict) or set(raw) - _PLACE_FIELDS
            or ("place" in raw) == ("tags" in raw)):
        raise where.error("labgrid", "expected {place: NAME} or {tags: {KEY: VALUE}, count: N}")
    count = raw.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 64:
        raise where.error("labgrid.count", f"expected 1..64, got {count!r}")
    if "place" in raw:
        if not isinstance(raw["place"], str) or count != 1:
            raise where.error("labgrid.place", "expected one place's name (no count)")
        tags = {"name": raw["place"]}
    else:
        tags = raw["tags"]
        if not isinstance(tags, dict):
            raise where.error("labgrid.tags", "expected a mapping KEY: VALUE")
        tags = {str(k): str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                for k, v in tags.items()}
    filt = check_tags(tags, f"{path}: boards[{index}] ({name}): labgrid")
    chipset = _text(where, item, "chipset", required=False)
    if chipset is not None and chipset not in CHIPSETS:
        raise where.error("chipset", f"{chipset!r}: expected one of {', '.join(CHIPSETS)}")
    runner_profile = _text(where, item, "runner_profile", required=False)
    if runner_profile is not None and runner_profile not in PROFILES:
        raise where.error("runner_profile", f"{runner_profile!r}: expected one of {', '.join(PROFILES)}")
    return LabgridRequest(label=name, tags=filt, count=count, chipset=chipset,
                          runner_profile=runner_profile,
                          provisioning=parse_provisioning(where, item, path.resolve().parent,
                                                          endpoint_given=True))


def _text(where: Where, item: dict[str, Any], field: str, required: bool) -> str | None:
    value = item.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise where.error(field, "required, a non-empty string" if required else "expected a string")
    return value.strip()


def _entry(path: Path, index: int, item: Any) -> InventoryEntry:
    if not isinstance(item, dict):
        raise Where(path, f"boards[{index}]").error("entry", "expected a mapping")
    name, where = _named(path, index, item)
    unknown = set(item) - _FIELDS
    if unknown:
        raise where.error(sorted(unknown)[0], unknown_name(sorted(unknown)[0], _FIELDS))
    adb = _text(where, item, "adb", required=True)
    assert adb is not None
    if not _ADB.match(adb):
        raise where.error("adb", f"{adb!r} is not an adb serial or host:port")
    adb_server = _text(where, item, "adb_server", required=False)
    if adb_server is not None:
        try:
            parse_server(adb_server, "adb_server")
        except UsageError as exc:
            raise where.error("adb_server", f"{adb_server!r} is not an adb server HOST:PORT") from exc
    chipset = _text(where, item, "chipset", required=True)
    if chipset not in CHIPSETS:
        raise where.error("chipset", f"{chipset!r}: expected one of {', '.join(CHIPSETS)}")
    console = _text(where, item, "console", required=False)
    if console is not None and "://" in console and not console.startswith(_CONSOLE_SCHEMES):
        raise where.error("console", f"{console!r}: a device path, socket:// or rfc2217:// URL")
    baud = item.get("console_baud", 115200)
    if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
        raise where.error("console_baud", f"expected a positive integer, got {baud!r}")
    tags = item.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise where.error("tags", "expected a list of strings")
    runner_profile = _text(where, item, "runner_profile", required=False)
    if runner_profile is not None and runner_profile not in PROFILES:
        raise where.error("runner_profile", f"{runner_profile!r}: expected one of {', '.join(PROFILES)}")
    return InventoryEntry(
        name=name, adb=adb, chipset=chipset, console=console, console_baud=baud,
        power=_power(where, item.get("power")), tags=tuple(tags), adb_server=adb_server,
        runner_profile=runner_profile, provisioning=parse_provisioning(where, item, path.resolve().parent),
    )


def _argv(where: Where, field: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise where.error(field, f"cannot split the command: {exc}") from exc
    elif isinstance(value, list) and all(isinstance(a, (str, int, float)) for a in value):
        argv = [str(a) for a in value]
    else:
        raise where.error(field, "expected a command: a list of arguments or a string")
    if not argv:
        raise where.error(field, "empty command")
    return tuple(argv)


def _power(where: Where, raw: Any) -> PowerControl | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise where.error("power", "expected a mapping: {on, off, cycle} commands or {relay, channel}")
    # YAML 1.1 reads the keys `on` and `off` as booleans
    raw = {({True: "on", False: "off"}.get(k, k) if isinstance(k, bool) else k): v
           for k, v in raw.items()}
    if "relay" in raw:
        unknown = set(raw) - _RELAY_FIELDS
        if unknown:
            raise where.error(f"power.{sorted(unknown)[0]}", "unknown field")
        url = raw["relay"]
        if not isinstance(url, str) or not url:
            raise where.error("power.relay", "expected a serial device path or URL")
        channel = raw.get("channel", 1)
        if not isinstance(channel, int) or isinstance(channel, bool) or not 1 <= channel <= 8:
            raise where.error("power.channel", f"expected 1..8, got {channel!r}")
        baud = raw.get("baud", 9600)
        if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
            raise where.error("power.baud", f"expected a positive integer, got {baud!r}")
        inverted = raw.get("inverted", False)
        if not isinstance(inverted, bool):
            raise where.error("power.inverted", "expected true or false")
        return SerialRelayPower(url, channel, baud, inverted)
    unknown = set(raw) - set(_POWER_COMMANDS)
    if unknown:
        raise where.error(f"power.{sorted(unknown)[0]}",
                          "unknown field (on, off, cycle, bootloader, or relay)")
    commands = {key: _argv(where, f"power.{key}", raw[key]) for key in _POWER_COMMANDS if key in raw}
    if "cycle" not in commands and not {"on", "off"} <= commands.keys():
        raise where.error("power", "needs a cycle command, or both on and off")
    return CommandPower(commands.get("on"), commands.get("off"), commands.get("cycle"),
                        bootloader_argv=commands.get("bootloader"))


def select_boards(
    inventory: Sequence[InventoryEntry], board_args: Sequence[str]
) -> list[InventoryEntry]:
    """The boards of a run or a `hil boards`: the inventory's, narrowed by `--board` values
    that name an entry (by name or adb id); other `--board` values add boards of their own
    (`virtual`, a serial, `host:port`). Without either: one virtual board."""
    for arg in board_args:
        _refuse_a_near_miss(arg, inventory)
    if not inventory:
        return from_specs(parse_boards(board_args))
    by_key = ({e.name: e for e in inventory} | {e.adb: e for e in inventory}
              | {e.key: e for e in inventory})
    chosen = [by_key[arg] for arg in board_args if arg in by_key] if board_args else list(inventory)
    extra = [arg for arg in board_args if arg not in by_key]
    if extra:
        chosen += from_specs(parse_boards(extra))
    names = [e.name for e in chosen]
    if len(set(names)) != len(names):
        raise UsageError("--board: the same board is named twice")
    return chosen


def _refuse_a_near_miss(arg: str, inventory: Sequence[InventoryEntry]) -> None:
    """A `--board` value one typo away from `virtual` or an inventory board's name is a usage
    error that suggests it: taken as it is, it would be an adb serial nobody has, and the
    user would be told to start adb."""
    names = [e.name for e in inventory]
    if arg in names or any(arg in (e.adb, e.key) for e in inventory):
        return
    head = arg.partition(":")[0]
    if head != "virtual" and closest(head.lower(), ["virtual"]):
        suggestion = "virtual" + arg[len(head):]
    else:
        close = closest(arg, names, cutoff=0.8)
        if close is None:
            return
        suggestion = close
    raise UsageError(f"--board {arg}: no such board; did you mean {suggestion!r}? (a value hil "
                     "does not know is taken as an adb serial)")


def from_specs(specs: Sequence[BoardSpec]) -> list[InventoryEntry]:
    """Inventory entries for `--board` specs: named `virtual-<i>` for virtual boards, by
    their adb id (`@SERVER` when given) otherwise."""
    entries = []
    virtual_index = 0
    for spec in specs:
        if spec.virtual:
            entries.append(InventoryEntry(name=f"virtual-{virtual_index}", adb="", virtual=True))
            virtual_index += 1
        else:
            name = f"{spec.adb}@{spec.adb_server}" if spec.adb_server else spec.adb
            entries.append(InventoryEntry(name=name, adb=spec.adb, adb_server=spec.adb_server))
    return entries
