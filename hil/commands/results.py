"""`hil report`, `hil merge`, `hil compare`: renderings of results.json files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hil.commands.common import emit_github, writable


def cmd_report(args: argparse.Namespace) -> int:
    """`hil report`: re-render from results.json."""
    from hil.report.console import render_table
    from hil.report.junit import write_junit
    from hil.report.results import incomplete_line, load_results
    from hil.verdict import EXIT_INFRA, Verdict, exit_code

    writable(args.junit, "--junit")
    writable(args.summary, "--summary")
    results = load_results(Path(args.results))
    if args.junit:
        write_junit(results, Path(args.junit))
    if args.summary:
        from hil.report.results import atomic_write_text
        from hil.report.summary import render_summary

        atomic_write_text(Path(args.summary), render_summary(results))
    render_table(results)
    if args.github:
        emit_github(results)
    code = exit_code(Verdict(c["verdict"]) for c in results["cases"])
    incomplete = incomplete_line(results, limit=20)
    if incomplete:  # never green: what did not run was not tested
        sys.stderr.write(f"hil: {incomplete}\n")
        code = code or EXIT_INFRA
    return code


def cmd_merge(args: argparse.Namespace) -> int:
    """`hil merge`: shards' results.json → one results.json (and JUnit)."""
    from hil.report.console import format_totals
    from hil.report.junit import write_junit
    from hil.report.merge import merge_results
    from hil.report.results import load_results, save_results
    from hil.verdict import EXIT_INFRA, Verdict, exit_code

    writable(args.out, "--out")
    writable(args.junit, "--junit")
    merged = merge_results([(Path(p), load_results(Path(p))) for p in args.inputs])
    save_results(merged, Path(args.out))
    if args.junit:
        write_junit(merged, Path(args.junit))
    sys.stdout.write(
        f"merged {len(args.inputs)} file(s), {len(merged['cases'])} case(s) -> {args.out}: "
        f"{format_totals(merged)}\n"
    )
    code = exit_code(Verdict(c["verdict"]) for c in merged["cases"])
    if merged["run"].get("missing_shards"):  # a nightly that lost a shard is not green
        sys.stderr.write(f"hil: error: shard(s) missing: {', '.join(merged['run']['missing_shards'])}"
                         f" (their cases were not run; merged all the same)\n")
        code = code or EXIT_INFRA
    return code


def cmd_compare(args: argparse.Namespace) -> int:
    """`hil compare`: regressions of the last file (NEW) against the first (BASE) as Markdown;
    the files between only feed the --plot trend; exit 1 on a regression or a missing case."""
    from hil.report.compare import (
        LATENCY_REGRESSION,
        compare_results,
        parse_min_delta,
        parse_threshold,
        render_markdown,
    )
    from hil.report.results import load_results

    threshold = parse_threshold(args.threshold)
    if "%" not in args.threshold:  # `--threshold 0.1` is 0.1 %, not 10 %: say so
        sys.stderr.write(f"hil: --threshold {args.threshold} is read as {threshold * 100:g}% "
                         f"(write {args.threshold}% to say so)\n")
    min_delta_ms = parse_min_delta(args.min_delta_ms)
    writable(args.plot, "--plot")
    paths = [Path(args.base), *(Path(p) for p in args.more), Path(args.new)]
    documents = [(path, load_results(path)) for path in paths]
    if args.more and not args.plot:
        sys.stderr.write(f"hil: compare: {paths[0]} (base) with {paths[-1]} (new); the "
                         f"{len(args.more)} file(s) between are drawn only by --plot PNG\n")
    comparison = compare_results(documents[0][1], documents[-1][1], threshold, min_delta_ms)
    sys.stdout.write(render_markdown(comparison, paths[0], paths[-1], args.allow_missing))
    if args.plot:
        from hil.report.plot import plot_trend

        rings = [(len(documents) - 1, row.key, row.latency_ms[1]) for row in comparison.regressions
                 if LATENCY_REGRESSION in row.statuses and row.latency_ms[1] is not None]
        drawn = plot_trend(documents, Path(args.plot), rings=rings)
        sys.stdout.write(f"\ntrend plot: {args.plot} ({drawn} case(s), {len(documents)} runs)\n")
    missing = [row.key for row in comparison.missing]
    if missing and not args.allow_missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        sys.stderr.write(f"hil: {len(missing)} case(s) of the base are missing from the new run "
                         f"(not run, not compared): {shown}; --allow-missing accepts that\n")
    return 1 if comparison.failed(args.allow_missing) else 0
