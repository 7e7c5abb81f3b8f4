"""The `hil` command. Heavy modules (torch, executorch) are imported only by the sub-commands
that need them, so `hil --help` starts fast.

Exit codes: 0 all passed · 1 a test failed · 2 infrastructure errors and no failure, or no
usable board · 3 bad usage, configuration or input · 130 interrupted (results flushed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from hil import __version__
from hil.errors import UsageError
from hil.verdict import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

FLOW_CHOICES = ("auto", "enn", "xnnpack", "portable")
DRIFT_FLOOR_DB = 20.0
"""`hil localize --against fp32`: default SQNR floor of a node against fp32."""
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


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Boards, outputs, limits and caching: what `hil run` and `hil localize` share."""
    parser.add_argument("--board", action="append", default=[], metavar="SPEC",
                        help="virtual, virtual:N, an adb serial or HOST:PORT, or the name of an "
                             "--inventory board; repeatable (default: virtual, or the inventory)")
    parser.add_argument("--inventory", metavar="FILE",
                        help="board inventory YAML (name, adb, chipset, console, power, tags)")
    parser.add_argument("--idle-timeout", type=float, default=30.0, metavar="S",
                        help="a board silent this long is lost: ERROR_INFRA (default: 30)")
    parser.add_argument("--boot-timeout", type=float, default=120.0, metavar="S",
                        help="longest reboot or power cycle during recovery (default: 120)")
    parser.add_argument("--out", default="hil-out", metavar="DIR",
                        help="folder for artifacts and outputs (default: hil-out)")
    parser.add_argument("--junit", metavar="PATH", help="JUnit XML path (default: OUT/junit.xml)")
    parser.add_argument("--results", metavar="PATH",
                        help="results.json path (default: OUT/results.json)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S",
                        help="per-case runner deadline in seconds (default: 120)")
    parser.add_argument("--retries", type=int, default=1, metavar="N",
                        help="retries of a case after an infrastructure error (default: 1)")
    parser.add_argument("--latency", default="quick", metavar="quick|stable",
                        help="latency profile: quick (1 sample, no warm-up: PR checks) or stable "
                             "(3 warm-ups, 30 samples, longer cool-down: nightly); a manifest's "
                             "`latency:` overrides it for its cases (default: quick)")
    parser.add_argument("--iterations", type=int, default=None, metavar="N",
                        help="runner invocations per case, one latency sample each (default: "
                             "from --latency)")
    parser.add_argument("--warmup", type=int, default=None, metavar="N",
                        help="untimed runs before each invocation's timed ones (default: from "
                             "--latency)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                        help="lowering worker processes (default: 2, or 1 on a 1-core machine)")
    parser.add_argument("--no-cache", action="store_true",
                        help="lower everything again; do not read or write the artifact cache")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="artifact cache (default: $HIL_CACHE_DIR or ~/.cache/exynos-hil/artifacts)")
    parser.add_argument("--virtual-link", default="none", metavar="none|usb2|usb3",
                        help="shape the virtual boards' adb link like a USB cable (default: none)")
    parser.add_argument("--runner", metavar="PATH", default=os.environ.get("HIL_RUNNER"),
                        help="enn_executor_runner for real boards (default: $HIL_RUNNER, which the "
                             "exynos image sets; virtual boards bring their own)")
    parser.add_argument("--runner-profile", metavar="upstream|hil",
                        help="what every board's runner can execute: upstream (ENN + portable "
                             "kernels) or hil (+ XNNPACK and quantized kernels); also the profile "
                             "of the virtual boards hil starts (default: learnt per board: the "
                             "inventory, the virtual board, the runner's .profile.json, else upstream)")
    _add_adb_server(parser)
    parser.add_argument("--board-wait", type=float, default=DEFAULT_BOARD_WAIT_S, metavar="S",
                        help="wait this long for a board another run holds, then leave it out "
                             f"(default: {DEFAULT_BOARD_WAIT_S:g})")


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
    _add_run_arguments(run)
    run.add_argument("--localize", action="store_true",
                     help="bisect the graph of every FAIL_MISMATCH case on its board: the first "
                          "diverging op (results.json `localization`)")
    run.add_argument("--plot", metavar="PNG",
                     help="with --localize: draw each probe's error and SQNR along the graph")

    localize = sub.add_parser("localize", help="find the first op a board computes wrong in one "
                                               "failing case (graph bisection), or with --against "
                                               "fp32 where A8W8 loses the model (host only)")
    _add_selection(localize)
    _add_run_arguments(localize)
    localize.set_defaults(precision=None)
    localize.add_argument("--against", metavar="fp32",
                          help="no board: walk the A8W8 graph against the fp32 graph on the host")
    localize.add_argument("--sqnr-floor", type=float, default=None, metavar="DB",
                          help=f"--against fp32: the SQNR below which a node is reported "
                               f"(default: {DRIFT_FLOOR_DB:g} dB)")
    localize.add_argument("--plot", metavar="PNG",
                          help="draw the probes' error and SQNR (--against fp32: the per-node "
                               "SQNR curve) along the graph")

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
    compare.add_argument("--min-delta-ms", default="0.02", metavar="MS",
                         help="a latency change below this many ms is never a regression "
                              "(default: 0.02)")
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
    if args.plot and not args.localize:
        raise UsageError("--plot: draws localizations: use it with --localize")
    code, _ = _run_cases(args, lambda: _select_cases(args), args.localize)
    return code


