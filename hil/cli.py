"""The `hil` command. Heavy modules (torch, executorch) are imported only by the sub-commands
that need them, so `hil --help` starts fast.

A sub-command is its `COMMANDS` entry, its help record (hil/commands/manual.py: summary,
description, examples, exit codes) and its options, added in `build_parser` to the parser
`add_command` makes from that record. `run` and `localize` sort their options into argument
groups (`RunGroups`): a new option of theirs goes into the group it belongs to.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from hil import __version__, workflow_safe
from hil.commands.common import CHIPSET_CHOICES, DRIFT_FLOOR_DB, FLOW_CHOICES, add_regression_options
from hil.commands.help import VERBOSE_AFTER, add_command
from hil.commands.manual import COMMAND_HELP
from hil.errors import InfraError, UsageError
from hil.verdict import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_USAGE

COMMANDS = {
    "run": ("hil.commands.run", "cmd_run"),
    "localize": ("hil.commands.localize", "cmd_localize"),
    "boards": ("hil.commands.boards", "cmd_boards"),
    "lower": ("hil.commands.lower", "cmd_lower"),
    "list": ("hil.commands.lower", "cmd_list"),
    "report": ("hil.commands.results", "cmd_report"),
    "merge": ("hil.commands.results", "cmd_merge"),
    "compare": ("hil.commands.results", "cmd_compare"),
    "dashboard": ("hil.commands.dashboard", "cmd_dashboard"),
    "doctor": ("hil.doctor", "command"),
    "replicate": ("hil.replicate", "command"),
    "virtual-board": ("hil.virtual.main", "run"),
    "flash": ("hil.commands.flash", "cmd_flash"),
    "bisect": ("hil.commands.bisect", "cmd_bisect"),
}
"""Each sub-command's module and function, imported only when it is the one asked for."""
LOCALIZE_OUT = "hil-localize"
"""`hil localize --out` default: its own folder, never the last run's hil-out/results.json."""
DEFAULT_BOARD_WAIT_S = 600.0
"""`--board-wait` default: how long a run waits for a board another run holds."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as a UsageError (exit 3), not exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)
@dataclass(frozen=True)
class RunGroups:
    """The argument groups of `hil run` and `hil localize`, in the order `--help` shows them."""

    cases: argparse._ArgumentGroup
    """What to pick: suites, filters, precision, flow, chipset."""
    boards: argparse._ArgumentGroup
    """Which boards, and how to reach, wait for and recover them."""
    outputs: argparse._ArgumentGroup
    """What is written where."""
    limits: argparse._ArgumentGroup
    """Deadlines, retries, latency sampling, lowering workers and the cache."""

    @classmethod
    def of(cls, parser: argparse.ArgumentParser) -> RunGroups:
        return cls(
            cases=parser.add_argument_group("cases (what to pick)"),
            boards=parser.add_argument_group("boards (which board, how to reach it)"),
            outputs=parser.add_argument_group("outputs"),
            limits=parser.add_argument_group("limits, latency and caching"),
        )


def _add_selection(parser: argparse._ActionsContainer, one_case: bool = False) -> None:
    """The case selection options (`one_case`: localize's, where --filter names the one case
    and is required, and --shard is not offered)."""
    parser.add_argument("--suite", action="append", default=[], metavar="NAME|FILE",
                        help="built-in suite (smoke, ops, models) or a manifest .yaml; repeatable "
                             "(default: smoke)")
    parser.add_argument("--pretrained", action="store_true",
                        help="models suite: load published weights (default: seeded random init)")
    if one_case:
        parser.add_argument("--filter", action="append", required=True, metavar="GLOB",
                            help="the case's id or suite.precision.id; the selection must match "
                                 "exactly one case")
    else:
        parser.add_argument("--filter", action="append", default=[], metavar="GLOB",
                            help="keep cases whose id or suite.precision.id matches; repeatable")
    parser.add_argument("--tag", action="append", default=[], metavar="GLOB",
                        help="keep cases with a tag that matches (e.g. upstream*, mlp); repeatable")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="leave out cases whose id or suite.precision.id matches; repeatable")
    if one_case:
        parser.add_argument("--precision", default=None, metavar="fp32|a8w8",
                            help="the case's precision (default: fp32; a8w8 with --against fp32)")
    else:
        parser.add_argument("--precision", default="fp32", metavar="fp32|a8w8|all",
                            help="precision(s) to run (default: fp32)")
        parser.add_argument("--shard", default="1/1", metavar="I/N",
                            help="run only shard I of N (a stable partition of the cases)")
    parser.add_argument("--flow", default="auto", metavar="|".join(FLOW_CHOICES),
                        help="lowering flow (default auto: enn with LITECORE and a real board, "
                             "else xnnpack)")
    parser.add_argument("--chipset", default="E9955", metavar="|".join(CHIPSET_CHOICES),
                        help="target Exynos chipset (default: E9955)")


def _add_adb_server(parser: argparse._ActionsContainer) -> None:
    parser.add_argument("--adb-server", metavar="HOST:PORT|own",
                        help="the lab's adb server to use, HOST:PORT or localfilesystem:/PATH "
                             "(only as a client: hil starts, kills and restarts none) for every "
                             "board hil does not start; own: hil's private server for all, USB "
                             "too (no other server may run); "
                             "default: $HIL_ADB_SERVER, adb's ADB_SERVER_SOCKET or "
                             "ANDROID_ADB_SERVER_ADDRESS/PORT, else the host's server 127.0.0.1:5037 "
                             "for USB boards and a private one for HOST:PORT")


def _add_labgrid(parser: argparse._ActionsContainer) -> None:
    parser.add_argument("--labgrid", metavar="HOST:PORT", default=None,
                        help="labgrid coordinator to reserve places from: --board "
                             "'labgrid:KEY=VALUE[,KEY=VALUE][*N]' or labgrid:place=NAME, and "
                             "inventory `labgrid:` entries (default: $LG_COORDINATOR)")


def _add_run_arguments(groups: RunGroups, out: str = "hil-out") -> None:
    """Boards, outputs, limits and caching: what `hil run` and `hil localize` share (`out`:
    the default output folder; localize has its own, so it never overwrites a run's)."""
    boards, outputs, limits = groups.boards, groups.outputs, groups.limits
    boards.add_argument("--board", action="append", default=[], metavar="SPEC",
                        help="virtual, virtual:N, an adb serial or HOST:PORT, or the name of an "
                             "--inventory board; repeatable (default: virtual, or the inventory)")
    boards.add_argument("--inventory", metavar="FILE",
                        help="board inventory YAML (name, adb, chipset, console, power, tags)")
    _add_adb_server(boards)
    _add_labgrid(boards)
    boards.add_argument("--board-wait", type=float, default=DEFAULT_BOARD_WAIT_S, metavar="S",
                        help="wait this long for a board another run holds, then leave it out "
                             f"(default: {DEFAULT_BOARD_WAIT_S:g})")
    boards.add_argument("--runner", metavar="PATH", default=os.environ.get("HIL_RUNNER"),
                        help="enn_executor_runner for real boards (default: $HIL_RUNNER, which the "
                             "exynos image sets; virtual boards bring their own)")
    boards.add_argument("--runner-profile", metavar="upstream|hil",
                        help="what every board's runner can execute: upstream (ENN + portable "
                             "kernels) or hil (+ XNNPACK and quantized kernels); also the profile "
                             "of the virtual boards hil starts (default: learnt per board: the "
                             "inventory, the virtual board, the runner's .profile.json, else upstream)")
    boards.add_argument("--idle-timeout", type=float, default=30.0, metavar="S",
                        help="a board silent this long is lost: ERROR_INFRA (default: 30)")
    boards.add_argument("--boot-timeout", type=float, default=120.0, metavar="S",
                        help="longest reboot or power cycle during recovery (default: 120)")
    _add_flash_timeout(boards)
    boards.add_argument("--virtual-link", default="none", metavar="none|usb2|usb3",
                        help="shape the virtual boards' adb link like a USB cable (default: none)")
    outputs.add_argument("--out", default=out, metavar="DIR",
                         help=f"folder for artifacts and outputs (default: {out})")
    outputs.add_argument("--keep-outputs", action="store_true",
                         help="write every case's board outputs to OUT/cases/ (default: only those "
                              "of cases that did not pass)")
    outputs.add_argument("--junit", metavar="PATH", help="JUnit XML path (default: OUT/junit.xml)")
    outputs.add_argument("--results", metavar="PATH",
                         help="results.json path (default: OUT/results.json)")
    limits.add_argument("--timeout", type=float, default=120.0, metavar="S",
                        help="per-case runner deadline in seconds (default: 120)")
    limits.add_argument("--retries", type=int, default=1, metavar="N",
                        help="retries of a case after an infrastructure error (default: 1)")
    limits.add_argument("--latency", default="quick", metavar="quick|stable",
                        help="latency profile: quick (1 sample, no warm-up: PR checks) or stable "
                             "(3 warm-ups, 30 samples, longer cool-down: nightly); a manifest's "
                             "`latency:` overrides it for its cases (default: quick)")
    limits.add_argument("--iterations", type=int, default=None, metavar="N",
                        help="runner invocations per case, one latency sample each (default: "
                             "from --latency)")
    limits.add_argument("--warmup", type=int, default=None, metavar="N",
                        help="untimed runs before each invocation's timed ones (default: from "
                             "--latency)")
    limits.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                        help="lowering worker processes (default: 2, or 1 on a 1-core machine)")
    limits.add_argument("--no-cache", action="store_true",
                        help="lower everything again; do not read or write the artifact cache")
    limits.add_argument("--cache-dir", metavar="DIR",
                        help="artifact cache (default: $HIL_CACHE_DIR or ~/.cache/exynos-hil/artifacts)")
    limits.add_argument("--virtual-device-time", metavar="measured|MS",
                        help="the virtual boards hil starts run in the off-host measuring mode "
                             "(for measuring hil itself): each program+inputs runs once on the "
                             "host runtime, later runs replay its outputs and sleep the latency "
                             "it measured (measured) or MS ms per execution (default: off)")


