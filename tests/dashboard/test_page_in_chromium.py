"""The dashboard of the generated nights in a real headless Chromium (tests/dashboard/browser.py):
it loads from disk with no console message, its matrix shows the injected failures in their
cells, it flags the injected latency regressions and only those, and a screenshot of it is
kept: under $HIL_TEST_ARTIFACTS/dashboard/ (CI sets it: .ci/run), else in the test's tmp folder.

Without chromium these tests skip, except in CI (CI, GITHUB_ACTIONS or HIL_TEST_ARTIFACTS set),
where scripts/setup installs it and its absence is a failure."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.dashboard.browser import Chromium, find_chromium
from tests.dashboard.nights import INJECTED_ERRORS, INJECTED_FAILURES, INJECTED_REGRESSIONS

IN_CI = any(os.environ.get(name) for name in ("CI", "GITHUB_ACTIONS", "HIL_TEST_ARTIFACTS"))
if find_chromium() is None and not IN_CI:
    pytest.skip("chromium is not installed (apt-get install chromium; scripts/setup does): "
                "the dashboard's browser tests need a real browser", allow_module_level=True)

CELLS = """Array.from(document.querySelectorAll("table.matrix td.cell")).map(td => {
  const row = td.parentElement.dataset;
  return [td.dataset.night, row.chipset, row.suite, row.precision, Number(td.dataset.failed || 0),
          Number(td.dataset.errors || 0), td.title];
})"""
FLAGGED = """Array.from(document.querySelectorAll("table.regressions tr.regression")).map(tr =>
  [tr.dataset.night, tr.dataset.chipset, tr.dataset.precision, tr.dataset.case])"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    with Chromium(tmp_path_factory.mktemp("chromium-profile")) as chromium:
        yield chromium


@pytest.fixture(scope="module")
def loaded(browser: Chromium, dashboard: Path):
    """The dashboard loaded once: what the browser reported while loading it."""
    return browser.load(dashboard.as_uri())


def test_the_page_loads_from_disk_with_no_console_message_and_a_screenshot_is_kept(
        browser, loaded, dashboard, tmp_path) -> None:
    assert loaded.problems == []
    html = dashboard.read_text()
    assert re.findall(r'(?:src|href)="(?!#|data:)', html) == []  # nothing to fetch, even nearby
    assert browser.evaluate("document.querySelectorAll('figure svg').length") >= 8
    folder = Path(os.environ["HIL_TEST_ARTIFACTS"]) / "dashboard" if os.environ.get(
        "HIL_TEST_ARTIFACTS") else tmp_path
    shot = browser.screenshot(folder / "dashboard.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    print(f"dashboard screenshot: {shot}")


def test_the_checker_catches_a_script_error_and_a_network_fetch(browser, dashboard, tmp_path) -> None:
    """The same page with a deliberate error, and one that tries to fetch: both are reported
    (so an empty report above means something)."""
    page = dashboard.read_text()
    broken = tmp_path / "broken.html"
    broken.write_text(page.replace("</body>", "<script>noSuchFunction();</script></body>"))
    problems = browser.load(broken.as_uri()).problems
    assert any("ReferenceError: noSuchFunction is not defined" in p for p in problems), problems
    fetching = tmp_path / "fetching.html"
    fetching.write_text(page.replace("</body>", '<img src="https://cdn.example.invalid/x.png"></body>'))
    problems = browser.load(fetching.as_uri()).problems
    assert any("Content Security Policy" in p for p in problems), problems
    assert browser.load(dashboard.as_uri()).problems == []  # and the page itself is clean again


def test_the_matrix_shows_the_injected_failures_in_their_cells(browser, loaded) -> None:
    cells = browser.evaluate(CELLS)
    assert len(cells) == 20 * 3 * 3 * 2  # nights × chipsets × suites × precisions
    failed = {tuple(c[:4]): c for c in cells if c[4]}
    expected = {(n, chip, suite, prec): (case, verdict)
                for (n, chip, suite, prec, case), verdict in INJECTED_FAILURES.items()}
    assert set(failed) == set(expected)
    for where, (case, verdict) in expected.items():
        assert failed[where][4] == 1 and f".{case}: {verdict}" in failed[where][6]
    errored = {tuple(c[:4]) for c in cells if c[5]}
    assert errored == {(n, chip, suite, prec) for n, chip, suite, prec, _ in INJECTED_ERRORS}
    assert browser.evaluate("document.querySelectorAll('td.cell.fail').length") == len(expected)


def test_only_the_injected_latency_regressions_are_flagged(browser, loaded) -> None:
    """Not flagged although they moved (tests/dashboard/nights.py NOT_REGRESSIONS): +5% (below
    compare's threshold), +60% on a night measured with one sample (too few to test), a spike's
    way back (faster)."""
    flagged = {tuple(row) for row in browser.evaluate(FLAGGED)}
    assert flagged == set(INJECTED_REGRESSIONS)
    # the trend tables mark the same nights' cells, and nothing else
    assert browser.evaluate("document.querySelectorAll('table.trend td.flagged').length") == len(flagged)


def test_the_failures_filter_hides_the_rows_without_one(browser, loaded) -> None:
    visible = "Array.from(document.querySelectorAll('table.matrix tbody tr')).filter(r => !r.hidden).length"
    assert browser.evaluate(visible) == 18
    browser.evaluate("document.getElementById('only-bad').click()")
    assert browser.evaluate(visible) == len({(c, s, p) for _, c, s, p, _ in [*INJECTED_FAILURES, *INJECTED_ERRORS]})
    browser.evaluate("document.getElementById('only-bad').click()")
    assert browser.evaluate(visible) == 18


def test_one_night_gets_an_axis_per_run_and_sentences_instead_of_empty_charts(
        browser, one_night, tmp_path) -> None:
    """Two runs on one night: each lane's latency chart has one tick per run (its start time),
    not one smeared night; the SQNR movers and the boards' health, with nothing to draw, are
    a sentence each, not an axis around nothing."""
    assert browser.load(one_night.as_uri()).problems == []
    ticks = browser.evaluate("""Array.from(document.querySelectorAll('#latency figure svg')).map(svg =>
      Array.from(svg.querySelectorAll('g[id^="xtick"] text')).map(t => t.textContent.trim()))""")
    assert len(ticks) == 2 and all(labels == ["02:19:00", "05:00:00"] for labels in ticks), ticks
    for section, words in (("sqnr", "No case's worst SQNR dropped"), ("health", "No quarantine, no recovery step")):
        figure = browser.evaluate(f"""(() => {{ const f = document.querySelector('#{section} figure');
          return [f.querySelectorAll('svg').length, f.textContent.trim()]; }})()""")
        assert figure[0] == 0 and figure[1].startswith(words), figure
    folder = Path(os.environ["HIL_TEST_ARTIFACTS"]) / "dashboard" if os.environ.get(
        "HIL_TEST_ARTIFACTS") else tmp_path
    print(f"one-night dashboard screenshot: {browser.screenshot(folder / 'one-night.png')}")
