"""`hil dashboard` without a browser: bad input is one line and exit 3, older results files and
unmerged shards are read, the flags are `hil compare`'s, capacity lost is read when recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hil.cli import main
from hil.dashboard import model
from hil.latency import latency_stats
from hil.report.compare import compare_results
from hil.report.results import load_results, save_results
from tests.report import case, sample_results


def _run(tmp_path: Path, name: str, started: str, cases: list[dict], **run_fields) -> Path:
    document = sample_results()
    document["cases"] = cases
    document["run"].update(started=started, id=name, **run_fields)
    path = tmp_path / name / "results.json"
    save_results(document, path)
    return path


def _latency(center: float) -> dict:
    return latency_stats([center * (1 + 0.01 * ((i % 5) - 2)) for i in range(20)])


@pytest.mark.parametrize("content, says", [
    ("[1, 2]", "not a results document"),
    ('{"schema": "exynos-hil/results", "version": 99, "run": {}, "cases": []}', "field 'version' is 99"),
    ('{"schema": "something-else"}', "field 'schema'"),
    ("not json", "not valid JSON"),
])
def test_bad_input_is_one_line_naming_the_file_and_exit_3(tmp_path, capsys, content, says) -> None:
    good = _run(tmp_path, "good", "2026-11-30T02:17:00Z", [case("smoke", "fp32", "add", "PASS")])
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["dashboard", str(good), str(bad), "--out", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and says in err and "Traceback" not in err
    assert not (tmp_path / "out" / "index.html").exists()


def test_a_run_without_a_start_time_and_a_missing_file_are_exit_3(tmp_path, capsys) -> None:
    undated = _run(tmp_path, "undated", "2026-11-30T02:17:00Z", [])
    document = json.loads(undated.read_text())
    document["run"]["started"] = None
    undated.write_text(json.dumps(document))
    assert main(["dashboard", str(undated), "--out", str(tmp_path / "out")]) == 3
    assert "field 'run.started' is None" in capsys.readouterr().err
    assert main(["dashboard", str(tmp_path / "nowhere.json"), "--out", str(tmp_path / "out")]) == 3
    assert "no such results file" in capsys.readouterr().err


def test_flags_are_hil_compares_latency_regressions_night_against_the_previous_one(tmp_path) -> None:
    slow = {"a": 1.0, "b": 1.0}
    paths = []
    for day, factor in enumerate((1.0, 1.0, 1.3, 1.3)):
        cases = [case("ops", precision, name, "PASS", latency_ms=_latency(base * (factor if name == "a" else 1)))
                 for precision in ("fp32", "a8w8") for name, base in slow.items()]
        paths.append(_run(tmp_path, f"n{day}", f"2026-11-2{day}T02:17:00Z", cases))
    runs = [model.dated_run(p, load_results(p)) for p in paths]
    board = model.build(runs)
    assert {(f.night, f.lane[2], f.key) for f in board.flags} == {
        ("2026-11-22", "fp32", "ops.fp32.a"), ("2026-11-22", "a8w8", "ops.a8w8.a")}
    reference = compare_results(runs[1].document, runs[2].document)
    assert {r.key for r in reference.regressions} == {f.key for f in board.flags}
    assert model.build(runs, threshold=0.5).flags == []  # the same --threshold as hil compare


def test_unmerged_shards_of_a_night_are_one_cell_and_older_versions_are_read(tmp_path) -> None:
    first = _run(tmp_path, "s1", "2026-11-20T02:17:00Z", [case("smoke", "fp32", "a", "PASS")], shard="1/2")
    second = _run(tmp_path, "s2", "2026-11-20T02:40:00Z", [case("smoke", "fp32", "b", "FAIL_RUN")],
                  shard="2/2")
    old = json.loads(first.read_text())
    old.update(version=1)
    old["run"]["started"] = "2026-11-19T02:17:00Z"
    (tmp_path / "old.json").write_text(json.dumps(old))
    paths = [first, second, tmp_path / "old.json"]
    board = model.build([model.dated_run(p, load_results(p)) for p in paths])
    cells = board.matrix[("smoke", "fp32", "E9955", "xnnpack")]
    assert cells["2026-11-20"].total == 2 and cells["2026-11-20"].failing == ["smoke.fp32.b: FAIL_RUN"]
    assert cells["2026-11-19"].state == "pass"
    assert "1 failed (E9955 fp32 smoke)" in model.summary_line(board, "2026-11-20")


def test_capacity_lost_is_read_where_a_run_records_it(tmp_path) -> None:
    boards = [{"name": "a", "recovery": [{"step": "reboot", "recovered": False}],
               "probation": [{"out_s": 30, "back": True}, {"out_s": 30, "back": False}],
               "quarantined": "recovery failed"},
              {"name": "b", "probation": [{"out_s": 30, "back": True}]},
              {"name": "c", "error": "preflight: chipset mismatch"}]
    recorded = _run(tmp_path, "r", "2026-11-20T02:17:00Z", [], boards=boards,
                    capacity_lost={"board_seconds_out": 60.0, "board_seconds": 240.0, "fraction": 0.25})
    older = _run(tmp_path, "o", "2026-11-19T02:17:00Z", [], boards=boards)
    health = model.health_of(model.Run(recorded, load_results(recorded)))
    assert (health.boards, health.quarantines, health.recoveries, health.recoveries_failed) == (2, 3, 1, 1)
    assert health.capacity_lost == 0.25 and health.out_at_end == ["a: recovery failed"]
    assert model.health_of(model.Run(older, load_results(older))).capacity_lost is None


def test_a_dollar_in_a_case_id_is_text_in_the_chart_not_tex() -> None:
    # matplotlib reads `$...$` as math: "b$$" or an unclosed "$x_{" raised at savefig
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hil.dashboard.charts import to_svg

    figure, axes = plt.subplots()
    axes.set_yticks([0, 1])
    axes.set_yticklabels(["op$x_{", "b$$"])
    svg = to_svg(figure, "dollars")
    plt.close(figure)
    assert "op$x_{" in svg and "b$$" in svg


def test_a_cell_that_regressed_shows_the_hil_bisect_command_that_would_bisect_it(tmp_path) -> None:
    """A case that passed the night before on the same chipset and flow and fails now: its cell
    carries `hil bisect --good THAT_NIGHT --bad THIS_NIGHT --filter SUITE.PRECISION.*`, which
    hil's own parser takes; a case failing both nights does not."""
    import shlex

    from hil.cli import build_parser
    from hil.dashboard.page import render

    first = _run(tmp_path, "n1", "2026-11-20T02:17:00Z",
                 [case("ops", "fp32", "add", "PASS"), case("ops", "a8w8", "mul", "FAIL_MISMATCH")])
    second = _run(tmp_path, "n2", "2026-11-21T02:17:00Z",
                  [case("ops", "fp32", "add", "FAIL_MISMATCH"), case("ops", "a8w8", "mul", "FAIL_MISMATCH")])
    board = model.build([model.dated_run(p, load_results(p)) for p in (first, second)])
    cells = {(suite, precision): nights for (suite, precision, _, _), nights in board.matrix.items()}
    command = cells[("ops", "fp32")]["2026-11-21"].bisect
    assert command == f"hil bisect --good {first} --bad {second} --filter 'ops.fp32.*'"
    assert cells[("ops", "fp32")]["2026-11-20"].bisect is None
    assert cells[("ops", "a8w8")]["2026-11-21"].bisect is None  # it failed the night before too
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert (args.good, args.bad, args.filter) == (str(first), str(second), ["ops.fp32.*"])
    page = render(board)
    assert f'data-bisect="{command.replace(chr(39), "&#39;")}"' in page and "1 cell(s) regressed" in page
