"""Preflight: is a board what the inventory says, and fit to run cases?

`inspect_board` asks the board (through adb, every call time-limited) for its chipset
(`getprop`: `ro.soc.model`, then `ro.hardware.chipname`, `ro.board.platform`), its
architecture, the free space in `/data/local/tmp`, whether the ENN vendor library is there
(without it the real runner segfaults) and which runner is installed, and opens its console.
`hil boards` prints the reports as a table; `hil run` refuses a board with a problem.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import re
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from adbutils import AdbDevice

from hil.attention import check_state
from hil.board.adb import ADB_ERRORS, CHIPSET_PROPS, AdbBoard, chipset_from_props
from hil.board.console import probe_console
from hil.board.inventory import InventoryEntry
from hil.board.recovery import SILENT_S, ServerKeeper, refuse_if_adbd_silent
from hil.board.watchdog import bounded
from hil.errors import InfraError

if TYPE_CHECKING:
    from hil.board.servers import Server

log = logging.getLogger(__name__)

VIRTUAL_RUNNER = Path(__file__).parents[1] / "virtual" / "runner_front.py"
"""What hil installs as `enn_executor_runner` on a virtual board."""

WORK_PARENT = "/data/local/tmp"
"""The folder hil's device root lives in (always there on Android)."""
MIN_FREE_BYTES = 256 * 1024 * 1024
"""Less free space than this in /data/local/tmp is a problem (models, inputs, outputs)."""
ARCHITECTURE = "aarch64"
VENDOR_LIB = "libenn_public_api_cpp.so"
VENDOR_LIB_DIRS = ("/system/lib64", "/system_ext/lib64", "/odm/lib64", "/vendor/lib64", "/product/lib64")
"""Where the runner, started from /data/local/tmp, finds ENN's library by its bare name, in the
linker's order: a program there runs in linkerconfig's `[unrestricted]` section, whose default
namespace searches `/system`, `/system_ext`, `/odm`, `/vendor`, `/product` (each `/${LIB}`:
AOSP `system/linkerconfig`, `contents/namespace/unrestricteddefault.cc`)."""
OLDER_LINKER_DIRS = ("/system/lib64", "/odm/lib64", "/vendor/lib64")
"""The same section of an older linkerconfig (the same file before `/system_ext` and `/product`
were added): assumed when the board's own configuration cannot be read."""
VENDOR_LIBS = tuple(f"{folder}/{VENDOR_LIB}" for folder in VENDOR_LIB_DIRS)
LINKER_CONFIG = "/linkerconfig/ld.config.txt"
"""The linker configuration linkerconfig generates at boot (Android 11 and later)."""


@dataclass
class BoardReport:
    """What preflight found out about one board; `problems` empty means fit."""

    name: str
    adb: str
    expected_chipset: str | None
    state: str = "-"
    chipset: str | None = None
    chipset_source: str = ""
    """The property that named it, e.g. `ro.soc.model=S5E9965`."""
    architecture: str = "-"
    free_bytes: int | None = None
    vendor_lib: str | None = None
    """Where `libenn_public_api_cpp.so` was found in a folder the linker searches; None when
    nowhere there."""
    linker_dirs: tuple[str, ...] = VENDOR_LIB_DIRS
    """The library folders this board's linker searches for a program in /data/local/tmp."""
    vendor_lib_unsearched: str | None = None
    """Where the library was found instead, in a folder that linker does not search."""
    runner: str = "-"
    console: str = "-"
    virtual: bool = False
    problems: list[str] = field(default_factory=list)

    def row(self) -> list[str]:
        """The table row: name, adb, chipset, state, free, vendor lib, runner, console."""
        chipset = self.chipset or "?"
        if self.expected_chipset and self.chipset and self.chipset != self.expected_chipset:
            chipset = f"{self.chipset} (inventory: {self.expected_chipset})"
        return [
            self.name + (" (VIRTUAL)" if self.virtual else ""),
            self.adb or "-",
            chipset if self.state == "device" else "-",
            self.state,
            _size(self.free_bytes),
            "-" if self.state != "device" else (
                "yes" if self.vendor_lib else "NOT SEARCHED" if self.vendor_lib_unsearched else "MISSING"),
            self.runner,
            self.console,
        ]


HEADER = ["name", "adb", "chipset", "state", "free /data/local/tmp", "ENN vendor lib",
          "runner", "console"]


