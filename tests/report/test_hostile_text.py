"""Text from a board (or a downloaded results.json) in hil's reports: no Markdown of its own in
the step summary (no image beacon, no link), a lone surrogate written as U+FFFD instead of a
crash, and `hil replicate --from` shows the recorded command before it runs anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from markdown_it import MarkdownIt

from hil.report.summary import cell, render_summary
from tests.report.test_known_failures import _document, case

REPO = Path(__file__).resolve().parents[2]
HOSTILE = ("![](https://evil.example/beacon.png) [docs](https://evil.example/login) "
           "<img src=x onerror=y> `code` **bold** see www.evil.example or https://evil.example/a")


def _failed(message: str) -> dict:
    failed = case("smoke", "fp32", "add", "FAIL_RUN")
    failed["message"] = message
    failed["board"] = "[board](https://evil.example)"
    return failed


def test_a_boards_markdown_renders_as_text_in_the_summary() -> None:
    summary = render_summary(_document(_failed(HOSTILE)))
    html = MarkdownIt("commonmark").enable("table").render(summary)
    assert "<img" not in html and "evil.example/login\"" not in html
    assert "<a href=\"https://evil" not in html
    assert "![](https://evil.example/beacon.png)" in html.replace("&quot;", "\"")  # shown as text
    escaped = cell(HOSTILE)
    assert "https://" not in escaped and "www.evil" not in escaped  # no bare URL GitHub would link
    assert "\\[docs\\]" in escaped and "&lt;img" in escaped


def test_a_lone_surrogate_in_results_json_is_reported_not_a_crash(tmp_path: Path) -> None:
    document = _document(_failed("the board said \ud800 then stopped"))
    results = tmp_path / "results.json"
    results.write_text(json.dumps(document))  # ensure_ascii: the surrogate as a \\ud800 escape
    assert "\\ud800" in results.read_text()
    summary = tmp_path / "summary.md"
    done = subprocess.run([sys.executable, "-m", "hil", "report", str(results), "--summary", str(summary),
                           "--junit", str(tmp_path / "junit.xml")], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "GITHUB_ACTIONS": "true"})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1  # a failed case: the summary is written all the same
    assert "the board said \ufffd then stopped" in summary.read_text(encoding="utf-8")
    assert "the board said \ufffd then stopped" in done.stdout


def test_replicate_from_a_results_json_shows_the_command_and_needs_yes(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"run": {"command": ["hil", "run", "--suite", "evil.yaml", "--flash"]}}))
    done = subprocess.run([sys.executable, "-m", "hil", "replicate", "--image", "img:1", "--from", str(results),
                           "--workspace", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    (line,) = done.stderr.strip().splitlines()
    assert "it would run `hil run --suite evil.yaml --flash` in the container" in line
    assert line.endswith("then add --yes")
    printed = subprocess.run([sys.executable, "-m", "hil", "replicate", "--print", "--image", "img:1",
                              "--from", str(results), "--workspace", str(tmp_path)], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0 and printed.stdout.rstrip().endswith("evil.yaml --flash")  # runs nothing
