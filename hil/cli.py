"""The `hil` command. Heavy modules (torch, executorch) are imported only by the sub-commands
that need them, so `hil --help` starts fast.

Exit codes: 0 all passed · 1 a test failed · 2 infrastructure errors and no failure, or no
usable board · 3 bad usage, configuration or input · 130 interrupted (results flushed).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from hil import __version__
from hil.errors import UsageError
from hil.verdict import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

FLOW_CHOICES = ("auto", "enn", "xnnpack", "portable")
CHIPSET_CHOICES = ("E9955", "E9965")
DEFAULT_BOARD_WAIT_S = 600.0
"""`--board-wait` default: how long a run waits for a board another run holds."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as a UsageError (exit 3), not exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", action="append", default=[], metavar="NAME|FILE",
                        help="built-in suite (smoke, ops, models) or a manifest .yaml; repeatable "
                             "(default: smoke)")
    parser.add_argument("--pretrained", action="store_true",
                        help="models suite: load published weights (default: seeded random init)")
    parser.add_argument("--filter", action="append", default=[], metavar="GLOB",
                        help="keep cases whose id or suite.precision.id matches; repeatable")
    parser.add_argument("--precision", default="fp32", metavar="fp32|a8w8|all",
                        help="precision(s) to run (default: fp32)")
    parser.add_argument("--shard", default="1/1", metavar="I/N",
                        help="run only shard I of N (a stable partition of the cases)")
    parser.add_argument("--flow", default="auto", metavar="|".join(FLOW_CHOICES),
                        help="lowering flow (default auto: enn with LITECORE and a real board, "
                             "else xnnpack)")
    parser.add_argument("--chipset", default="E9955", metavar="|".join(CHIPSET_CHOICES),
                        help="target Exynos chipset (default: E9955)")


def _add_adb_server(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adb-server", metavar="HOST:PORT|own",
                        help="the lab's adb server to use (only as a client: hil starts, kills "
                             "and restarts none) for every board hil does not start; own: hil's "
                             "private server for all, USB too (no other server may run); "
                             "default: $HIL_ADB_SERVER, ANDROID_ADB_SERVER_HOST/PORT, else the "
                             "host's server 127.0.0.1:5037 for USB boards and a private one "
                             "for HOST:PORT")


def _lab_server(flag: str | None) -> str | None:
    """`--adb-server`, else HIL_ADB_SERVER, else ANDROID_ADB_SERVER_HOST/PORT; validated."""
    from hil.adbserver import server_choice

    return server_choice(flag)


