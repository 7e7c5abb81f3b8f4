"""scripts/parallel-pytest.py (./scripts/test's pytest): without a test path, tests/container
and the rest of tests/ run as two pytest processes at once, each with every argument, their
reports printed whole, and one exit code that fails when either fails; with a test path,
one plain pytest run. Checked on a small tests/ tree of its own."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a few pytest sessions of their own
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "parallel-pytest.py"


def _module():
    spec = importlib.util.spec_from_file_location("parallel_pytest", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tests/container/test_box.py sleeps 1 s and writes when it started and ended; so does
    tests/test_cpu.py: overlapping intervals show the two ran at once."""
    (tmp_path / "tests" / "container").mkdir(parents=True)
    body = (
        "import os, time\n"
        "def test_{name}():\n"
        "    start = time.time()\n"
        "    time.sleep(1.0)\n"
        "    open('{name}.times', 'w').write(f'{{start}} {{time.time()}}')\n"
        "    assert not os.environ.get('FAIL_{name}')\n"
    )
    (tmp_path / "tests" / "container" / "test_box.py").write_text(body.format(name="box"))
    (tmp_path / "tests" / "test_cpu.py").write_text(body.format(name="cpu"))
    return tmp_path


def run(tree: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("FAIL_", "HIL_TEST_SERIAL", "PYTEST_"))}
    environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the venv's plugins take seconds to load
    environment.update(env)
    return subprocess.run([sys.executable, str(SCRIPT), "-p", "no:cacheprovider", *args], cwd=tree,
                          capture_output=True, text=True, timeout=120, env=environment)


def interval(tree: Path, name: str) -> tuple[float, float]:
    start, end = map(float, (tree / f"{name}.times").read_text().split())
    return start, end


def test_both_groups_run_at_once_with_every_argument_and_their_reports_whole(tree):
    done = run(tree, "-q", "--durations=5")
    assert done.returncode == 0, done.stdout + done.stderr
    box, cpu = interval(tree, "box"), interval(tree, "cpu")
    assert box[0] < cpu[1] and cpu[0] < box[1]  # the two tests overlapped in time
    out = done.stdout
    assert out.count("slowest 5 durations") == 2  # --durations reached both
    assert "container | " in out and "rest      | " in out  # streamed lines are prefixed
    for name, test in (("container", "test_box.py::test_box"), ("rest", "test_cpu.py::test_cpu")):
        header = next(i for i, line in enumerate(out.splitlines()) if line.startswith(f"{'=' * 20} {name}:"))
        report = out.splitlines()[header + 1:header + 4]
        assert report[0].startswith("=") and "slowest 5 durations" in report[0]  # unprefixed, whole
        assert any(test in line for line in report)
    assert "container exit 0" in out and "rest exit 0" in out


def test_one_group_failing_fails_the_run(tree):
    done = run(tree, "-q", FAIL_box="1")  # which group: test_exit_codes_combine_as_one_pytest_run_would
    assert done.returncode == 1, done.stdout
    assert "1 failed" in done.stdout and "1 passed" in done.stdout


def test_no_test_collected_in_either_is_exit_5_and_in_one_is_fine(tree):
    assert run(tree, "-q", "-k", "nothing_matches").returncode == 5
    one = run(tree, "-q", "-k", "box")
    assert one.returncode == 0, one.stdout
    assert not (tree / "cpu.times").exists()


def test_a_test_path_is_one_plain_pytest_run(tree):
    done = run(tree, "-q", "tests/test_cpu.py")
    assert done.returncode == 0, done.stdout
    assert "container | " not in done.stdout and "rest      | " not in done.stdout
    assert not (tree / "box.times").exists()
    serial = run(tree, "-q", HIL_TEST_SERIAL="1")
    assert serial.returncode == 0 and "2 passed" in serial.stdout and " | " not in serial.stdout


def test_test_paths_skips_options_and_their_values(tree, monkeypatch):
    monkeypatch.chdir(tree)
    paths = _module().test_paths
    assert paths(["-q", "-p", "no:cacheprovider", "--full", "--durations=25"]) == []
    assert paths(["-k", "tests", "-m", "slow"]) == []  # an option's value is not a path
    assert paths(["tests/test_cpu.py::test_cpu", "-x"]) == ["tests/test_cpu.py::test_cpu"]
    assert paths(["tests"]) == ["tests"]


def test_exit_codes_combine_as_one_pytest_run_would():
    combined = _module().combined_exit
    assert combined([0, 0]) == 0
    assert combined([0, 5]) == 0 and combined([5, 5]) == 5
    assert combined([1, 0]) == 1 and combined([5, 1]) == 1
    assert combined([2, 1]) == 2  # interrupted beats failed


def test_a_missing_exit_code_is_a_failure_never_green():
    module = _module()
    assert module.combined_exit([None, 0, 0]) == module.UNFINISHED != 0
    assert module.combined_exit([None, 5, 5]) != 0
    assert module.lane_exit(None, summary_seen=True) == module.UNFINISHED
    assert module.lane_exit(0, summary_seen=False) == module.UNFINISHED
    assert module.lane_exit(0, summary_seen=True) == 0 and module.lane_exit(1, summary_seen=False) == 1


@pytest.mark.parametrize("line", ["1 passed in 0.01s", "=== 3 passed, 1 skipped in 2.01s ===",
                                  "no tests ran in 0.00s", "===== 2 failed, 10 passed, 1 warning in 61.20s (0:01:01) ====="])
def test_the_closing_summary_line_is_recognised(line):
    assert _module()._SUMMARY.match(line)


@pytest.mark.parametrize("serial", [False, True])
def test_a_lane_that_exits_0_before_its_summary_is_a_failure(tree, serial):
    """A test that ends its pytest process with os._exit(0) mid-run: exit 0, no closing summary
    line, tests after it never ran. In either mode the run is red and says why."""
    (tree / "tests" / "test_cpu.py").write_text(
        "import os\n"
        "def test_ends_the_session():\n"
        "    os._exit(0)\n"
        "def test_never_runs():\n"
        "    pass\n"
    )
    done = run(tree, "-q", *(["tests/test_cpu.py"] if serial else []))
    assert done.returncode == _module().UNFINISHED, done.stdout + done.stderr
    assert "without" in done.stdout and "closing summary line" in done.stdout


def test_the_second_half_runs_as_a_third_process_and_only_once(tree):
    """tests/board (one of parallel-pytest's SECOND_HALF folders) runs in `rest-2`, at the same
    time as the others, and `rest` leaves it out."""
    (tree / "tests" / "board").mkdir()
    body = (tree / "tests" / "test_cpu.py").read_text().replace("cpu", "half")
    (tree / "tests" / "board" / "test_half.py").write_text(body)
    done = run(tree, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    half, cpu = interval(tree, "half"), interval(tree, "cpu")
    assert half[0] < cpu[1] and cpu[0] < half[1]
    assert "rest-2 exit 0" in done.stdout and done.stdout.count("1 passed") == 3
