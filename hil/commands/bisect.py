"""`hil bisect`: which build broke it, on the lab's own boards (hil/bisect).

Exit codes: 0 a culprit, confirmed · 4 a range (skipped candidates, an unconfirmed culprit,
factors that fail only together, changed elements without candidates) · 5 not reproduced ·
6 not bisectable (a latency shift smaller than the noise) · 2 no usable board, or none left ·
3 bad usage or input · 130 interrupted (the state is kept: the same command goes on).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from hil.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`hil bisect`'s own options (the adb server, labgrid and flash limit are added by
    hil/cli.py as for `hil run`)."""
    parser.add_argument("--good", required=True, metavar="GOOD_JSON",
                        help="results.json of the last good run (a nightly's artifact)")
    parser.add_argument("--bad", required=True, metavar="BAD_JSON",
                        help="results.json of the first bad run")
    parser.add_argument("--suite", action="append", default=[], metavar="NAME|FILE",
                        help="the suites the cases come from; repeatable (default: those of BAD's command)")
    parser.add_argument("--pretrained", action="store_true",
                        help="models suite: load published weights (as BAD's run did)")
    parser.add_argument("--filter", action="append", default=[], metavar="GLOB",
                        help="bisect the cases whose id or suite.precision.id matches; repeatable "
                             "(default: the cases that regressed between GOOD and BAD, as hil compare "
                             "judges); a matched case that did not regress is bisected by its latency")
    from hil.commands.common import add_regression_options

    add_regression_options(parser)
    parser.add_argument("--firmware-builds", metavar="DIR",
                        help="one folder per firmware build, ordered by name, each with the images the "
                             "inventory's `images` names (or PARTITION.img) and optionally a file "
                             "expected_build (PROPERTY=VALUE); flashed with fastboot")
    parser.add_argument("--runner-repo", metavar="PATH",
                        help="the git repository of the runner: the commits between GOOD's and BAD's "
                             "runner commits are the candidates (with --runner-build)")
    parser.add_argument("--runner-build", metavar="CMD",
                        help="builds the runner in a worktree of each commit: it writes "
                             "$HIL_RUNNER_OUT/enn_executor_runner (or .../runner/enn_executor_runner); "
                             "exit 125 or any failure skips the commit")
    parser.add_argument("--wheels", metavar="DIR",
                        help="Python-side candidates: wheels of one distribution (each a candidate, by "
                             "version), or one folder of wheels per candidate; each lowers in its own "
                             "uv environment layered on hil's")
    parser.add_argument("--index-url", metavar="URL",
                        help="Python-side candidates from a package index instead: the versions of "
                             "--package it lists (pre-releases included) from GOOD's to BAD's")
    parser.add_argument("--package", default="executorch", metavar="NAME",
                        help="with --index-url: the distribution whose versions are the candidates "
                             "(default: executorch)")
    parser.add_argument("--board", action="append", default=[], metavar="SPEC",
                        help="virtual:N (started for the whole bisection), an adb serial or HOST:PORT, or "
                             "an --inventory board's name; repeatable (default: virtual, or the inventory)")
    parser.add_argument("--inventory", metavar="FILE",
                        help="board inventory YAML (with fastboot, product and images to flash firmware)")
    parser.add_argument("--runner", metavar="PATH", default=os.environ.get("HIL_RUNNER"),
                        help="enn_executor_runner for real boards when the runner is not bisected "
                             "(default: $HIL_RUNNER)")
    parser.add_argument("--out", default="hil-bisect", metavar="DIR",
                        help="folder for the state, bisect.json, bisect.md, bisect.png and every board "
                             "run's results.json (default: hil-bisect); the same --out resumes")
    parser.add_argument("--samples", type=int, default=10, metavar="N",
                        help="latency: runner launches per case and run, one sample each (default: 10)")
    parser.add_argument("--warmup", type=int, default=1, metavar="N",
                        help="latency: untimed runs before each launch's timed one (default: 1)")
    parser.add_argument("--attempts", type=int, default=3, metavar="N",
                        help="latency: tests of a candidate while it is UNKNOWN, then it is skipped "
                             "(default: 3)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S",
                        help="per-case runner deadline in seconds (default: 120)")
    parser.add_argument("--retries", type=int, default=1, metavar="N",
                        help="retries of a board run after an infrastructure error (default: 1)")
    parser.add_argument("--idle-timeout", type=float, default=30.0, metavar="S",
                        help="a board silent this long is lost (default: 30)")
    parser.add_argument("--boot-timeout", type=float, default=120.0, metavar="S",
                        help="longest reboot, power cycle or boot after a flash (default: 120)")
    parser.add_argument("--board-wait", type=float, default=600.0, metavar="S",
                        help="wait this long for a board another run holds (default: 600)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="artifact cache (default: $HIL_CACHE_DIR or ~/.cache/exynos-hil/artifacts); "
                             "the Python side's environments are kept beside it")
    parser.add_argument("--virtual-device-time", metavar="measured|MS",
                        help="the virtual boards hil starts run in the off-host measuring mode (see "
                             "hil run)")
    parser.add_argument("--virtual-reboot-seconds", type=float, default=2.0, metavar="S",
                        help="how long the virtual boards hil starts take to reboot (default: 2)")
    parser.add_argument("--github", action="store_true",
                        help="also append the summary to $GITHUB_STEP_SUMMARY and print an annotation")


