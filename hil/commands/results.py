"""`hil report`, `hil merge`, `hil compare`: renderings of results.json files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hil.commands.common import emit_github
from hil.errors import UsageError


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
        emit_github(results)
    return exit_code(Verdict(c["verdict"]) for c in results["cases"])


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
