"""`hil localize --against fp32`: the A8W8 graph walked against the fp32 graph on the host
(no board), each op paired with the fp32 value it approximates, the first op below the floor."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hil.cli import main

from . import SUITE

pytestmark = pytest.mark.slow  # two exports and an A8W8 calibration of a small CNN


def test_the_a8w8_graph_is_walked_against_fp32_node_by_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "curve.png"
    code = main(["localize", "--suite", str(SUITE), "--filter", "residual_hardswish", "--against", "fp32",
                 "--sqnr-floor", "40", "--out", str(tmp_path), "--plot", str(png)])
    assert code == 0
    drift = json.loads((tmp_path / "drift.json").read_text())["drift"]
    curve = drift["curve"]
    assert drift["nodes"] == drift["compared"] == len(curve) == 13  # BatchNorms folded away in A8W8
    pairs = {point["module"]: point["fp32_node"] for point in curve}
    assert pairs["stem.0"] == "getitem"  # the conv whose BatchNorm was folded in: the BN's output
    assert pairs["head.1"] == "hardswish"
    assert all(math.isfinite(p["sqnr_db"]) and 15 < p["sqnr_db"] < 90 for p in curve)
    below = [p for p in curve if p["sqnr_db"] < 40]
    assert below and drift["first_below_floor"] == below[0]  # the first op under the floor, in topological order
    out = capsys.readouterr().out
    assert out.startswith("localize.a8w8.residual_hardswish: A8W8 against fp32 on the host, 13 of 13 ops")
    assert png.read_bytes()[:4] == b"\x89PNG"