def _run_cases(args: argparse.Namespace, select: Callable[[], tuple[list[Any], tuple[int, int]]],
               localize: bool) -> tuple[int, list[dict[str, Any]]]:
    """Run the cases `select()` gives as `hil run` does (boards, reports, the table), once
    the options are checked; the exit code and the case records."""
    from hil.board.spec import parse_boards

    for name in ("timeout", "retries", "iterations", "warmup", "jobs", "idle_timeout",
                 "boot_timeout"):
        value = getattr(args, name)
        if value is not None and value < (0 if name in ("retries", "warmup") else 1):
            raise UsageError(f"--{name.replace('_', '-')}: {value} is out of range")
    if args.board_wait < 0:
        raise UsageError(f"--board-wait: {args.board_wait} is out of range")
    adb_server = _lab_server(args.adb_server)
    inventory = _inventory(args.inventory)
    entries = _board_entries(inventory, args.board)
    boards = [] if inventory else parse_boards(args.board)
    cases, shard = select()
    if args.flow == "enn":  # no board can change that: say it before starting any
        from hil.sdk import require_enn_adaptor

        require_enn_adaptor()
    latency, suite_latency = _latency_plans(args)
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
        iterations=latency.iterations, warmup=latency.warmup, runner=runner,
        latency=latency, suite_latency=suite_latency,
        command=tuple(["hil", *sys.argv[1:]]),
        cache_dir=None if args.no_cache else _cache_dir(args.cache_dir),
        jobs=args.jobs,
        virtual_link=_choice(args.virtual_link, ("none", "usb2", "usb3"), "--virtual-link"),
        inventory=tuple(entries), idle_timeout_s=args.idle_timeout,
        boot_timeout_s=args.boot_timeout, runner_profile=args.runner_profile,
        adb_server=adb_server, board_wait_s=args.board_wait, localize=localize,
    )

    def announce(flow: str, reason: str) -> None:
        sys.stdout.write(
            f"hil run {len(cases)} case(s), flow {flow} ({reason}), chipset {args.chipset}, "
            f"boards: {', '.join(e.name for e in entries)}\n"
        )
        sys.stdout.flush()

    def probed(case: Any, entry: dict[str, Any]) -> None:
        from hil.report.localization import probe_line

        sys.stdout.write(probe_line(case.key, entry) + "\n")
        sys.stdout.flush()

    signal.signal(signal.SIGTERM, _interrupt)
    progress = make_progress(len(cases))
    try:
        the_run = Run(options, on_record=progress.on_record, on_lowered=progress.on_lowered,
                      on_flow=announce, on_probe=probed)
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
    if localize:
        _report_localizations(results, args.plot)
    if in_github_actions():
        _emit_github(results)
    sys.stdout.write(f"JUnit: {options.junit_path}\nresults: {options.results_path}\n")
    if third_party.is_file() and third_party.stat().st_size:
        sys.stdout.write(f"third-party warnings: {third_party}\n")
    if interrupted:
        sys.stderr.write("hil: interrupted; results so far are written\n")
        return EXIT_INTERRUPTED, the_run.records
    if not cases:
        return EXIT_OK, the_run.records  # an empty shard: nothing to run is not a failure
    if not the_run.records or not the_run.meta["boards"] or all(
        "error" in b for b in the_run.meta["boards"]
    ):
        sys.stderr.write("hil: no usable board\n")
        return EXIT_INFRA, the_run.records
    return exit_code(Verdict(r["verdict"]) for r in the_run.records), the_run.records


