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


REPO = Path(__file__).resolve().parents[2]


def _hil_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}


@pytest.mark.slow  # lowers one case (imports torch and torchao): ~10-20 s
def test_hil_lower_prints_only_its_results_on_stdout(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "hil", "lower", "--suite", "smoke", "--filter", "add",
                           "--out", str(tmp_path / "lowered")], cwd=REPO, capture_output=True,
                          text=True, timeout=280, env=_hil_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[:2] for line in done.stdout.splitlines()] == [["LOWERED", "smoke.fp32.add"]]
    log = tmp_path / "lowered" / "third-party.log"
    assert "KernelPreference" in log.read_text() and "_pytree" not in done.stderr
    assert done.stderr == f"hil: third-party warnings: {log}\n"


@pytest.mark.slow  # one case lowered from scratch and run on a virtual board: ~20-40 s
def test_a_run_on_a_terminal_shows_no_third_party_line_and_its_status_on_stderr(tmp_path: Path) -> None:
    """stdout a real pty (the rich bars), stderr a pipe: torch's warning reaches neither (it
    is in third-party.log), hil's status lines are on stderr, stdout has none of them."""
    import select

    master, slave = os.openpty()
    run = subprocess.Popen(
        [sys.executable, "-m", "hil", "run", "--suite", "smoke", "--filter", "add", "--board", "virtual",
         "--no-cache", "--out", str(tmp_path / "out")],
        cwd=REPO, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=_hil_env())
    os.close(slave)
    shown = b""
    try:
        while True:  # drain the terminal until the run closes it
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the run's end closed the terminal's other side
                    break
                if not chunk:
                    break
                shown += chunk
            elif run.poll() is not None:
                break
        err = run.communicate(timeout=280)[1].decode()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        os.close(master)
    terminal = shown.decode(errors="replace")
    assert run.returncode == 0, terminal + err
    kept = (tmp_path / "out" / "third-party.log").read_text()
    assert "KernelPreference" in kept
    assert "KernelPreference" not in terminal and "_pytree" not in terminal and "_pytree" not in err
    assert err.startswith("hil: loading suite(s) smoke ...\n")
    assert "hil: loading suite(s)" not in terminal and "PASS" in terminal
