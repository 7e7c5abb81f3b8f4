"""The generated nights and their dashboard, built once per session by the real `hil dashboard`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dashboard.nights import write_nights, write_run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def nights(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """20 nights × 3 chipsets of results.json (tests/dashboard/nights.py): ~1 s of CPU."""
    return write_nights(tmp_path_factory.mktemp("nights"))


@pytest.fixture(scope="session")
def dashboard(tmp_path_factory: pytest.TempPathFactory, nights: list[Path]) -> Path:
    """`hil dashboard` over the nights: the index.html it wrote (~4 s of CPU, matplotlib)."""
    out = tmp_path_factory.mktemp("dashboard")
    done = subprocess.run([sys.executable, "-m", "hil", "dashboard", *map(str, nights), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 latency regression(s)" in done.stdout
    return out / "index.html"


@pytest.fixture(scope="session")
def one_night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`hil dashboard` over two runs of one chipset on one night (02:17 and 05:00 UTC, no
    board event, nothing to compare with): its index.html."""
    from hil.report.results import load_results, save_results

    root = tmp_path_factory.mktemp("one-night")
    first = write_run(root / "first", 1, "E9945")
    second = write_run(root / "second", 1, "E9945")
    document = load_results(second)
    document["run"].update(started=document["run"]["started"].replace("T02:19:00", "T05:00:00"),
                           id=document["run"]["id"] + "-again")
    save_results(document, second)
    out = root / "dashboard"
    done = subprocess.run([sys.executable, "-m", "hil", "dashboard", str(first), str(second), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 night(s), 2 run(s)" in done.stdout
    return out / "index.html"