def options_of(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The validated BisectOptions of parsed arguments (UsageError naming the flag)."""
    from hil.bisect.session import BisectOptions
    from hil.commands.common import lab_server, writable
    from hil.report.compare import parse_min_delta, parse_threshold
    from hil.virtual.offhost import parse_device_time

    for name, low in (("samples", 3), ("warmup", 0), ("attempts", 1), ("retries", 0)):
        if getattr(args, name) < low:
            raise UsageError(f"--{name}: {getattr(args, name)} is out of range (at least {low})")
    for name in ("timeout", "idle_timeout", "boot_timeout", "flash_timeout", "virtual_reboot_seconds"):
        value = getattr(args, name)
        if not 0 <= value < math.inf or (name != "virtual_reboot_seconds" and value == 0):
            raise UsageError(f"--{name.replace('_', '-')}: {value} is out of range")
    if args.board_wait < 0:
        raise UsageError(f"--board-wait: {args.board_wait} is out of range")
    if bool(args.runner_repo) != bool(args.runner_build):
        raise UsageError("--runner-repo and --runner-build go together")
    if args.wheels and args.index_url:
        raise UsageError("--wheels and --index-url: one source of Python-side candidates")
    for flag, value in (("--good", args.good), ("--bad", args.bad)):
        if not Path(value).is_file():
            raise UsageError(f"{flag} {value}: no such results file")
    for flag, value in (("--firmware-builds", args.firmware_builds), ("--runner-repo", args.runner_repo),
                        ("--wheels", args.wheels)):
        if value is not None and not Path(value).is_dir():
            raise UsageError(f"{flag} {value}: not a folder")
    runner = Path(args.runner) if args.runner else None
    if runner is not None and not runner.is_file():
        raise UsageError(f"--runner (or $HIL_RUNNER): file not found: {runner}")
    out = writable(args.out, "--out", folder=True)
    assert out is not None
    return BisectOptions(
        good=Path(args.good), bad=Path(args.bad), out=out, suites=tuple(args.suite),
        pretrained=args.pretrained, filters=tuple(args.filter),
        threshold=parse_threshold(args.threshold), min_delta_ms=parse_min_delta(args.min_delta_ms),
        firmware_builds=Path(args.firmware_builds) if args.firmware_builds else None,
        runner_repo=Path(args.runner_repo) if args.runner_repo else None, runner_build=args.runner_build,
        wheels=Path(args.wheels) if args.wheels else None, index_url=args.index_url,
        package=args.package, inventory=args.inventory,
        boards=tuple(args.board), labgrid=args.labgrid, adb_server=lab_server(args.adb_server),
        board_wait_s=args.board_wait, runner=runner, samples=args.samples, warmup=args.warmup,
        attempts=args.attempts, timeout_s=args.timeout, idle_timeout_s=args.idle_timeout,
        boot_timeout_s=args.boot_timeout, flash_timeout_s=args.flash_timeout, retries=args.retries,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        virtual_device_time=(parse_device_time(args.virtual_device_time, "--virtual-device-time")
                             if args.virtual_device_time else None),
        virtual_reboot_s=args.virtual_reboot_seconds, command=("hil", *sys.argv[1:]))


def cmd_bisect(args: argparse.Namespace) -> int:
    """`hil bisect`: the bisection under the stop signals, its answer, its exit code."""
    from hil.bisect.session import bisect
    from hil.interrupts import Stop, StopSignals
    from hil.report.thirdparty import FILE_NAME as THIRD_PARTY_LOG
    from hil.report.thirdparty import third_party_to_file
    from hil.verdict import EXIT_INTERRUPTED

    options = options_of(args)

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    stop = Stop()
    with StopSignals(stop), third_party_to_file(options.out / THIRD_PARTY_LOG):
        outcome = bisect(options, stop, say)
    answer = outcome.document["answer"]
    say(f"hil bisect: {answer['message']}")
    for name, path in outcome.paths.items():
        say(f"{name}: {path}")
    if args.github:
        _github(outcome.paths["markdown"].read_text(encoding="utf-8"), answer)
    if outcome.document["status"] == "interrupted":
        sys.stderr.write("hil: interrupted; the state is kept: run the same command to go on\n")
        return EXIT_INTERRUPTED
    return outcome.exit_code


def _github(markdown: str, answer: dict) -> None:  # type: ignore[type-arg]
    """The summary appended to $GITHUB_STEP_SUMMARY, the answer as an annotation."""
    from hil.report.github import in_github_actions

    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as stream:
            stream.write(markdown)
    level = "error" if answer["kind"] == "culprit" else "warning"
    message = answer["message"].replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if in_github_actions() or summary:
        sys.stdout.write(f"::{level} title=hil bisect::{message}\n")
