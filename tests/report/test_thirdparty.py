"""Third-party output off the console while a run runs: the real torch/torchao warning from
a lowering worker, a C-level write, Python warnings and foreign loggers go to the run's
third-party.log; hil's own records stay on stderr; everything is put back afterwards."""

from __future__ import annotations

import logging
import multiprocessing
import os
import subprocess
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from hil.report.thirdparty import third_party_to_file


def _worker_noise() -> int:
    os.write(2, b"worker C-level line\n")
    return os.getpid()


@pytest.mark.slow  # imports torchao in a child (the real warning): ~5-10 s
def test_third_party_lines_go_to_the_file_and_hil_lines_stay(tmp_path: Path, capfd) -> None:
    log_file = tmp_path / "out" / "third-party.log"
    root = logging.getLogger()
    root.addHandler(console := logging.StreamHandler(sys.stderr))
    try:
        with third_party_to_file(log_file):
            logging.getLogger("hil.run").warning("hil line: board busy")
            logging.getLogger("some_library.module").warning("foreign logger line")
            warnings.warn("python warning line", DeprecationWarning, stacklevel=1)
            os.write(2, b"C-level line\n")
            subprocess.run([sys.executable, "-c", "import torchao"], check=True, timeout=300)
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                pool.submit(_worker_noise).result(timeout=120)
        logging.getLogger("hil.run").warning("after: back on stderr")
        os.write(2, b"after: C-level on stderr\n")
    finally:
        root.removeHandler(console)
    shown = capfd.readouterr().err
    kept = log_file.read_text()
    assert "hil line: board busy" in shown and "hil line" not in kept
    for line in ("foreign logger line", "python warning line", "C-level line",
                 "worker C-level line", "KernelPreference"):
        assert line in kept and line not in shown, line
    assert "_pytree.py" in kept  # torch's own W-line, from the child
    assert "after: back on stderr" in shown and "after: C-level on stderr" in shown
    assert "after:" not in kept
