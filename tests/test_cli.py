"""The `hil` command line: fast help, and one-line exit-3 errors for bad input."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def hil(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hil", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_help_does_not_import_torch():
    code = (
        "import sys, hil.cli as c; c.build_parser().format_help(); "
        "import json; print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('torch', 'executorch', 'adbutils'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
    assert hil("--help").returncode == 0


def test_the_actions_launcher_needs_only_docker_and_numpy():
    """action.yml installs hil with --no-deps plus docker and numpy: parsing and `replicate`
    must import nothing else outside the standard library."""
    code = (
        "import sys, json, hil.cli as c; p = c.build_parser(); p.format_help(); "
        "p.parse_args(['replicate', '--print', '--image', 'x', '--', 'run']); "
        "import hil.replicate; "
        "top = {m.split('.')[0] for m in sys.modules}; "
        "print(json.dumps(sorted(m for m in top - set(sys.stdlib_module_names) "
        "- {'hil', 'docker', 'numpy'} if not m.startswith('_'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--suite", "nope"], "--suite nope: no such suite (built-in: "),
        (["--chipset", "E1234"], "--chipset: unknown value 'E1234'"),
        (["--board", "bad board!"], "--board: 'bad board!' is not virtual"),
        (["--board", "virtual:0"], "--board: 'virtual:0'"),
        (["--suite", "does/not/exist.yaml"], "manifest file not found: does/not/exist.yaml"),
        (["--shard", "3/2"], "--shard: '3/2' is out of range"),
        (["--precision", "int4"], "--precision: unknown value 'int4'"),
        (["--flow", "tpu"], "--flow: unknown value 'tpu'"),
        (["--timeout", "0"], "--timeout: 0.0 is out of range"),
        (["--timeout", "nan"], "--timeout: nan is out of range"),
        (["--flash-timeout", "inf"], "--flash-timeout: inf is out of range"),
        (["--retries", "many"], "argument --retries: invalid int value"),
        (["--filter", "no_such_case*"], "no case matches"),
    ],
)
def test_bad_input_is_one_line_and_exit_3(tmp_path, args, expected):
    done = hil("run", "--out", str(tmp_path / "out"), *args)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("hil: error: ") and expected in lines[0]


def error_lines(stderr: str) -> list[str]:
    """stderr without hil's status lines (`hil: loading suite(s) ...`, which come first):
    what is left of bad input must be one `hil: error:` line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return [line for line in lines if not STATUS_LINE.match(line)]


STATUS_LINE = re.compile(r"hil(: (?!error: )| run )")
"""hil's status lines on stderr: `hil: loading suite(s) ...`, `hil run N case(s), flow ...`."""


def test_enn_flow_without_sdk_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("EXYNOS_AI_LITECORE_ROOT", raising=False)
    done = hil("run", "--flow", "enn", "--out", str(tmp_path / "out"))
    assert done.returncode == 3
    (line,) = error_lines(done.stderr)
    assert line.startswith("hil: error: LITECORE SDK not found: set EXYNOS_AI_LITECORE_ROOT")


def test_hostile_board_and_filter_never_reach_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    for args in (
        ["--board", f"$(touch {marker})"],
        ["--board", f"x;touch {marker}"],
        ["--filter", f"`touch {marker}`"],
    ):
        done = hil("run", "--out", str(tmp_path / "out"), *args)
        assert done.returncode == 3
        assert not marker.exists()
