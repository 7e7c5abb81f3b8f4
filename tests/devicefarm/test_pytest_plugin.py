"""`pytest -p hil.pytest`: a lab user's test file with the `hil_board` fixture, run by pytest
itself (a child process) against a board whose runner miscomputes one op. The board is the
`lab_board` the devicefarm tests use (one board start for both)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from hil.virtual.launcher import VirtualBoardProcess
from tests.devicefarm.conftest import ROOT

pytestmark = pytest.mark.slow

USER_TESTS = '''
import torch
from executorch.exir import to_edge_transform_and_lower


class Add(torch.nn.Module):
    def forward(self, x):
        return x + 1.5


class Mul(torch.nn.Module):
    def forward(self, x):
        return x * 3.0


def lower(module, x):
    return to_edge_transform_and_lower(torch.export.export(module, (x,))).to_executorch()


X = torch.arange(6, dtype=torch.float32).reshape(2, 3)


def test_add_is_right(hil_board, tmp_path):
    path = tmp_path / "add.pte"
    path.write_bytes(lower(Add(), X).buffer)
    (out,) = hil_board.run(path, [X])
    assert torch.equal(out, X + 1.5)


def test_mul_is_right(hil_board):
    (out,) = hil_board.run(lower(Mul(), X), [X])
    assert torch.equal(out, X * 3.0)
'''


@pytest.fixture
def miscomputing_board(lab_board: VirtualBoardProcess) -> Iterator[VirtualBoardProcess]:
    """The lab board with a runner that gets `mul` wrong (the virtual board's miscompute fault)."""
    lab_board.control("fault miscompute,op=mul")
    try:
        yield lab_board
    finally:
        lab_board.control("fault clear")


def test_hil_board_fails_the_wrong_program_and_names_the_board(
    miscomputing_board: VirtualBoardProcess, tmp_path: Path
) -> None:
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    junit = tmp_path / "junit.xml"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "hil.pytest", "-p", "no:cacheprovider", "-q",
         "--hil-board", miscomputing_board.address, f"--junitxml={junit}", "test_user.py"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout
    cases = {case.get("name"): case for case in ET.parse(junit).iter("testcase")}
    assert cases["test_add_is_right"].find("failure") is None
    assert cases["test_mul_is_right"].find("failure") is not None
    for case in cases.values():
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert properties["hil_board"] == miscomputing_board.address
        assert properties["hil_board_virtual"] == "True"
        assert properties["hil_runner_profile"] == "hil"
        assert "Model file" in properties["hil_runner_log"]  # the runner's own log lines
