"""Progress while a run runs: plain numbered lines in CI and pipes, a rich bar with coloured
per-case lines on a terminal (a real pty here)."""

from __future__ import annotations

import io
import os
import select
import time
from collections.abc import Iterator

import pytest

from hil.latency import latency_stats
from hil.report.progress import PlainProgress, RichProgress, format_record, make_progress

from . import CASES, case


@pytest.fixture
def pty_stream() -> Iterator[tuple[io.TextIOWrapper, int]]:
    master, slave = os.openpty()
    stream = io.TextIOWrapper(os.fdopen(slave, "wb", buffering=0), encoding="utf-8")
    try:
        yield stream, master
    finally:
        stream.close()
        os.close(master)


def _drain(master: int) -> str:
    data = b""
    while select.select([master], [], [], 0.2)[0]:
        chunk = os.read(master, 65536)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def _read_for(master: int, seconds: float) -> str:
    data = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if select.select([master], [], [], left)[0]:
            data += os.read(master, 65536)
    return data.decode("utf-8", "replace")


def test_the_live_line_and_the_table_show_the_same_statistic_by_the_same_name() -> None:
    """The median (p50): for samples whose mean is pulled up by one slow run, the live line's
    figure is the table's, under the same name."""
    from hil.report.console import make_console, render_table

    record = case("smoke", "fp32", "add", "PASS", latency_ms=latency_stats([0.066, 0.068, 0.068, 0.069, 0.12]))
    assert record["latency_ms"]["avg"] != record["latency_ms"]["p50"]
    line = format_record(record, 1, 1)
    assert f"p50 {record['latency_ms']['p50']:.3f} ms" in line
    table = io.StringIO()
    render_table({"run": {}, "cases": [record]}, make_console(table))
    header, row = [text for text in table.getvalue().splitlines() if "add" in text or "verdict" in text]
    assert "p50 ms" in header and "avg" not in header
    assert f" {record['latency_ms']['p50']:.3f} " in row and f"{record['latency_ms']['avg']:.3f}" not in row


def test_plain_lines_count_and_name_each_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    out = io.StringIO()
    progress = make_progress(len(CASES), out)
    assert isinstance(progress, PlainProgress)
    for record in CASES:
        progress.on_record(record)
    progress.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 7
    assert lines[0] == "[1/7] PASS             smoke.fp32.conv2d [virtual-0] avg 0.400 ms max_abs 1e-06"
    assert lines[3] == "[4/7] SKIP             smoke.fp32.relu6 [-]  flow xnnpack cannot express relu6"
    assert lines[4].endswith("runner died by SIGSEGV")
    progress.on_record(case("s", "fp32", "x", "FAIL_RUN", message="\x1b[31mred\x1b[0m\r\nnext"))
    assert out.getvalue().splitlines()[-1].endswith("1e-06  red next")  # escapes stripped


def test_format_prefers_p50_when_the_board_gave_samples() -> None:
    record = case("s", "fp32", "x", "PASS", latency_ms=latency_stats([1.0, 2.0, 9.0]))
    assert " p50 2.000 ms " in format_record(record, 10, 120)
    assert format_record(record, 10, 120).startswith("[ 10/120] PASS ")


def test_terminal_gets_the_rich_bar_and_ci_gets_plain_lines_even_on_a_terminal(
    pty_stream: tuple[io.TextIOWrapper, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream, master = pty_stream
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    progress = make_progress(2, stream)
    assert isinstance(progress, RichProgress)
    progress.on_record(CASES[0])
    progress.on_record(CASES[2])
    progress.close()
    stream.flush()
    shown = _drain(master)
    assert "\x1b[" in shown  # colours and cursor control: a live display
    assert "smoke.fp32.conv2d" in shown and "smoke.fp32.add" in shown
    assert "2/2" in shown and "1 failed" in shown
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    plain = make_progress(2, stream)
    plain.close()  # its heartbeat ends with it, before the fixture closes the stream
    assert isinstance(plain, PlainProgress)


class _Lowered:
    """What Run hands to on_lowered (hil.lower.pool.Lowering): an artifact or not, cached."""

    def __init__(self, cached: bool, failed: bool = False, key: str = "smoke.fp32.add",
                 seconds: float = 1.5) -> None:
        self.cached = cached
        self.artifact = None if failed else object()
        self.case_key = key
        self.seconds = seconds


def test_plain_progress_says_when_lowering_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    out = io.StringIO()
    progress = make_progress(3, out)
    progress.on_lowered(_Lowered(cached=True))
    progress.on_record(CASES[0])
    progress.on_lowered(_Lowered(cached=False, failed=True))
    progress.on_lowered(_Lowered(cached=True))
    progress.close()
    lines = out.getvalue().splitlines()
    # from the first artifact on (lowering and the boards overlap), not only at the end
    assert lines[0].startswith("lowered 1/3 (1 cache hit) in ")
    assert lines[1].startswith("[1/3] PASS")
    assert lines[2].startswith("lowered 2/3 (1 cache hit, 1 failed) in ")  # lowered, not a cache hit
    assert lines[2].endswith(" s: smoke.fp32.add (1.5 s, failed)")
    assert lines[-1].startswith("lowered 3/3 (2 cache hits, 1 failed) in ")


def test_plain_progress_names_each_lowered_case_and_is_never_silent_long(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In CI a cold suite lowers for minutes: each case lowered gets its line at once, and
    silence while lowering goes on ends in a `still lowering` line (here after 0.2 s, 30 s in
    a run)."""
    monkeypatch.delenv("CI", raising=False)
    out = io.StringIO()
    progress = PlainProgress(12, out, heartbeat_s=0.2)
    try:
        for number in range(3):
            progress.on_lowered(_Lowered(cached=False, key=f"models.fp32.net{number}", seconds=40.0))
        lines = out.getvalue().splitlines()
        assert [line.split(" in ")[0] for line in lines] == [f"lowered {n + 1}/12 (0 cache hits)" for n in range(3)]
        assert [line.split(": ")[1] for line in lines] == [f"models.fp32.net{n} (40.0 s)" for n in range(3)]
        deadline = time.monotonic() + 30
        while "still lowering: 3/12 done after " not in out.getvalue():
            assert time.monotonic() < deadline, out.getvalue()
            time.sleep(0.05)
    finally:
        progress.close()
    assert not progress._heartbeat.is_alive()


def test_terminal_shows_the_lowering_phase_before_any_case(
    pty_stream: tuple[io.TextIOWrapper, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream, master = pty_stream
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    progress = make_progress(2, stream)
    progress.on_lowered(_Lowered(cached=True))
    assert isinstance(progress, RichProgress)
    progress.progress.refresh()
    stream.flush()
    shown = _read_for(master, 0.5)  # the live display keeps refreshing: read a while only
    assert "lowered" in shown and "1/2" in shown and "1 cache hits" in shown
    assert "cases" in shown and "0/2" in shown
    progress.on_lowered(_Lowered(cached=False))
    progress.on_record(CASES[0])
    progress.close()
    stream.flush()
    assert "lowered 2/2 (1 cache hit) in " in _drain(master)


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_heartbeat_ends_quietly_when_its_stream_is_closed() -> None:
    stream = io.StringIO()
    progress = PlainProgress(3, stream, heartbeat_s=0.1)
    stream.close()
    progress._heartbeat.join()  # it ends on its own, without an exception in its thread
    progress.close()