def _report_localizations(results: dict[str, Any], plot: str | None) -> None:
    """One line per localized case; the probes' plot when asked for."""
    from hil.report.localization import localized_cases, plot_localizations
    from hil.report.results import case_key

    localized = localized_cases(results)
    for case in localized:
        block = case["localization"]
        runs = f"{block.get('board_runs', 0)} board runs, at most {block.get('max_board_runs', '-')}"
        sys.stdout.write(f"localization {case_key(case)}: {block.get('message')} [{runs}]\n")
    if plot:
        drawn = plot_localizations(localized, Path(plot))
        sys.stdout.write(f"localization plot: {plot} ({drawn} case(s))\n")


def cmd_localize(args: argparse.Namespace) -> int:
    """`hil localize`: bisect one failing case on a board, or (`--against fp32`) walk its
    A8W8 graph against fp32 on the host."""
    if args.against is not None:
        return _drift(args)
    if args.sqnr_floor is not None:
        raise UsageError("--sqnr-floor: only with --against fp32")
    args.precision = args.precision or "fp32"
    code, records = _run_cases(args, lambda: ([_one_case(args)], (1, 1)), localize=True)
    if code == EXIT_INTERRUPTED or not records or records[0]["verdict"] == "FAIL_MISMATCH":
        return code
    from hil.report.results import case_key
    from hil.verdict import Verdict

    record = records[0]
    verdict = Verdict(record["verdict"])
    board = f" on {record['board']}" if record.get("board") else ""
    ended = f"{case_key(record)} ended {verdict.value}{board}"
    if verdict.is_error:
        sys.stderr.write(f"hil: {ended}: not localized\n")
        return code
    reason = ("it passed: nothing to localize" if verdict.passed
              else "only a FAIL_MISMATCH case can be localized (localization bisects numbers)")
    raise UsageError(f"{ended}: {reason}")


def _one_case(args: argparse.Namespace) -> Any:
    """The one case `--suite`/`--filter`/`--precision` select (UsageError otherwise)."""
    if args.shard != "1/1":
        raise UsageError("--shard: hil localize takes one case")
    if args.precision not in ("fp32", "a8w8"):
        raise UsageError(f"--precision: hil localize takes one precision (fp32 or a8w8), "
                         f"not {args.precision!r}")
    if not args.filter:
        raise UsageError("hil localize: name the case with --filter ID")
    cases, _ = _select_cases(args)
    if len(cases) != 1:
        names = ", ".join(case.key for case in cases[:5]) + (", ..." if len(cases) > 5 else "")
        raise UsageError(f"--filter {args.filter}: {len(cases)} cases match ({names}); hil localize takes "
                         "one (hil run --localize takes many)")
    return cases[0]


