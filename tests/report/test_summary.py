"""The Markdown step summary: what a reviewer reads first, within GitHub's size limit."""

from __future__ import annotations

from hil.latency import latency_stats, stability
from hil.report.summary import SUMMARY_LIMIT_BYTES, render_summary

from . import case, sample_results


def _section(text: str, heading: str) -> list[str]:
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith(("### ", "<details>"))),
        len(lines),
    )
    return lines[start:end]


def test_summary_has_totals_suites_failures_slowest_latency_and_the_command() -> None:
    text = render_summary(sample_results())
    assert text.startswith("## exynos-hil: failed\n")
    assert "**2 passed, 2 failed, 2 errors, 1 skipped, 0 xfail** of 7 case(s)" in text
    assert "> **VIRTUAL** board(s)" in text
    suites = _section(text, "### Suites")
    assert "| smoke.fp32 | virtual-0 | 3 | 2 | 1 | 0 | 0 | 0 | 3.9 |" in suites
    assert "| models.a8w8 | - | 1 | 0 | 0 | 1 | 0 | 0 | 1.3 |" in suites
    failures = _section(text, "### Failures and errors")
    rows = [line for line in failures if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [
        "models.a8w8.mobilenet_v2",
        "smoke.fp32.add",
        "models.a8w8.vit_tiny",
        "models.a8w8.resnet18",
    ]
    assert "| FAIL_MISMATCH | output 0: max abs error 0.5 exceeds tolerance" in rows[1]
    assert "atol 0.0001, rtol 0.0001" in rows[1]
    assert "### Slowest cases (top 6)" in text
    assert text.rstrip().endswith(
        "```sh\ngit checkout 0123abcd\nhil run --suite smoke\n```\n\n"
        "`hil replicate --print` prints the docker command that reruns it in the CI container."
    )


def test_latency_table_copes_with_old_and_new_records() -> None:
    results = sample_results()
    results["cases"] = [
        case("s", "fp32", "old", "PASS"),
        case("s", "fp32", "new", "PASS", latency_ms=latency_stats([1.0, 2.0, 3.0, 4.0])),
        case("s", "fp32", "none", "PASS", latency_ms=None),
    ]
    results["cases"][1]["latency_ms"].update(stability(results["cases"][1]["latency_ms"], 0.10))
    results["cases"][1]["memory"] = {"program_bytes": 2048, "peak_rss_kib": 10240}
    text = render_summary(results)
    assert "| case | board | init | load | first | p50 | p90 | p99 | mean | trimmed | std | cv | n |" in text
    rows = [line for line in text.split("\n") if line.startswith("| `s.fp32.")]
    latency = {row.split("`")[1]: row for row in rows if row.count("|") == 17}
    # schema 1: the runner's numbers, avg read as the mean; no samples, so no verdict
    assert latency["s.fp32.old"].endswith(
        "| 0.100 | 2.000 | 0.500 | - | - | - | 0.400 | - | - | - | - | - | - | - |")
    # 1 2 3 4: std 1.291, cv 0.516 > 0.10: unstable
    assert latency["s.fp32.new"].endswith(
        "| - | - | - | 2.500 | 3.700 | 3.970 | 2.500 | 2.500 | 1.291 | 0.516 | 4 | 2.0 | 10.0 | "
        "UNSTABLE: cv 0.516 above the limit 0.1 |")
    assert "s.fp32.none" not in latency


def test_cells_cannot_break_the_table_or_inject_html() -> None:
    results = sample_results()
    results["cases"] = [
        case("s", "fp32", "x", "FAIL_RUN", message="a | b <img src=x onerror=alert(1)>\x1b[31m"),
    ]
    (row,) = [line for line in render_summary(results).split("\n") if "FAIL_RUN" in line]
    assert "a \\| b &lt;img src=x onerror=alert(1)&gt;" in row
    assert "\x1b" not in row and "<img" not in row


def test_a_real_passing_run_says_passed_without_the_virtual_note() -> None:
    results = sample_results()
    results["run"]["virtual"] = False
    results["run"]["boards"][0]["virtual"] = False
    results["cases"] = [case("s", "fp32", f"c{i}", "PASS") for i in range(3)]
    text = render_summary(results)
    assert text.startswith("## exynos-hil: passed\n")
    assert "VIRTUAL" not in text
    assert "### Failures" not in text


def test_huge_run_is_cut_by_rows_within_the_limit_keeping_the_failures_first() -> None:
    results = sample_results()
    results["cases"] = [
        case("ops", "fp32", f"op{i:05d}", "FAIL_MISMATCH", message="m" * 400) for i in range(4000)
    ] + [case("ops", "fp32", f"ok{i:05d}", "PASS") for i in range(4000)]
    text = render_summary(results)
    size = len(text.encode())
    assert SUMMARY_LIMIT_BYTES - 4096 < size <= SUMMARY_LIMIT_BYTES
    failures = _section(text, "### Failures and errors (4000, worst first)")
    shown = sum(line.startswith("| `") for line in failures)
    assert 1000 < shown < 4000
    assert f"*{4000 - shown} more failures/errors not shown (step summary size limit)" in text
    assert "### Suites" in text and "### Reproduce" in text  # the fixed parts survive


def test_tiny_budgets_drop_sections_then_everything() -> None:
    results = sample_results()
    header_only = render_summary(results, limit_bytes=1200)
    assert len(header_only.encode()) <= 1200
    assert "### Reproduce" in header_only and "<details>" not in header_only
    assert render_summary(results, limit_bytes=100) == ""


def test_the_capacity_lost_to_recovery_is_one_line_above_the_boards_and_absent_from_older_runs() -> None:
    document = sample_results()
    assert "Capacity lost" not in render_summary(document)  # a results.json before version 4
    document["run"]["boards"] = [{"name": "a", "board_seconds_out": 30.4}, {"name": "b", "board_seconds_out": 0}]
    document["run"]["capacity_lost"] = {"board_seconds_out": 30.4, "board_seconds": 400.0, "fraction": 0.076}
    boards = _section(render_summary(document), "### Boards")
    assert ("Capacity lost to recovery: 30 of 400 board-seconds out of the run (7.6 %) — a 30 s."
            in boards)
    document["run"]["capacity_lost"].update(board_seconds_out=None, fraction="x")  # hand-edited
    assert "Capacity lost to recovery: 0 of 400 board-seconds out of the run (0.0 %)" in render_summary(document)