def build_parser() -> argparse.ArgumentParser:
    """The `hil` argument parser with every sub-command."""
    parser = _Parser(
        prog="hil",
        description="Hardware-in-the-loop CI for ExecuTorch's Samsung Exynos (ENN) backend.",
    )
    parser.add_argument("--version", action="version", version=f"exynos-hil {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", help="lower cases, run them on boards, report")
    _add_selection(run)
    run.add_argument("--board", action="append", default=[], metavar="SPEC",
                     help="virtual, virtual:N, an adb serial or HOST:PORT, or the name of an "
                          "--inventory board; repeatable (default: virtual, or the inventory)")
    run.add_argument("--inventory", metavar="FILE",
                     help="board inventory YAML (name, adb, chipset, console, power, tags)")
    run.add_argument("--idle-timeout", type=float, default=30.0, metavar="S",
                     help="a board silent this long is lost: ERROR_INFRA (default: 30)")
    run.add_argument("--boot-timeout", type=float, default=120.0, metavar="S",
                     help="longest reboot or power cycle during recovery (default: 120)")
    run.add_argument("--out", default="hil-out", metavar="DIR",
                     help="folder for artifacts and outputs (default: hil-out)")
    run.add_argument("--junit", metavar="PATH", help="JUnit XML path (default: OUT/junit.xml)")
    run.add_argument("--results", metavar="PATH",
                     help="results.json path (default: OUT/results.json)")
    run.add_argument("--timeout", type=float, default=120.0, metavar="S",
                     help="per-case runner deadline in seconds (default: 120)")
    run.add_argument("--retries", type=int, default=1, metavar="N",
                     help="retries of a case after an infrastructure error (default: 1)")
    run.add_argument("--iterations", type=int, default=1, metavar="N",
                     help="timed runner executions per case (default: 1)")
    run.add_argument("--warmup", type=int, default=0, metavar="N",
                     help="untimed runner executions first (default: 0)")
    run.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                     help="lowering worker processes (default: 2, or 1 on a 1-core machine)")
    run.add_argument("--no-cache", action="store_true",
                     help="lower everything again; do not read or write the artifact cache")
    run.add_argument("--cache-dir", metavar="DIR",
                     help="artifact cache (default: $HIL_CACHE_DIR or ~/.cache/exynos-hil/artifacts)")
    run.add_argument("--virtual-link", default="none", metavar="none|usb2|usb3",
                     help="shape the virtual boards' adb link like a USB cable (default: none)")
    run.add_argument("--runner", metavar="PATH", default=os.environ.get("HIL_RUNNER"),
                     help="enn_executor_runner for real boards (default: $HIL_RUNNER, which the "
                          "exynos image sets; virtual boards bring their own)")
    run.add_argument("--runner-profile", metavar="upstream|hil",
                     help="what every board's runner can execute: upstream (ENN + portable "
                          "kernels) or hil (+ XNNPACK and quantized kernels); also the profile "
                          "of the virtual boards hil starts (default: learnt per board: the "
                          "inventory, the virtual board, the runner's .profile.json, else upstream)")
    _add_adb_server(run)
    run.add_argument("--board-wait", type=float, default=DEFAULT_BOARD_WAIT_S, metavar="S",
                     help="wait this long for a board another run holds, then leave it out "
                          f"(default: {DEFAULT_BOARD_WAIT_S:g})")

    lower = sub.add_parser("lower", help="lower cases to artifacts only (no board)")
    _add_selection(lower)
    lower.add_argument("--out", required=True, metavar="DIR", help="folder for the artifacts")

    report = sub.add_parser("report", help="re-render JUnit and the table from results.json")
    report.add_argument("results", metavar="RESULTS_JSON")
    report.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    report.add_argument("--summary", metavar="PATH", help="write the Markdown step summary here")
    report.add_argument("--github", action="store_true",
                        help="also print GitHub workflow commands (groups, annotations) and "
                             "append the summary to $GITHUB_STEP_SUMMARY")

    merge = sub.add_parser("merge", help="merge the results.json of shards into one")
    merge.add_argument("inputs", nargs="+", metavar="RESULTS_JSON")
    merge.add_argument("--out", required=True, metavar="PATH", help="merged results.json")
    merge.add_argument("--junit", metavar="PATH", help="write JUnit XML of the merge here")

    compare = sub.add_parser("compare", help="latency and accuracy regressions between runs")
    compare.add_argument("base", metavar="BASE_JSON")
    compare.add_argument("new", metavar="NEW_JSON")
    compare.add_argument("more", nargs="*", metavar="MORE_JSON",
                         help="further results files for the --plot trend")
    compare.add_argument("--threshold", default="10%", metavar="PCT",
                         help="relative growth that is a regression (default: 10%%)")
    compare.add_argument("--plot", metavar="PNG", help="draw the latency trend of all files here")

    boards = sub.add_parser("boards", help="list the boards; --check: preflight them")
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

    doctor = sub.add_parser("doctor", help="SDK, adb, ExecuTorch, runner, bwrap, docker: "
                                           "found / missing / how to fix")
    from hil.doctor import add_arguments as add_doctor_arguments

    add_doctor_arguments(doctor)
    replicate = sub.add_parser("replicate", help="run hil in its container as CI does "
                                                 "(--print: the docker run command)")
    from hil.replicate import add_arguments as add_replicate_arguments

    add_replicate_arguments(replicate)

    board = sub.add_parser("virtual-board", help="run a virtual Exynos board (adb device side)")
    from hil.virtual.main import add_arguments

    add_arguments(board)
    return parser


