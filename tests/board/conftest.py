"""A lab for the board tests: two real adb servers started by the test (tests/adb_lab.py)
and a virtual board on each, `adb connect`ed by the lab before hil runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hil.virtual.launcher import start_virtual_board
from tests.adb_lab import LabServer


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`one` and `two` (LabServer), `b1` connected to one, `b2` to two."""
    root = tmp_path_factory.mktemp("lab")
    with LabServer() as one, LabServer() as two, \
            start_virtual_board(root / "b1", "E9955", "lab-b1", trusted_keys=[one.public_key]) as b1, \
            start_virtual_board(root / "b2", "E9955", "lab-b2", trusted_keys=[two.public_key]) as b2:
        one.connect(b1.address)
        two.connect(b2.address)
        yield {"one": one, "two": two, "b1": b1, "b2": b2, "root": root}
