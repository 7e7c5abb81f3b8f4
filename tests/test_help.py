"""Every command's `--help` is a reference: a description, examples that parse with the real
parser, and its exit codes; every option and positional says what it is; `-v` is taken after
the command as before it."""

from __future__ import annotations

import argparse
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hil.cli import build_parser, verbosity
from hil.commands.manual import COMMAND_HELP, SCRIPTS
from hil.devicefarm.cli import _parser as devicefarm_parser
from hil.errors import UsageError
from hil.verdict import EXIT_INFRA, EXIT_OK, EXIT_USAGE

REPO = Path(__file__).resolve().parents[1]


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def hil(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def block(text: str, title: str) -> list[str]:
    """The indented lines under `title:` in a help text."""
    lines = text.split(f"\n{title}:\n", 1)[1].splitlines()
    taken = []
    for line in lines:
        if not line.startswith("  "):
            break
        taken.append(line[2:])
    return taken


def test_every_command_has_a_help_record_and_no_record_lacks_a_command() -> None:
    assert list(commands()) == list(COMMAND_HELP)


@pytest.mark.parametrize("name", list(COMMAND_HELP) + list(SCRIPTS))
def test_help_has_a_description_examples_that_parse_and_every_exit_code(name: str) -> None:
    record = (COMMAND_HELP | SCRIPTS)[name]
    if name in SCRIPTS:
        parser, prefix = devicefarm_parser(), [name]
    else:
        parser, prefix = build_parser(), ["hil"]
    text = (commands()[name] if name in COMMAND_HELP else parser).format_help()
    description = text.split("\n\n")[1]
    assert " ".join(description.split()).startswith(" ".join(record.description.split())[:60])
    examples = block(text, "examples")
    assert examples, text
    for example in examples:
        argv = shlex.split(example)
        assert argv[:len(prefix)] == prefix, example
        if name in SCRIPTS:
            parser.parse_args(argv[1:])  # plain argparse: exits on an error
        else:
            assert parser.parse_args(argv[1:]).command == name
    shown = [int(line.split()[0]) for line in block(text, "exit codes") if re.match(r"\d+ ", line)]
    # (a code's continuation lines are indented further, so a number there is not a code)
    assert shown == [code for code, _ in record.exit_codes]
    assert shown == sorted(shown) and len(set(shown)) == len(shown)
    if name in COMMAND_HELP:  # hil's: success, and bad usage is always 3
        assert {EXIT_OK, EXIT_USAGE} <= set(shown)


def test_an_example_that_does_not_parse_is_caught() -> None:
    with pytest.raises(UsageError):
        build_parser().parse_args(shlex.split("run --suite smoke --no-such-option"))


@pytest.mark.parametrize("name", list(COMMAND_HELP) + list(SCRIPTS))
def test_every_option_and_positional_has_help(name: str) -> None:
    parser = commands()[name] if name in COMMAND_HELP else devicefarm_parser()
    missing = [a.dest for a in parser._actions if not a.help]
    assert missing == []


def test_hil_help_lists_every_command_with_its_summary() -> None:
    text = build_parser().format_help()
    for name, record in COMMAND_HELP.items():
        assert re.search(rf"^\s+{re.escape(name)}\s", text, re.M), name
        assert " ".join(record.summary.split()[:4]) in " ".join(text.split())


@pytest.mark.parametrize("name", ["run", "localize"])
def test_run_and_localize_options_sit_in_their_groups(name: str) -> None:
    """A new option of run or localize goes into the group it belongs to (RunGroups)."""
    parser = commands()[name]
    ungrouped = [a.option_strings[0] for group in parser._action_groups
                 if group.title in ("options", "positional arguments") for a in group._group_actions
                 if a.option_strings and a.option_strings[0] not in ("-h", "-v")]
    assert ungrouped == []
    titles = [group.title for group in parser._action_groups]
    assert titles[2:6] == ["cases (what to pick)", "boards (which board, how to reach it)", "outputs",
                           "limits, latency and caching"]


def test_localize_help_says_what_it_takes() -> None:
    text = commands()["localize"].format_help()
    usage = " ".join(text.split("\n\n")[0].split())
    assert " --filter GLOB " in usage and "[--filter" not in usage  # required: no brackets
    assert "--shard" not in text  # localize takes one case
    assert "host only (--against fp32: no board):" in text
    done = hil("localize", "--suite", "smoke")
    assert done.returncode == EXIT_USAGE
    assert done.stderr.strip() == "hil: error: the following arguments are required: --filter"


@pytest.mark.parametrize(("argv", "level"), [
    (["list", "--suite", "smoke"], 0), (["-v", "list", "--suite", "smoke"], 1),
    (["list", "-v", "--suite", "smoke"], 1), (["-v", "list", "--suite", "smoke", "-v"], 2),
    (["list", "-vv"], 2),
])
def test_verbose_is_taken_before_and_after_the_command_and_adds_up(argv: list[str], level: int) -> None:
    assert verbosity(build_parser().parse_args(argv)) == level


def test_verbose_after_the_command_runs() -> None:
    done = hil("list", "-v", "--suite", "smoke")
    assert done.returncode == 0, done.stderr
    assert "7 case(s)" in done.stdout


def test_version_is_pyprojects() -> None:
    version = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    done = hil("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"exynos-hil {version}")
    assert version == "0.9.0"


def test_an_infrastructure_error_reaching_the_command_line_is_one_line_and_exit_2() -> None:
    """`hil virtual-board` on a port another process listens on: exit 2 with one line, as its
    help says, not a traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = hil("virtual-board", "--port", str(taken.getsockname()[1]))
    assert done.returncode == EXIT_INFRA, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("hil:")]
    assert lines and lines[-1].startswith("hil: error: virtual board could not start")
    assert "Traceback" not in done.stderr