def _choice(value: str, choices: Sequence[str], flag: str) -> str:
    if value not in choices:
        raise UsageError(f"{flag}: unknown value {value!r} (one of {', '.join(choices)})")
    return value


def _select_cases(args: argparse.Namespace) -> tuple[list[Any], tuple[int, int]]:
    from hil.cases import expand_precisions, load_suite, parse_shard, prefetch, select

    shard = parse_shard(args.shard)
    _choice(args.chipset, CHIPSET_CHOICES, "--chipset")
    _choice(args.flow, FLOW_CHOICES, "--flow")
    if args.precision not in ("fp32", "a8w8", "all"):
        raise UsageError(f"--precision: unknown value {args.precision!r} (fp32, a8w8, all)")
    cases = []
    for suite in args.suite or ["smoke"]:
        cases.extend(load_suite(suite, pretrained=args.pretrained))
    cases = expand_precisions(cases, args.precision)
    selected = select(cases, args.filter, (1, 1))
    if not selected:
        raise UsageError(
            f"no case matches --suite {args.suite or ['smoke']} --precision {args.precision}"
            + (f" --filter {args.filter}" if args.filter else "")
        )
    chosen = select(selected, [], shard)
    prefetch(chosen)
    return chosen, shard


def _lowering_flow(requested: str) -> str:
    """The flow of `hil lower` (no boards to check): `auto` is enn when LITECORE can lower
    here, else xnnpack."""
    from hil.sdk import enn_adaptor_available, require_enn_adaptor

    if requested == "enn":
        require_enn_adaptor()
    if requested != "auto":
        return requested
    return "enn" if enn_adaptor_available() else "xnnpack"


