"""The generated nights and their dashboard, built once per session by the real `hil dashboard`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dashboard.nights import write_nights

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
