"""`devicefarm-cli` as upstream runs it: a program on PATH, one process per call, shell strings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PATH folder whose `devicefarm-cli` is this checkout's (no reinstall of the venv)."""
    folder = tmp_path_factory.mktemp("bin")
    wrapper = folder / "devicefarm-cli"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m hil.devicefarm \"$@\"\n")
    wrapper.chmod(0o755)
    return folder


@pytest.fixture(scope="session")
def lab_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualBoardProcess]:
    """A board of the lab reached as HOST:PORT (so it has a lease), `hil` runner profile;
    one for every test here (each takes and gives back its lease)."""
    board = start_virtual_board(tmp_path_factory.mktemp("lab-board"), "E9955", "df-lab",
                                ["--runner-profile", "hil"], wait_warm=True)
    with board:
        yield board


def cli_env(cli_path: Path, session: str, board: str, folder: Path) -> dict[str, str]:
    """The environment of a CI job using hil's devicefarm-cli."""
    return {
        **os.environ, "PATH": f"{cli_path}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
        "HIL_DEVICEFARM_SESSION": session, "HIL_DEVICEFARM_DIR": str(folder), "HIL_BOARD": board,
    }


def df(env: dict[str, str], args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """`devicefarm-cli ARGS` through a shell, as upstream calls it."""
    return subprocess.run(f"devicefarm-cli {args}", shell=True, env=env, capture_output=True,
                          text=True, timeout=timeout)


def poll_assigned(env: dict[str, str], seconds: float = 150.0) -> str:
    """Upstream's loop (.ci/scripts/setup-samsung-linux-deps.sh, acquire_device): `-C` until its
    output matches `assigned` without `waiting|not assigned`; its last output."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = df(env, "-C")
        out = result.stdout + result.stderr
        if re.search(r"waiting|not[\s-]*assigned", out, re.IGNORECASE):
            time.sleep(0.5)
            continue
        assert re.search("assigned", out, re.IGNORECASE), f"upstream would go on without a device: {out!r}"
        return out
    raise AssertionError(f"not assigned within {seconds:g} s")


class Small(torch.nn.Module):
    """A two-input, two-output model the upstream flows lower and run bit-exact."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.linear = torch.nn.Linear(144, 5)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.relu(self.conv(x)).flatten(1)
        return self.linear(z).softmax(-1), y * 2 + 1
