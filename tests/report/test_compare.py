"""`hil compare`: latency and accuracy regressions between two runs (exit 1), a Markdown table,
and a PNG trend over several runs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from PIL import Image

from hil.cli import main
from hil.errors import UsageError
from hil.latency import latency_stats, stability
from hil.report.compare import compare_results, parse_threshold
from hil.report.results import load_results, save_results

from . import case, sample_results

BASE_MS = {"conv2d": 2.0, "linear": 1.0, "add": 0.5, "softmax": 0.8}


def _outputs(max_abs: float, sqnr: float) -> list[dict]:
    return [{"index": 0, "max_abs": max_abs, "sqnr_db": sqnr, "atol": 1e-4, "rtol": 1e-4, "ok": True}]


def _run(tmp_path: Path, name: str, started: str, scale: dict[str, float], **changes: dict) -> Path:
    """A results file with one case per BASE_MS entry: 20 latency samples around
    BASE_MS * scale, and `changes` applied to named cases."""
    document = sample_results()
    document["run"].update(id=name, started=started)
    document["cases"] = []
    for case_id, ms in BASE_MS.items():
        center = ms * scale.get(case_id, 1.0)
        samples = [center * (1 + 0.01 * ((i % 5) - 2)) for i in range(20)]
        record = case(
            "smoke", "fp32", case_id, "PASS", latency_ms=latency_stats(samples), outputs=_outputs(1e-6, 120.0)
        )
        record.update(changes.get(case_id, {}))
        document["cases"].append(record)
    path = tmp_path / f"{name}.json"
    save_results(document, path)
    return path


def test_a_20_percent_latency_regression_exits_1_and_the_trend_png_is_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(tmp_path, "base", "2026-11-28T03:00:00Z", {})
    mid = _run(tmp_path, "mid", "2026-11-29T03:00:00Z", {"conv2d": 1.1, "add": 0.9})
    new = _run(tmp_path, "new", "2026-11-30T03:00:00Z", {"conv2d": 1.2, "linear": 1.05, "add": 0.8})
    png = tmp_path / "plots" / "trend.png"
    code = main(["compare", str(base), str(mid), str(new), "--threshold", "10%", "--plot", str(png)])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("## hil compare: 1 regression(s)")
    rows = {line.split("`")[1]: line for line in out.splitlines() if line.startswith("| `")}
    assert "| 2.000 → 2.400 (p50) | +20.0% |" in rows["smoke.fp32.conv2d"]
    assert "**latency regression**" in rows["smoke.fp32.conv2d"]
    assert rows["smoke.fp32.linear"].endswith("| ok |")  # +5% is under the threshold
    assert "| -20.0% |" in rows["smoke.fp32.add"] and "| faster: p = " in rows["smoke.fp32.add"]
    assert "| **latency regression**: p = " in rows["smoke.fp32.conv2d"]
    assert list(rows)[0] == "smoke.fp32.conv2d"  # regressions first
    assert "4 case(s): 1 latency regression, 1 faster, 2 ok" in out
    with Image.open(png) as image:
        assert image.format == "PNG"
        assert image.size == (1210, 660)
        assert len(image.convert("L").getcolors(maxcolors=65536)) > 10  # something was drawn
    assert "trend plot:" in out and "(4 case(s), 3 runs)" in out


def test_a_higher_threshold_or_a_faster_run_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(tmp_path, "base", "2026-11-28T03:00:00Z", {})
    slower = _run(tmp_path, "slower", "2026-11-29T03:00:00Z", {"conv2d": 1.2})
    assert main(["compare", str(base), str(slower), "--threshold", "25"]) == 0
    assert capsys.readouterr().out.startswith("## hil compare: no regression")
    assert main(["compare", str(slower), str(base)]) == 0


def test_pass_to_fail_and_worse_numbers_are_accuracy_regressions(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", "2026-11-28T03:00:00Z", {})
    new = _run(
        tmp_path,
        "new",
        "2026-11-30T03:00:00Z",
        {},
        conv2d={"verdict": "FAIL_MISMATCH", "message": "output 0: max abs error 0.5"},
        linear={"outputs": _outputs(5e-5, 120.0)},  # 1e-6 -> 5e-5: more than 0.1·atol
        add={"outputs": _outputs(1.05e-6, 80.0)},  # SQNR -40 dB
        softmax={"outputs": _outputs(2e-6, 119.0), "verdict": "PASS_UNDELEGATED"},
    )
    comparison = compare_results(load_results(base), load_results(new), 0.10)
    status = {row.key.rsplit(".", 1)[1]: row for row in comparison.rows}
    assert status["conv2d"].statuses == ["accuracy regression"]
    assert status["conv2d"].notes == ["PASS → FAIL_MISMATCH"]
    assert status["linear"].regression and "max abs error 1e-06 → 5e-05" in status["linear"].notes[0]
    assert status["add"].regression and status["add"].notes == ["output 0: SQNR 120.0 → 80.0 dB"]
    # 1e-6 -> 2e-6 doubles but stays far inside atol; an undelegated pass is a warning only
    assert not status["softmax"].regression and status["softmax"].statuses == ["undelegated"]
    assert len(comparison.regressions) == 3


def test_over_many_files_the_first_is_the_base_and_the_last_the_new_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A glob over nights (`nights/*/results.json`): the newest night's regression decides the
    table and the exit code, as comparing the first and the last directly does; the nights
    between only feed the trend (and without --plot, stderr says so)."""
    nights = [_run(tmp_path, f"n{day}", f"2026-11-{day}T03:00:00Z", {}) for day in (26, 27, 28)]
    nights.append(_run(tmp_path, "n29", "2026-11-29T03:00:00Z", {"conv2d": 1.3, "softmax": 1.4}))
    direct = main(["compare", str(nights[0]), str(nights[-1])])
    direct_out = capsys.readouterr().out
    png = tmp_path / "trend.png"
    code = main(["compare", *map(str, nights), "--plot", str(png)])
    out = capsys.readouterr().out
    assert direct == code == 1
    assert out.startswith("## hil compare: 2 regression(s)\n")
    assert out.split("\ntrend plot:")[0] == direct_out
    assert f"new: `{nights[-1]}`" in out and f"base: `{nights[0]}`" in out
    assert "(4 case(s), 4 runs)" in out
    assert main(["compare", *map(str, nights)]) == 1  # without --plot: first and last all the same
    captured = capsys.readouterr()
    assert captured.out == direct_out
    assert "the 2 file(s) between are drawn only by --plot" in captured.err