def _cache_dir(flag: str | None) -> Path:
    from hil.lower.cache import default_cache_dir

    return Path(flag) if flag else default_cache_dir()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def cmd_run(args: argparse.Namespace) -> int:
    """`hil run`: the whole pipeline."""
    from hil.board.spec import parse_boards

    for name in ("timeout", "retries", "iterations", "warmup", "jobs", "idle_timeout",
                 "boot_timeout"):
        value = getattr(args, name)
        if value < (0 if name in ("retries", "warmup") else 1):
            raise UsageError(f"--{name.replace('_', '-')}: {value} is out of range")
    if args.board_wait < 0:
        raise UsageError(f"--board-wait: {args.board_wait} is out of range")
    adb_server = _lab_server(args.adb_server)
    inventory = _inventory(args.inventory)
    entries = _board_entries(inventory, args.board)
    boards = [] if inventory else parse_boards(args.board)
    cases, shard = _select_cases(args)
    if args.runner_profile is not None:
        from hil.runner.profiles import profile_named

        profile_named(args.runner_profile)
    runner = Path(args.runner) if args.runner else None
    if runner is not None and not runner.is_file():
        raise UsageError(f"--runner (or $HIL_RUNNER): file not found: {runner}")
    out = Path(args.out)

    from hil.report.console import render_table
    from hil.report.github import in_github_actions
    from hil.report.progress import make_progress
    from hil.report.thirdparty import FILE_NAME as THIRD_PARTY_LOG
    from hil.report.thirdparty import third_party_to_file
    from hil.run import Run, RunOptions
    from hil.verdict import Verdict, exit_code

    options = RunOptions(
        cases=tuple(cases), boards=tuple(boards), flow=args.flow,
        chipset=args.chipset, out_dir=out,
        results_path=Path(args.results) if args.results else out / "results.json",
        junit_path=Path(args.junit) if args.junit else out / "junit.xml",
        shard=shard, timeout_s=args.timeout, retries=args.retries,
        iterations=args.iterations, warmup=args.warmup, runner=runner,
        command=tuple(["hil", *sys.argv[1:]]),
        cache_dir=None if args.no_cache else _cache_dir(args.cache_dir),
        jobs=args.jobs,
        virtual_link=_choice(args.virtual_link, ("none", "usb2", "usb3"), "--virtual-link"),
        inventory=tuple(entries), idle_timeout_s=args.idle_timeout,
        boot_timeout_s=args.boot_timeout, runner_profile=args.runner_profile,
        adb_server=adb_server, board_wait_s=args.board_wait,
    )

    def announce(flow: str, reason: str) -> None:
        sys.stdout.write(
            f"hil run {len(cases)} case(s), flow {flow} ({reason}), chipset {args.chipset}, "
            f"boards: {', '.join(e.name for e in entries)}\n"
        )
        sys.stdout.flush()

    signal.signal(signal.SIGTERM, _interrupt)
    progress = make_progress(len(cases))
    try:
        the_run = Run(options, on_record=progress.on_record, on_lowered=progress.on_lowered,
                      on_flow=announce)
    except BaseException:
        progress.close()  # leave no progress bar on the terminal
        raise
    interrupted = False
    third_party = out / THIRD_PARTY_LOG
    try:
        with third_party_to_file(third_party):
            the_run.execute()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        progress.close()  # the run wrote results.json and JUnit on its way out, however it ended
    results = the_run.writer.current()
    render_table(results)
    if in_github_actions():
        _emit_github(results)
    sys.stdout.write(f"JUnit: {options.junit_path}\nresults: {options.results_path}\n")
    if third_party.is_file() and third_party.stat().st_size:
        sys.stdout.write(f"third-party warnings: {third_party}\n")
    if interrupted:
        sys.stderr.write("hil: interrupted; results so far are written\n")
        return EXIT_INTERRUPTED
    if not cases:
        return EXIT_OK  # an empty shard: nothing to run is not a failure
    if not the_run.records or not the_run.meta["boards"] or all(
        "error" in b for b in the_run.meta["boards"]
    ):
        sys.stderr.write("hil: no usable board\n")
        return EXIT_INFRA
    return exit_code(Verdict(r["verdict"]) for r in the_run.records)


def _inventory(path: str | None) -> list[Any]:
    from hil.board.inventory import load_inventory

    return load_inventory(Path(path)) if path else []


def _board_entries(inventory: list[Any], board_args: list[str]) -> list[Any]:
    from hil.board.inventory import select_boards

    return select_boards(inventory, board_args)


def cmd_boards(args: argparse.Namespace) -> int:
    """`hil boards`: a table of the boards; with --check, the full preflight."""
    from hil.board.preflight import preflight, render

    if args.chipset is not None:
        _choice(args.chipset, CHIPSET_CHOICES, "--chipset")
    if args.idle_timeout <= 0:
        raise UsageError(f"--idle-timeout: {args.idle_timeout} is out of range")
    runner = Path(args.runner) if args.runner else None
    if runner is not None and not runner.is_file():
        raise UsageError(f"--runner: file not found: {runner}")
    inventory = _inventory(args.inventory)
    if not inventory and not args.board:
        raise UsageError("hil boards: name the boards with --inventory FILE or --board SPEC")
    entries = _board_entries(inventory, args.board)
    reports, servers = preflight(entries, args.check, args.chipset, runner, args.idle_timeout,
                                 _lab_server(args.adb_server))
    sys.stdout.write(render(reports) + servers)
    return EXIT_INFRA if any(report.problems for report in reports) else 0