def _drift(args: argparse.Namespace) -> int:
    """`hil localize --against fp32`: the A8W8 graph against fp32, node by node, no board."""
    if args.against != "fp32":
        raise UsageError(f"--against: unknown value {args.against!r} (fp32)")
    if args.board or args.inventory:
        raise UsageError("--against fp32 runs on the host only: leave out --board/--inventory")
    args.precision = args.precision or "a8w8"
    if args.precision != "a8w8":
        raise UsageError(f"--against fp32 compares an A8W8 graph with fp32: --precision a8w8, "
                         f"not {args.precision!r}")
    case = _one_case(args)
    floor = DRIFT_FLOOR_DB if args.sqnr_floor is None else args.sqnr_floor
    from hil.localize.drift import drift_against_fp32
    from hil.report.localization import drift_lines, plot_drift
    from hil.report.results import atomic_write_text, sanitise
    from hil.report.thirdparty import FILE_NAME as THIRD_PARTY_LOG
    from hil.report.thirdparty import third_party_to_file

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with third_party_to_file(out / THIRD_PARTY_LOG):
        record = drift_against_fp32(case, _lowering_flow(args.flow), floor)
    path = Path(args.results) if args.results else out / "drift.json"
    document = sanitise({"case": case.key, "drift": record})
    atomic_write_text(path, json.dumps(document, indent=1, allow_nan=False) + "\n")
    sys.stdout.write("\n".join(drift_lines(case.key, record)) + f"\ndrift: {path}\n")
    if args.plot:
        plot_drift(case.key, record, Path(args.plot))
        sys.stdout.write(f"SQNR curve: {args.plot}\n")
    return EXIT_OK


def _latency_plans(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The default latency plan and those of the suites that declare one (manifests'
    `latency:`), with `--iterations` / `--warmup` over all (hil/latency_plan.py)."""
    from hil.latency_plan import manifest_declaration, resolve_plans

    declarations = {}
    for suite in args.suite:
        if suite.endswith((".yaml", ".yml")) or "/" in suite:
            declared = manifest_declaration(Path(suite))
            if declared is not None:
                declarations[declared[0]] = declared[1]
    return resolve_plans(args.latency, declarations, args.iterations, args.warmup)


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
    """`hil lower`: artifacts only (SKIP and known failures do not fail it)."""
    from hil.expectation import settle
    from hil.lower import LoweringFailed, build_artifact
    from hil.verdict import Verdict

    cases, _ = _select_cases(args)
    flow = _lowering_flow(args.flow)
    failed = 0
    for index, case in enumerate(cases):
        folder = Path(args.out) / f"c{index:04d}"
        try:
            artifact = build_artifact(case, flow, args.chipset, folder)
        except LoweringFailed as exc:
            record = settle(case.expect, {"verdict": exc.verdict.value, "message": exc.message})
            failed += Verdict(record["verdict"]).is_failure or Verdict(record["verdict"]).is_error
            sys.stdout.write(f"{record['verdict']:<16} {case.key}  {record['message']}\n")
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
    from hil.report.compare import compare_results, parse_min_delta, parse_threshold, render_markdown
    from hil.report.results import load_results

    threshold = parse_threshold(args.threshold)
    min_delta_ms = parse_min_delta(args.min_delta_ms)
    if args.more and not args.plot:
        raise UsageError("compare: extra results files are only used by --plot PNG")
    paths = [Path(args.base), Path(args.new), *(Path(p) for p in args.more)]
    documents = [(path, load_results(path)) for path in paths]
    comparison = compare_results(documents[0][1], documents[1][1], threshold, min_delta_ms)
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
        handlers = {"run": cmd_run, "localize": cmd_localize, "boards": cmd_boards, "lower": cmd_lower,
                    "report": cmd_report, "merge": cmd_merge, "compare": cmd_compare}
        return handlers[args.command](args)
    except UsageError as exc:
        sys.stderr.write(f"hil: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("hil: interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