def test_missing_cases_make_the_heading_say_so_not_no_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(tmp_path, "base", "2026-11-28T03:00:00Z", {})
    cold = load_results(_run(tmp_path, "cold", "2026-11-29T03:00:00Z", {"conv2d": 1.4}))
    cold["cases"] = [c for c in cold["cases"] if c["id"] in ("conv2d", "linear")]
    save_results(cold, tmp_path / "cold.json")
    assert main(["compare", str(base), str(tmp_path / "cold.json")]) == 1
    heading = capsys.readouterr().out.splitlines()[0]
    assert heading == "## hil compare: 1 regression(s), 2 case(s) of the base missing from the new run"
    cold["cases"] = [c for c in cold["cases"] if c["id"] == "linear"]
    save_results(cold, tmp_path / "cold.json")
    assert main(["compare", str(base), str(tmp_path / "cold.json")]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        "## hil compare: 3 case(s) of the base missing from the new run")
    assert main(["compare", str(base), str(tmp_path / "cold.json"), "--allow-missing"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "## hil compare: no regression (3 case(s) missing, allowed)")


def test_missing_new_and_errored_cases_are_listed_not_regressions(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", "2026-11-28T03:00:00Z", {})
    new = sample_results()
    new["cases"] = [
        case("smoke", "fp32", "conv2d", "ERROR_INFRA", message="board lost", latency_ms=None),
        case("smoke", "fp32", "brand_new", "PASS"),
    ]
    comparison = compare_results(load_results(base), new, 0.10)
    statuses = {row.key: row.status for row in comparison.rows}
    assert statuses == {
        "smoke.fp32.conv2d": "error",
        "smoke.fp32.linear": "missing",
        "smoke.fp32.add": "missing",
        "smoke.fp32.softmax": "missing",
        "smoke.fp32.brand_new": "new",
    }
    assert not comparison.regressions


@pytest.mark.parametrize("text", ["ten", "-5%", "0", "10%%"])
def test_bad_threshold_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--threshold"):
        parse_threshold(text)


def test_thresholds_parse_as_percentages() -> None:
    assert parse_threshold("10%") == pytest.approx(0.10)
    assert parse_threshold("2.5") == pytest.approx(0.025)


def test_bad_input_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(tmp_path, "base", "2026-11-28T03:00:00Z", {})
    missing = tmp_path / "nope.json"
    assert main(["compare", str(base), str(missing)]) == 3
    assert f"{missing}: no such results file" in capsys.readouterr().err


def _noisy(tmp_path: Path, name: str, started: str, cases: dict[str, list[float]],
           cv_limit: float = 0.10) -> Path:
    """A results file whose cases have exactly these latency samples (and the stability
    verdict a run with this CV limit gives them)."""
    document = sample_results()
    document["run"].update(id=name, started=started)
    document["cases"] = []
    for case_id, samples in cases.items():
        latency = latency_stats(samples)
        latency.update(stability(latency, cv_limit))
        document["cases"].append(case("smoke", "fp32", case_id, "PASS", latency_ms=latency,
                                      outputs=_outputs(1e-6, 120.0)))
    path = tmp_path / f"{name}.json"
    save_results(document, path)
    return path


def _lognormal(seed: int, center: float, sigma: float, count: int = 30) -> list[float]:
    rng = random.Random(seed)
    return [center * rng.lognormvariate(0.0, sigma) for _ in range(count)]


def test_two_runs_of_the_same_program_are_no_regression_however_many_cases(tmp_path: Path) -> None:
    cases = [f"op{i}" for i in range(60)]
    base = _noisy(tmp_path, "a", "2026-11-30T01:00:00Z",
                  {c: _lognormal(i, 1.0, 0.05) for i, c in enumerate(cases)})
    new = _noisy(tmp_path, "b", "2026-11-30T02:00:00Z",
                 {c: _lognormal(1000 + i, 1.0, 0.05) for i, c in enumerate(cases)})
    comparison = compare_results(load_results(base), load_results(new))
    assert not comparison.regressions
    assert all(row.status == "ok" for row in comparison.rows)


def test_one_slow_sample_does_not_make_a_regression(tmp_path: Path) -> None:
    steady = [1.0 + 0.001 * i for i in range(20)]
    base = _noisy(tmp_path, "a", "2026-11-30T01:00:00Z", {"conv": steady})
    new = _noisy(tmp_path, "b", "2026-11-30T02:00:00Z", {"conv": [*steady[:-1], 9.0]})  # a preemption
    (row,) = compare_results(load_results(base), load_results(new)).rows
    assert row.status == "ok" and row.metric == "p50"


def test_a_real_shift_is_a_regression_with_its_p_value(tmp_path: Path) -> None:
    base = _noisy(tmp_path, "a", "2026-11-30T01:00:00Z", {"conv": _lognormal(1, 1.0, 0.03)})
    new = _noisy(tmp_path, "b", "2026-11-30T02:00:00Z", {"conv": _lognormal(2, 1.2, 0.03)})
    (row,) = compare_results(load_results(base), load_results(new)).rows
    assert row.status == "latency regression"
    assert row.p_value is not None and row.p_value < 1e-6
    assert row.notes[0] == f"p = {row.p_value:.2g}"


def test_unstable_runs_say_unstable_unless_the_bands_are_apart(tmp_path: Path) -> None:
    base = _noisy(tmp_path, "a", "2026-11-30T01:00:00Z",
                  {"shifted": _lognormal(1, 1.0, 0.30), "far": _lognormal(3, 1.0, 0.30)})
    new = _noisy(tmp_path, "b", "2026-11-30T02:00:00Z",
                 {"shifted": _lognormal(2, 1.4, 0.30), "far": _lognormal(4, 4.0, 0.05)})
    rows = {row.key.rsplit(".", 1)[1]: row for row in
            compare_results(load_results(base), load_results(new)).rows}
    assert load_results(base)["cases"][0]["latency_ms"]["unstable"] is True  # cv about 0.3
    # +40% and significant, but the spread of an unstable run covers it: not called
    assert rows["shifted"].status == "unstable"
    assert any("bands overlap" in note or "unstable:" in note for note in rows["shifted"].notes)
    # four times slower: the new run's p10 is above the base's p90, noise cannot explain it
    assert rows["far"].status == "latency regression"
    assert "the p10-p90 bands do not overlap" in "; ".join(rows["far"].notes)


def test_single_samples_are_too_few_to_call_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _noisy(tmp_path, "a", "2026-11-30T01:00:00Z", {"conv": [1.0]})
    new = _noisy(tmp_path, "b", "2026-11-30T02:00:00Z", {"conv": [1.445]})  # +44.5%, one sample
    assert main(["compare", str(base), str(new)]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `")]
    assert "| +44.5% |" in row and "too few samples: +44.5% on 1 vs 1 sample(s)" in row


def test_a_change_below_the_minimum_delta_is_not_a_regression(tmp_path: Path) -> None:
    base = _noisy(tmp_path, "a", "2026-11-30T01:00:00Z", {"add": _lognormal(1, 0.010, 0.02)})
    new = _noisy(tmp_path, "b", "2026-11-30T02:00:00Z", {"add": _lognormal(2, 0.015, 0.02)})
    assert main(["compare", str(base), str(new)]) == 0  # +50%, but 5 µs: under 0.02 ms
    assert main(["compare", str(base), str(new), "--min-delta-ms", "0.001"]) == 1
    assert main(["compare", str(base), str(new), "--min-delta-ms", "fast"]) == 3