def cmd_lower(args: argparse.Namespace) -> int:
    """`hil lower`: artifacts only."""
    from hil.lower import LoweringFailed, build_artifact

    cases, _ = _select_cases(args)
    flow = _lowering_flow(args.flow)
    failed = 0
    for index, case in enumerate(cases):
        folder = Path(args.out) / f"c{index:04d}"
        try:
            artifact = build_artifact(case, flow, args.chipset, folder)
        except LoweringFailed as exc:
            failed += 1
            sys.stdout.write(f"{exc.verdict.value:<16} {case.key}  {exc.message}\n")
            continue
        sys.stdout.write(f"LOWERED          {case.key} -> {artifact.pte} ({artifact.pte_bytes} B)\n")
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    """`hil report`: re-render from results.json."""
    from hil.report.console import render_table
    from hil.report.junit import write_junit
    from hil.report.results import load_results
    from hil.verdict import Verdict, exit_code

    results = load_results(Path(args.results))
    if args.junit:
        write_junit(results, Path(args.junit))
    if args.summary:
        from hil.report.results import atomic_write_text
        from hil.report.summary import render_summary

        atomic_write_text(Path(args.summary), render_summary(results))
    render_table(results)
    if args.github:
        _emit_github(results)
    return exit_code(Verdict(c["verdict"]) for c in results["cases"])


def _emit_github(results: dict[str, Any]) -> None:
    """Groups and annotations on stdout; the step summary appended to $GITHUB_STEP_SUMMARY."""
    from hil.report.github import emit_github

    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    sys.stdout.flush()
    emit_github(results, sys.stdout, Path(summary) if summary else None)


def cmd_merge(args: argparse.Namespace) -> int:
    """`hil merge`: shards' results.json → one results.json (and JUnit)."""
    from hil.report.console import format_totals
    from hil.report.junit import write_junit
    from hil.report.merge import merge_results
    from hil.report.results import load_results, save_results
    from hil.verdict import Verdict, exit_code

    merged = merge_results([(Path(p), load_results(Path(p))) for p in args.inputs])
    save_results(merged, Path(args.out))
    if args.junit:
        write_junit(merged, Path(args.junit))
    sys.stdout.write(
        f"merged {len(args.inputs)} file(s), {len(merged['cases'])} case(s) -> {args.out}: "
        f"{format_totals(merged)}\n"
    )
    if merged["run"].get("missing_shards"):
        sys.stderr.write(f"hil: warning: shard(s) missing: {', '.join(merged['run']['missing_shards'])}\n")
    return exit_code(Verdict(c["verdict"]) for c in merged["cases"])


def cmd_compare(args: argparse.Namespace) -> int:
    """`hil compare`: regressions of NEW against BASE as Markdown; exit 1 on a regression."""
    from hil.report.compare import compare_results, parse_threshold, render_markdown
    from hil.report.results import load_results

    threshold = parse_threshold(args.threshold)
    if args.more and not args.plot:
        raise UsageError("compare: extra results files are only used by --plot PNG")
    paths = [Path(args.base), Path(args.new), *(Path(p) for p in args.more)]
    documents = [(path, load_results(path)) for path in paths]
    comparison = compare_results(documents[0][1], documents[1][1], threshold)
    sys.stdout.write(render_markdown(comparison, paths[0], paths[1]))
    if args.plot:
        from hil.report.plot import plot_trend

        drawn = plot_trend(documents, Path(args.plot))
        sys.stdout.write(f"\ntrend plot: {args.plot} ({drawn} case(s), {len(documents)} runs)\n")
    return 1 if comparison.regressions else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `hil` console script."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        logging.basicConfig(
            level=logging.WARNING - 10 * min(args.verbose, 2),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        if args.command == "virtual-board":
            from hil.virtual.main import run as run_virtual_board

            return run_virtual_board(args)
        if args.command in ("doctor", "replicate"):
            from hil import doctor, replicate

            return {"doctor": doctor.command, "replicate": replicate.command}[args.command](args)
        handlers = {"run": cmd_run, "boards": cmd_boards, "lower": cmd_lower, "report": cmd_report,
                    "merge": cmd_merge, "compare": cmd_compare}
        return handlers[args.command](args)
    except UsageError as exc:
        sys.stderr.write(f"hil: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("hil: interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