def _add_flash_timeout(parser: argparse._ActionsContainer) -> None:
    parser.add_argument("--flash-timeout", type=float, default=300.0, metavar="S",
                        help="limit of one image's flash (--provision, hil flash, the re-flash "
                             "rung of the recovery ladder) (default: 300)")


def build_parser() -> argparse.ArgumentParser:
    """The `hil` argument parser with every sub-command."""
    parser = _Parser(
        prog="hil",
        description="Hardware-in-the-loop CI for ExecuTorch's Samsung Exynos (ENN) backend.",
        epilog="Each command's --help has its examples and exit codes. Any command exits 130 "
               "when interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"exynos-hil {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging (-vv: debug); also accepted after the command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = add_command(sub, COMMAND_HELP["run"])
    groups = RunGroups.of(run)
    _add_selection(groups.cases)
    _add_run_arguments(groups)
    groups.boards.add_argument("--provision", action="store_true",
                               help="before the first case, flash the inventory's images on each "
                                    "board whose build is not its expected_build (a board at that "
                                    "build: nothing)")
    groups.outputs.add_argument("--localize", action="store_true",
                                help="bisect the graph of every FAIL_MISMATCH case on its board: "
                                     "the first diverging op (results.json `localization`)")
    groups.outputs.add_argument("--plot", metavar="PNG",
                                help="with --localize: draw each probe's error and SQNR along "
                                     "the graph")

    localize = add_command(sub, COMMAND_HELP["localize"])
    groups = RunGroups.of(localize)
    _add_selection(groups.cases, one_case=True)
    _add_run_arguments(groups, out=LOCALIZE_OUT)
    localize.set_defaults(shard="1/1")
    groups.outputs.add_argument("--plot", metavar="PNG",
                                help="draw the probes' error and SQNR (--against fp32: the "
                                     "per-node SQNR curve) along the graph")
    host = localize.add_argument_group("host only (--against fp32: no board)")
    host.add_argument("--against", metavar="fp32",
                      help="no board: walk the A8W8 graph against the fp32 graph on the host")
    host.add_argument("--sqnr-floor", type=float, default=None, metavar="DB",
                      help=f"--against fp32: the SQNR below which a node is reported "
                           f"(default: {DRIFT_FLOOR_DB:g} dB)")

    lower = add_command(sub, COMMAND_HELP["lower"])
    _add_selection(lower.add_argument_group("cases (what to pick)"))
    lower.add_argument("--out", required=True, metavar="DIR", help="folder for the artifacts")

    listing = add_command(sub, COMMAND_HELP["list"])
    _add_selection(listing.add_argument_group("cases (what to pick)"))

    report = add_command(sub, COMMAND_HELP["report"])
    report.add_argument("results", metavar="RESULTS_JSON",
                        help="a run's results.json (its journal beside it is replayed when the "
                             "run never finished)")
    report.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    report.add_argument("--summary", metavar="PATH", help="write the Markdown step summary here")
    report.add_argument("--github", action="store_true",
                        help="also print GitHub workflow commands (groups, annotations) and "
                             "append the summary to $GITHUB_STEP_SUMMARY")

    merge = add_command(sub, COMMAND_HELP["merge"])
    merge.add_argument("inputs", nargs="+", metavar="RESULTS_JSON",
                       help="the results.json of each shard of one run")
    merge.add_argument("--out", required=True, metavar="PATH", help="merged results.json")
    merge.add_argument("--junit", metavar="PATH", help="write JUnit XML of the merge here")

    compare = add_command(sub, COMMAND_HELP["compare"])
    compare.add_argument("base", metavar="BASE_JSON",
                         help="the base run: the first file (with a glob over dated folders, the oldest)")
    compare.add_argument("more", nargs="*", metavar="JSON",
                         help="runs between base and new: only the --plot trend draws them")
    compare.add_argument("new", metavar="NEW_JSON",
                         help="the new run: the last file; the table and the exit code judge it "
                              "against BASE_JSON")
    add_regression_options(compare)
    compare.add_argument("--plot", metavar="PNG", help="draw the latency trend of all files here")
    compare.add_argument("--allow-missing", action="store_true",
                         help="cases of BASE missing from NEW do not fail the comparison "
                              "(default: they do, exit 1)")

    dashboard = add_command(sub, COMMAND_HELP["dashboard"])
    from hil.commands.dashboard import add_arguments as add_dashboard_arguments

    add_dashboard_arguments(dashboard)

    boards = add_command(sub, COMMAND_HELP["boards"])
    boards.add_argument("--inventory", metavar="FILE", help="board inventory YAML")
    boards.add_argument("--board", action="append", default=[], metavar="SPEC",
                        help="an inventory board's name, or virtual, an adb serial, HOST:PORT")
    boards.add_argument("--check", action="store_true",
                        help="full preflight (chipset, aarch64, free space, ENN vendor library, "
                             "runner, console); exit 2 when a board has a problem")
    boards.add_argument("--chipset", metavar="|".join(CHIPSET_CHOICES),
                        help="also require this chipset")
    boards.add_argument("--runner", metavar="PATH",
                        help="enn_executor_runner to compare with the installed one")
    boards.add_argument("--idle-timeout", type=float, default=30.0, metavar="S",
                        help="how long to wait for a board (default: 30)")
    _add_adb_server(boards)
    _add_labgrid(boards)

    flash = add_command(sub, COMMAND_HELP["flash"])
    flash.add_argument("--inventory", metavar="FILE", required=True,
                       help="board inventory YAML with images, product, fastboot, expected_build")
    flash.add_argument("--board", action="append", default=[], metavar="NAME",
                       help="an inventory board's name; repeatable (default: every board with images)")
    flash.add_argument("--if-needed", action="store_true",
                       help="only boards whose build is not the expected one")
    flash.add_argument("--idle-timeout", type=float, default=30.0, metavar="S",
                       help="limit of one adb call (default: 30)")
    flash.add_argument("--boot-timeout", type=float, default=120.0, metavar="S",
                       help="limit of entering the bootloader and of booting after (default: 120)")
    flash.add_argument("--board-wait", type=float, default=0.0, metavar="S",
                       help="wait this long for a board another run holds (default: 0)")
    _add_flash_timeout(flash)
    _add_adb_server(flash)

    from hil.commands.bisect import add_arguments as add_bisect_arguments

    bisect = add_command(sub, COMMAND_HELP["bisect"])
    add_bisect_arguments(bisect)
    _add_adb_server(bisect)
    _add_labgrid(bisect)
    _add_flash_timeout(bisect)

    doctor = add_command(sub, COMMAND_HELP["doctor"])
    from hil.doctor import add_arguments as add_doctor_arguments

    add_doctor_arguments(doctor)
    replicate = add_command(sub, COMMAND_HELP["replicate"])
    from hil.replicate import add_arguments as add_replicate_arguments

    add_replicate_arguments(replicate)

    board = add_command(sub, COMMAND_HELP["virtual-board"])
    from hil.virtual.main import add_arguments

    add_arguments(board)
    return parser


def verbosity(args: argparse.Namespace) -> int:
    """How many `-v`: those before the command and those after it."""
    return args.verbose + getattr(args, VERBOSE_AFTER, 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `hil` console script."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        logging.basicConfig(
            level=logging.WARNING - 10 * min(verbosity(args), 2),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        workflow_safe.install()  # under GitHub Actions: no board's text becomes a command
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        module, function = COMMANDS[args.command]
        return getattr(importlib.import_module(module), function)(args)
    except UsageError as exc:
        sys.stderr.write(f"hil: error: {exc}\n")
        return EXIT_USAGE
    except InfraError as exc:  # what a command does not turn into a verdict or a line itself
        sys.stderr.write(f"hil: error: {exc}\n")
        return EXIT_INFRA
    except KeyboardInterrupt:
        sys.stderr.write("hil: interrupted\n")
        return EXIT_INTERRUPTED
    finally:
        workflow_safe.finish()


if __name__ == "__main__":
    sys.exit(main())
