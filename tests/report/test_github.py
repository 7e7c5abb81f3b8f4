"""GitHub Actions output, read back the way the runner reads workflow commands: at most 10
error annotations (worst first) and one notice, exact escaping, device logs that cannot issue
commands, a group per suite, and a step summary within GitHub's 1 MiB."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from hil.cli import main
from hil.report.github import (
    ANNOTATION_CHARS,
    MAX_ANNOTATIONS,
    annotations,
    append_step_summary,
    emit_github,
    escape_data,
    escape_property,
    log_groups,
)
from hil.report.results import save_results
from hil.report.summary import SUMMARY_LIMIT_BYTES

from . import case, sample_results

MIB = 1024 * 1024


def _unescape(text: str, prop: bool = False) -> str:
    if prop:
        text = text.replace("%3A", ":").replace("%2C", ",")
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def parse_commands(log: str) -> list[tuple[str, dict[str, str], str]]:
    """Workflow commands in `log` as the Actions runner sees them: a line whose left-stripped
    text starts with `::`, nothing between `::stop-commands::T` and `::T::`."""
    found = []
    stopped = None
    for line in log.split("\n"):
        if stopped is not None:
            if line == f"::{stopped}::":
                stopped = None
            continue
        text = line.lstrip()
        if not text.startswith("::") or "::" not in text[2:]:
            continue
        end = text.index("::", 2)
        name, _, props = text[2:end].partition(" ")
        data = _unescape(text[end + 2 :])
        if name == "stop-commands":
            stopped = data
            continue
        properties = {}
        for item in filter(None, props.split(",")):
            key, _, value = item.partition("=")
            properties[key] = _unescape(value, prop=True)
        found.append((name, properties, data))
    assert stopped is None, "stop-commands never resumed"
    return found


def _failing_results(count: int) -> dict:
    results = sample_results()
    results["cases"] = [
        case(
            "ops",
            "fp32",
            f"op{i:03d}",
            "FAIL_MISMATCH",
            message=f"output 0: max abs error {i / 1000:g} exceeds tolerance",
            detail="worst at [0, 1]\n" + "d" * 2000,
            outputs=[{"index": 0, "max_abs": i / 1000, "atol": 1e-4, "rtol": 1e-4, "ok": False}],
            logs={"runner": f"::error::fake from the device {i}\n" + "log line\n" * 100},
        )
        for i in range(count)
    ]
    results["cases"].append(case("ops", "fp32", "crash", "FAIL_RUN", message="SIGSEGV"))
    return results


def test_200_failing_cases_give_ten_errors_one_notice_and_a_summary_under_1_mib(
    tmp_path: Path,
) -> None:
    results = _failing_results(200)
    out = io.StringIO()
    summary = tmp_path / "step_summary.md"
    emit_github(results, out, summary)
    commands = parse_commands(out.getvalue())
    errors = [c for c in commands if c[0] == "error"]
    notices = [c for c in commands if c[0] == "notice"]
    assert len(errors) == MAX_ANNOTATIONS
    assert len(notices) == 1
    # worst first: the crash, then the mismatches with the largest errors
    titles = [props["title"] for _, props, _ in errors]
    assert titles[0].startswith("FAIL_RUN ops.fp32.crash on virtual-0 (VIRTUAL)")
    assert [t.split()[1] for t in titles[1:]] == [f"ops.fp32.op{i:03d}" for i in range(199, 190, -1)]
    assert notices[0][2].startswith("191 more case(s) not annotated")
    notice = notices[0][2]
    assert len(notice) <= ANNOTATION_CHARS
    assert "ops.fp32.op190 (FAIL_MISMATCH), ops.fp32.op189 (FAIL_MISMATCH)" in notice
    listed = notice.count("(FAIL_MISMATCH)")
    assert notice.endswith(f", and {191 - listed} more")
    # nothing the fake device printed became a command
    assert not any("fake from the device" in data for _, _, data in commands)
    size = summary.stat().st_size
    assert 0 < size < MIB
    text = summary.read_text()
    assert "Failures and errors (201, worst first)" in text
    assert "not shown" not in text  # 200 rows fit whole


def test_escaping_round_trips_through_the_runner_rules() -> None:
    nasty = "100% wrong\r\nline two: a,b ::error::x %0A"
    assert escape_data(nasty) == "100%25 wrong%0D%0Aline two: a,b ::error::x %250A"
    assert escape_property(nasty) == ("100%25 wrong%0D%0Aline two%3A a%2Cb %3A%3Aerror%3A%3Ax %250A")
    results = sample_results()
    results["cases"] = [
        case(
            "smoke",
            "fp32",
            "a,b:c",
            "FAIL_MISMATCH",
            message=nasty,
            detail="",
            file="my dir/cases,1.yaml",
            line=7,
        )
    ]
    ((name, props, data),) = parse_commands("\n".join(annotations(results)))
    assert name == "error"
    assert props == {
        "file": "my dir/cases,1.yaml",
        "line": "7",
        "title": "FAIL_MISMATCH smoke.fp32.a,b:c on virtual-0 (VIRTUAL)",
    }
    assert data == "100% wrong line two: a,b ::error::x %0A"  # the message is one line


def test_annotation_message_is_capped_at_4096_characters() -> None:
    results = sample_results()
    results["cases"] = [case("s", "fp32", "x", "ERROR_INTERNAL", message="m", detail="é" * 10000)]
    ((_, _, data),) = parse_commands("\n".join(annotations(results)))
    assert len(data) == ANNOTATION_CHARS and data.endswith("…")


def test_undelegated_passes_are_warnings_and_passes_are_silent() -> None:
    commands = parse_commands("\n".join(annotations(sample_results())))
    kinds = [name for name, _, _ in commands]
    assert kinds == ["error"] * 4 + ["warning"]
    assert commands[-1][1]["title"].startswith("PASS_UNDELEGATED smoke.fp32.linear")
    assert not any("conv2d" in props.get("title", "") for _, props, _ in commands)


def test_groups_wrap_device_logs_in_stop_commands_with_a_fresh_token() -> None:
    results = sample_results()
    results["cases"][2]["logs"] = {"runner": "::endgroup::\n::error title=x::injected\n::add-mask::a"}
    first = "\n".join(log_groups(results))
    second = "\n".join(log_groups(results))
    commands = parse_commands(first)
    assert [(n, d) for n, _, d in commands] == [
        ("group", "smoke.fp32: 1 PASS, 1 PASS_UNDELEGATED, 1 FAIL_MISMATCH, 1 SKIP"),
        ("endgroup", ""),
        ("group", "models.a8w8: 1 FAIL_RUN, 1 ERROR_INFRA, 1 ERROR_INTERNAL"),
        ("endgroup", ""),
    ]
    assert "::error title=x::injected" in first  # shown in the log, not executed
    tokens = [line.split("::")[2] for line in first.split("\n") if line.startswith("::stop-commands::")]
    assert len(tokens) == 2 and len(set(tokens)) == 2 and all(len(t) == 32 for t in tokens)
    assert tokens[0] not in second


def test_step_summary_fits_in_what_is_left_of_the_step_budget(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_bytes(b"x" * (SUMMARY_LIMIT_BYTES - 20 * 1024))  # an earlier command's part
    written = append_step_summary(_failing_results(500), summary)
    assert 0 < written <= 20 * 1024
    assert summary.stat().st_size <= SUMMARY_LIMIT_BYTES
    assert "more failures/errors not shown" in summary.read_text()


def test_report_github_prints_commands_and_appends_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.json"
    save_results(sample_results(), path)
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["report", str(path), "--github"]) == 1
    commands = parse_commands(capsys.readouterr().out)
    assert [n for n, _, _ in commands].count("error") == 4
    text = summary.read_text()
    assert text.startswith("# earlier\n## exynos-hil: failed")