def _size(value: int | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


def identity_problems(report: BoardReport, run_chipset: str | None) -> list[str]:
    """Why a board whose identity was read cannot serve a run targeting `run_chipset`."""
    problems = []
    source = f" ({report.chipset_source})" if report.chipset_source else ""
    if report.chipset is None:
        problems.append(f"chipset unknown: none of {', '.join(CHIPSET_PROPS)} names an Exynos SoC")
    elif report.expected_chipset and report.chipset != report.expected_chipset:
        problems.append(
            f"chipset mismatch: getprop says {report.chipset}{source}, "
            f"the inventory says {report.expected_chipset}"
        )
    elif run_chipset and report.chipset != run_chipset:
        problems.append(
            f"chipset {report.chipset}{source}, but the run targets {run_chipset} (--chipset)"
        )
    if report.architecture != ARCHITECTURE:
        problems.append(f"architecture {report.architecture}, expected {ARCHITECTURE}")
    if report.vendor_lib is None and report.vendor_lib_unsearched is not None:
        problems.append(
            f"ENN vendor library found only at {report.vendor_lib_unsearched}, where this board's "
            f"linker does not search for a program in {WORK_PARENT} (it searches "
            f"{', '.join(report.linker_dirs)}): the runner would crash (Lib load failed.)"
        )
    elif report.vendor_lib is None:
        problems.append(
            f"ENN vendor library {VENDOR_LIB} missing from {', '.join(report.linker_dirs)}: the runner "
            "would crash (Lib load failed.)"
        )
    if report.free_bytes is not None and report.free_bytes < MIN_FREE_BYTES:
        problems.append(f"only {_size(report.free_bytes)} free in /data/local/tmp")
    return problems


def inspect_board(
    board: AdbBoard,
    entry: InventoryEntry,
    run_chipset: str | None = None,
    runner: Path | None = None,
    console: bool = True,
) -> BoardReport:
    """Preflight one reachable board. Adb failures become problems (state `error`)."""
    report = BoardReport(entry.name, board.address, entry.chipset)
    try:
        report.problems += feature_problems(board)  # first: every later look is a v2 shell
        if report.problems:
            report.state = "error"
            return report
        _identity(board, report)
        report.problems += identity_problems(report, run_chipset)
        report.runner = _runner_state(board, VIRTUAL_RUNNER if report.virtual else runner)
    except InfraError as exc:
        report.state = "error"
        report.problems.append(str(exc))
    if console:
        report.console = check_console(entry, report)
    return report


REQUIRED_FEATURES = {"shell_v2": "the runner's exit status and its stderr apart from stdout "
                                 "(adbd of Android 7 and later)"}
"""adbd features hil cannot work without, and what each gives it."""


def feature_problems(board: AdbBoard) -> list[str]:
    """A problem per required adbd feature the board does not offer (`adb features`)."""
    try:
        offered = set(bounded(board.device.get_features, board.idle_timeout_s, "adb features").split(","))
    except ADB_ERRORS as exc:
        raise InfraError(f"adb features: {exc}") from exc
    return [f"adbd does not offer {name}: hil needs it for {why}"
            for name, why in REQUIRED_FEATURES.items() if name not in offered]


def _identity(board: AdbBoard, report: BoardReport) -> None:
    props = board.properties()
    report.state = "device"
    report.virtual = props.get("ro.hil.virtual") == "1"
    report.chipset = chipset_from_props(props)
    report.chipset_source = next(
        (f"{key}={props[key]}" for key in CHIPSET_PROPS
         if key in props and chipset_from_props({key: props[key]}) == report.chipset),
        "",
    )
    report.architecture = board.shell(["uname", "-m"]).stdout.strip() or "?"
    config = board.shell(["cat", LINKER_CONFIG])
    report.linker_dirs = (linker_search_dirs(config.stdout, WORK_PARENT) if config.returncode == 0
                          else None) or OLDER_LINKER_DIRS
    found = board.shell(["ls", "-d", *VENDOR_LIBS]).stdout.split()
    present = [path for path in VENDOR_LIBS if path in found]
    report.vendor_lib = next((path for path in present
                              if path.rpartition("/")[0] in report.linker_dirs), None)
    report.vendor_lib_unsearched = None if report.vendor_lib or not present else present[0]
    df = board.shell(["df", "-k", WORK_PARENT])
    report.free_bytes = _free_bytes(df.stdout)


def linker_search_dirs(config: str, program_dir: str) -> tuple[str, ...] | None:
    """The 64-bit library folders the default namespace searches for a program in
    `program_dir`, read from a linker configuration as linkerconfig writes it, as bionic's
    linker reads it (`linker/linker_config.cpp`): the first `dir.SECTION = PATH` line, before
    any section, that `program_dir` is under, then that section's
    `namespace.default.search.paths` (`=`, then each `+=`), `${LIB}` being `lib64`. None when
    the configuration names no such section."""
    section = None
    paths: list[str] = []
    current = None
    for raw in config.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            continue
        key, plus, value = line.partition("+=") if "+=" in line else line.partition("=")
        key, value = key.strip(), value.strip().rstrip("/")
        if current is None and section is None and key.startswith("dir.") and value \
                and (program_dir.rstrip("/") + "/").startswith(value + "/"):
            section = key.removeprefix("dir.")
        elif current is not None and current == section and key == "namespace.default.search.paths" \
                and value:
            paths = [*paths, value.replace("${LIB}", "lib64")] if plus else [value.replace("${LIB}", "lib64")]
    return tuple(paths) or None


def _free_bytes(df_output: str) -> int | None:
    """Available bytes from `df -k` output (toybox and coreutils alike)."""
    lines = [line for line in df_output.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    fields = lines[-1].split()
    numbers = [f for f in fields[1:] if re.fullmatch(r"\d+", f)]
    return int(numbers[2]) * 1024 if len(numbers) >= 3 else None


def _runner_state(board: AdbBoard, runner: Path | None) -> str:
    installed = board.runner_sha256()
    if installed is None:
        return "not installed"
    if runner is None:
        return f"installed ({installed[:12]})"
    local = hashlib.sha256(runner.read_bytes()).hexdigest()
    if installed == local:
        return f"up to date ({installed[:12]})"
    return f"outdated ({installed[:12]}, will be replaced)"


def check_console(entry: InventoryEntry, report: BoardReport) -> str:
    """`none`, `ok`, or `error` (with a problem added to the report)."""
    if not entry.console:
        return "none"
    try:
        return probe_console(entry.console, entry.console_baud)
    except InfraError as exc:
        report.problems.append(str(exc))
        return "error"


def render(reports: list[BoardReport]) -> str:
    """The plain-text table, then one line per problem."""
    rows = [HEADER] + [report.row() for report in reports]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    for report in reports:
        lines += [f"{report.name}: {problem}" for problem in report.problems]
    return "\n".join(lines) + "\n"


def connect(entry: InventoryEntry, server: Server, address: str, timeout_s: float) -> AdbDevice:
    """The adbutils device of a board: `adb connect` for a network board, else wait until
    the USB board is `device`. InfraError naming the state when it does not get there;
    BoardFrozen at once for a network board whose adbd accepts a connection but does not
    answer (`adbd_probe.py`; asked when the server runs on this host), which `adb connect`
    would wait for until `timeout_s`."""
    if ":" in address:
        if server.on_this_host:
            refuse_if_adbd_silent(address, min(SILENT_S, timeout_s), f"{entry.name} ({address})")
        return server.connect(address, timeout=timeout_s)
    device = server.client.device(serial=address)
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        try:
            state = bounded(device.get_state, timeout_s, "adb get-state")
        except (InfraError, *ADB_ERRORS) as exc:
            state = str(exc) or type(exc).__name__
        if state == "device":
            return device
        check_state(f"{entry.name} ({address})", state)
        time.sleep(0.2)
    raise InfraError(f"{entry.name} ({address}): state {state!r}, not 'device'")


def connect_keeping_server(
    entry: InventoryEntry, server: Server, keeper: ServerKeeper, address: str, timeout_s: float
) -> AdbDevice:
    """`connect`, once more when the adb server died meanwhile and `keeper` restarted it
    (hil's own server: adb 29.0.6 segfaulted once while four boards came up in a soak, and
    every board was "not usable"). A board that is simply unreachable is not waited for
    twice; a lab's server is never restarted (its death is the board's error)."""
    restarts = keeper.restarts
    try:
        return connect(entry, server, address, timeout_s)
    except InfraError:
        with contextlib.suppress(InfraError):  # a lab's server refuses to be restarted
            keeper.ensure_alive()
        if keeper.restarts == restarts:
            raise
    log.warning("%s: the adb server died while the board came up: connecting again", entry.name)
    return connect(entry, server, address, timeout_s)


def preflight(
    entries: list[InventoryEntry],
    check: bool,
    run_chipset: str | None,
    runner: Path | None,
    idle_s: float,
    lab_server: str | None = None,
) -> tuple[list[BoardReport], str]:
    """`hil boards`: connect every board (starting virtual ones), and with `check` inspect
    them fully; without, only reachability and identity. Also returns a line per adb server
    used: which it is and what it sees (`describe_servers`)."""
    from hil.board.servers import BoardServers, describe_servers
    from hil.virtual.launcher import start_virtual_board

    reports = []
    with BoardServers(lab_server) as servers, ExitStack() as stack:
        for entry in entries:
            address = entry.adb
            if entry.virtual:
                root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hil-boards-")))
                process = stack.enter_context(
                    start_virtual_board(root, run_chipset or "E9955", entry.name)
                )
                address = process.address
                if process.console:
                    entry = dataclasses.replace(entry, console=process.console)
            try:
                server = servers.server_for(entry)
                device = connect(entry, server, address, idle_s)
            except InfraError as exc:
                report = BoardReport(entry.name, address, entry.chipset, state="unreachable")
                report.problems.append(str(exc))
                report.console = check_console(entry, report) if check else "-"
                reports.append(report)
                continue
            board = AdbBoard(entry.name, address, device, "preflight", runner or VIRTUAL_RUNNER,
                             timeout_s=idle_s, idle_timeout_s=idle_s)
            if check:
                reports.append(inspect_board(board, entry, run_chipset, runner))
            else:
                reports.append(_identify(board, entry))
        described = describe_servers(servers, entries)
    return reports, described


def _identify(board: AdbBoard, entry: InventoryEntry) -> BoardReport:
    report = BoardReport(entry.name, board.address, entry.chipset)
    try:
        _identity(board, report)
    except InfraError as exc:
        report.state = "error"
        report.problems.append(str(exc))
    if report.expected_chipset and report.chipset and report.chipset != report.expected_chipset:
        report.problems += identity_problems(report, None)[:1]
    report.console = entry.console or "none"
    return report
