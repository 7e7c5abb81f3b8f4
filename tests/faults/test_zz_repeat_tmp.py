import pytest

from .test_interrupts import board, prelowered  # noqa: F401
from .test_interrupts import test_a_stopped_run_removes_its_folder_from_the_board as once


@pytest.mark.parametrize("i", range(20))
def test_repeat(i, board, tmp_path, prelowered):  # noqa: F811
    once(board, tmp_path, prelowered)
