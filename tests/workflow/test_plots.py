"""Every PNG hil draws, as a user reads it: the localization plot's title
is whole, its SQNR axis has no offset and its x axis names the ops; the trend plot marks the
runs that failed."""

from __future__ import annotations

from pathlib import Path

from hil.latency import latency_stats
from hil.report.localization import localization_figure, plot_localizations
from hil.report.plot import plot_trend, trend_figure
from hil.report.results import load_results, save_results
from tests.report import case, sample_results

OPS = ["conv2d", "relu", "add", "hardswish", "mean", "linear", "softmax", "mul"]


def _localized() -> dict:
    probes = [{"index": i, "name": f"aten_{op}_{i}", "op_name": op, "module": f"block.{i}",
               "board_run": True, "max_abs": 1e-7 if i < 3 else 0.4, "sqnr_db": 6.0200001 if i < 3 else 6.02,
               "diverged": i >= 3, "verdict": "FAIL_MISMATCH" if i >= 3 else "PASS"}
              for i, op in enumerate(OPS)]
    message = ("first diverging op: hardswish at block.3 (aten.hardswish.default), max abs error 0.4 "
               "over atol 1e-3 + 2 steps, SQNR 6.0 dB; the ops before it are within tolerance " * 2)
    return case("models", "a8w8", "mobilenet_v3_with_a_long_case_id", "FAIL_MISMATCH", localization={
        "board": "127.0.0.1:5555", "message": message, "nodes": len(OPS), "board_runs": 4,
        "max_board_runs": 5, "probes": probes, "first_diverging": probes[3]})


def test_the_localization_plot_is_readable(tmp_path: Path) -> None:
    figure, drawn = localization_figure([_localized()])
    figure.canvas.draw()
    errors, sqnrs = figure.axes
    title = errors.get_title(loc="left")
    assert drawn == 1 and all(len(line) <= 150 for line in title.splitlines())
    assert "mobilenet_v3_with_a_long_case_id" in title  # the whole title, wrapped
    assert sqnrs.yaxis.get_major_formatter().get_offset() == ""  # no "1e-7+6.02"
    names = [t.get_text() for t in sqnrs.get_xticklabels()]
    assert names == [f"{i} {op}" for i, op in enumerate(OPS)]
    width = figure.get_window_extent().width
    renderer = figure.canvas.get_renderer()
    for text in (errors.title, errors._left_title):
        box = text.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width  # not cut at either edge
    plot_localizations([_localized()], tmp_path / "localization.png")
    assert (tmp_path / "localization.png").stat().st_size > 10_000


def test_the_trend_plot_marks_the_runs_that_failed(tmp_path: Path) -> None:
    runs = []
    for index, verdict in enumerate(["PASS", "FAIL_MISMATCH", "PASS"]):
        document = sample_results()
        document["run"].update(id=f"run-{index}", started=f"2026-12-0{index + 1}T02:17:00Z")
        document["cases"] = [case("smoke", "fp32", "conv2d", verdict,
                                  latency_ms=latency_stats([1.0 + index, 1.1 + index, 1.2 + index]))]
        path = tmp_path / f"r{index}.json"
        save_results(document, path)
        runs.append((path, load_results(path)))
    figure, _ = trend_figure(runs)
    ticks = figure.axes[0].get_xticklabels()
    assert [t.get_text().endswith("1 failed") for t in ticks] == [False, True, False]
    assert ticks[1].get_color() == "tab:red" and ticks[0].get_color() != "tab:red"
    assert plot_trend(runs, tmp_path / "trend.png") == 1


def test_in_a_pipe_the_lowering_is_said_from_the_first_artifact() -> None:
    import io
    from types import SimpleNamespace

    from hil.report.progress import PlainProgress

    stream = io.StringIO()
    progress = PlainProgress(8, stream)
    for _ in range(8):
        progress.on_lowered(SimpleNamespace(cached=False, artifact=object()))
    lines = stream.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "lowered 1/8", "lowered 2/8", "lowered 4/8", "lowered 6/8", "lowered 8/8"]


def test_a_run_says_what_it_does_from_the_first_second(network_run: Path) -> None:
    first, second = (network_run.parent / "stdout.txt").read_text().splitlines()[:2]
    assert first.startswith("hil: loading suite(s) ")
    assert second.startswith("hil: 3 case(s) selected; bringing up board(s) ")
