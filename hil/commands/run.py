"""`hil run`: check the options, run the cases (hil/run) under the stop signals
(hil/interrupts.py), then the table, the localizations, GitHub output and the exit code."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hil.commands.common import cache_dir, choice, emit_github, lab_server, select_cases, writable
from hil.errors import UsageError
from hil.verdict import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK
from hil.virtual.offhost import parse_device_time


def cmd_run(args: argparse.Namespace) -> int:
    """`hil run`: the whole pipeline."""
    if args.plot and not args.localize:
        raise UsageError("--plot: draws localizations: use it with --localize")
    code, _ = run_cases(args, lambda: select_cases(args), args.localize)
    return code


def run_cases(args: argparse.Namespace, select: Callable[[], tuple[list[Any], tuple[int, int]]],
               localize: bool) -> tuple[int, Iterable[dict[str, Any]]]:
    """Run the cases `select()` gives as `hil run` does (boards, reports, the table), once
    the options are checked; the exit code and the case records (read back from results.json
    as they are iterated)."""
    from hil.pool.labgrid import board_sources

    for name in ("timeout", "retries", "iterations", "warmup", "jobs", "idle_timeout",
                 "boot_timeout"):
        value = getattr(args, name)
        low = 0 if name in ("retries", "warmup") else 1
        if value is not None and not low <= value < math.inf:  # nan and inf are out too
            raise UsageError(f"--{name.replace('_', '-')}: {value} is out of range")
    if args.board_wait < 0:
        raise UsageError(f"--board-wait: {args.board_wait} is out of range")
    if not 0 < args.flash_timeout < math.inf:  # nan and inf are out too
        raise UsageError(f"--flash-timeout: {args.flash_timeout} is out of range")
    adb_server = lab_server(args.adb_server)
    entries, sources = board_sources(args.inventory, args.board, args.labgrid)
    if getattr(args, "provision", False):
        from hil.commands.flash import check_images

        check_images(entries, args.inventory)
    out = writable(args.out, "--out", folder=True)
    junit_path = writable(args.junit or out / "junit.xml", "--junit")
    results_path = writable(args.results or out / "results.json", "--results")
    writable(getattr(args, "plot", None), "--plot")
    from hil.report.thirdparty import FILE_NAME as THIRD_PARTY_LOG
    from hil.report.thirdparty import third_party_to_file

    third_party = out / THIRD_PARTY_LOG
    # from the first import of torch on: its warnings (and executorch's) go to the file
    with third_party_to_file(third_party):
        code, records = _select_and_run(args, select, localize, out, junit_path, results_path,
                                        adb_server, entries, sources)
    if third_party.is_file() and third_party.stat().st_size:
        say(f"hil: third-party warnings: {third_party}")
    return code, records


def _select_and_run(args: argparse.Namespace, select: Callable[[], tuple[list[Any], tuple[int, int]]],
                    localize: bool, out: Path, junit_path: Path, results_path: Path,
                    adb_server: str | None, entries: list[Any], sources: list[Any],
                    ) -> tuple[int, Iterable[dict[str, Any]]]:
    """`run_cases` from the suites' loading on, inside the third-party redirection: hil's
    status lines go to stderr (`say`), what the run reports to stdout."""
    say(f"hil: loading suite(s) {', '.join(args.suite or ['smoke'])} ...")
    cases, shard = select()
    if args.flow == "enn":  # no board can change that: say it before starting any
        from hil.sdk import require_enn_adaptor

        require_enn_adaptor()
    latency, suite_latency = latency_plans(args)
    if args.runner_profile is not None:
        from hil.runner.profiles import profile_named

        profile_named(args.runner_profile)
    runner = Path(args.runner) if args.runner else None
    if runner is not None and not runner.is_file():
        raise UsageError(f"--runner (or $HIL_RUNNER): file not found: {runner}")

    from hil.interrupts import Stop, StopSignals
    from hil.report.console import render_table
    from hil.report.github import in_github_actions
    from hil.report.progress import make_progress
    from hil.run import Run, RunOptions
    from hil.verdict import Verdict, exit_code

    options = RunOptions(
        cases=tuple(cases), boards=(), flow=args.flow,
        chipset=args.chipset, out_dir=out,
        results_path=results_path, junit_path=junit_path,
        shard=shard, timeout_s=args.timeout, retries=args.retries,
        iterations=latency.iterations, warmup=latency.warmup, runner=runner,
        latency=latency, suite_latency=suite_latency,
        command=tuple(["hil", *sys.argv[1:]]),
        cache_dir=None if args.no_cache else cache_dir(args.cache_dir),
        jobs=args.jobs,
        virtual_link=choice(args.virtual_link, ("none", "usb2", "usb3"), "--virtual-link"),
        virtual_device_time=(None if args.virtual_device_time is None else
                             parse_device_time(args.virtual_device_time, "--virtual-device-time")),
        inventory=tuple(entries), idle_timeout_s=args.idle_timeout,
        boot_timeout_s=args.boot_timeout, runner_profile=args.runner_profile,
        adb_server=adb_server, board_wait_s=args.board_wait, localize=localize,
        keep_outputs=args.keep_outputs,
        provision=getattr(args, "provision", False), flash_timeout_s=args.flash_timeout,
        sources=tuple(sources),
    )

    def announce(flow: str, reason: str) -> None:
        say(f"hil run {len(cases)} case(s), flow {flow} ({reason}), chipset {args.chipset}, "
            f"boards: {', '.join(e.name for e in the_run.pool.entries)}")

    def probed(case: Any, entry: dict[str, Any]) -> None:
        from hil.report.localization import probe_line

        sys.stdout.write(probe_line(case.key, entry) + "\n")
        sys.stdout.flush()

    say(f"hil: {len(cases)} case(s) selected; bringing up board(s) "
        f"{', '.join(e.name for e in entries)} and lowering in {args.jobs} worker(s) "
        f"({'no cache' if options.cache_dir is None else f'cache {options.cache_dir}'}) ...")
    progress = make_progress(len(cases))
    stop = Stop()
    try:
        the_run = Run(options, on_record=progress.on_record, on_lowered=progress.on_lowered,
                      on_flow=announce, on_probe=probed, stop=stop)
    except BaseException:
        progress.close()  # leave no progress bar on the terminal
        raise
    try:
        with StopSignals(stop):
            the_run.execute()
    finally:
        progress.close()  # the run wrote results.json and JUnit on its way out, however it ended
    interrupted = the_run.interrupted
    results = the_run.recorder.results()  # its cases read from results.json as they are iterated
    render_table(results)
    if localize:
        _report_localizations(results, args.plot)
    if in_github_actions():
        emit_github(results)
    sys.stdout.write(f"JUnit: {options.junit_path}\nresults: {options.results_path}\n")
    sys.stdout.flush()
    if interrupted:
        say("hil: interrupted; results so far are written")
        return EXIT_INTERRUPTED, the_run.records
    if not cases:
        return EXIT_OK, the_run.records  # an empty shard: nothing to run is not a failure
    if not the_run.recorder.count or not the_run.meta["boards"] or all(
        "error" in b for b in the_run.meta["boards"]
    ):
        say("hil: no usable board")
        return EXIT_INFRA, the_run.records
    return exit_code(Verdict(name) for name in the_run.recorder.counts), the_run.records


def say(line: str) -> None:
    """A status line of hil's (what the run is doing now) on stderr, at once: stdout carries
    only what the run reports (the case lines, the table, where its files are)."""
    from hil.report.thirdparty import hil_stderr

    stream = hil_stderr()
    stream.write(line + "\n")
    stream.flush()


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


def latency_plans(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
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
