"""The README's synopsis ("## The command") is `hil --help` of every command: each command
is in it, with every long option its parser takes and none it does not take. This binds
every later command and option (issue 22)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from hil.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"
RUN_FAMILY = "as run"
"""A synopsis line may say `[same ... options as run]`: it then takes run's options too."""


def _synopsis() -> dict[str, str]:
    """Each command's text in the README's synopsis block (its line and indented lines)."""
    text = README.read_text()
    block = text.split("## The command", 1)[1].split("```", 2)[1]
    commands: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        match = re.match(r"hil ([a-z-]+)", line)
        if match:
            current = match.group(1)
            commands[current] = line[match.end():]
        elif current and line.startswith(" "):
            commands[current] += "\n" + line
    return commands


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings
            if o.startswith("--") and o != "--help"}


def test_every_command_is_in_the_synopsis_and_nothing_else() -> None:
    assert set(_synopsis()) == set(_parsers())


def test_the_synopsis_names_every_option_of_every_command_and_no_other() -> None:
    synopsis, parsers = _synopsis(), _parsers()
    problems = []
    for name, parser in parsers.items():
        text = synopsis.get(name, "")
        written = set(re.findall(r"--[a-z][a-z0-9-]*", text))
        allowed = written | (_options(parsers["run"]) if RUN_FAMILY in text else set())
        taken = _options(parser)
        problems += [f"hil {name}: {o} is missing from the README's synopsis"
                     for o in sorted(taken - allowed)]
        problems += [f"hil {name}: the README's synopsis names {o}, which it does not take"
                     for o in sorted(written - taken)]
    assert problems == []
