"""What each sub-command's `--help` says beyond its options: a one-line summary, a description,
examples and exit codes, kept as one `CommandHelp` record per command (hil/commands/manual.py)
and turned into a sub-parser by `add_command`. The generated reference (hil/reference) reads
the same records, so `--help` and docs/reference/ say the same thing."""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass

WIDTH = 79
"""Width the description and the exit codes are wrapped to (argparse's own text is wrapped to
the terminal)."""
VERBOSE_AFTER = "sub_verbose"
"""Where `-v` given after the sub-command is counted (`hil run -v`); hil.cli adds it to the
`-v` given before it (`hil -v run`)."""


@dataclass(frozen=True)
class CommandHelp:
    """The help of one command, beyond its options."""

    name: str
    """The sub-command (`run`), or the console script (`devicefarm-cli`)."""
    summary: str
    """One line: the command's row in `hil --help`."""
    description: str
    """What it does, for whom, what it writes: paragraphs separated by blank lines."""
    examples: tuple[str, ...]
    """Runnable command lines, each one line (a test parses each with the real parser)."""
    exit_codes: tuple[tuple[int, str], ...]
    """Every exit code the command can end with and what it means, in ascending order."""

    def wrapped_description(self) -> str:
        """The description, each paragraph wrapped to WIDTH."""
        paragraphs = [" ".join(p.split()) for p in self.description.strip().split("\n\n")]
        return "\n\n".join(textwrap.fill(p, WIDTH) for p in paragraphs)

    def epilog(self) -> str:
        """The `examples:` and `exit codes:` blocks of its `--help`."""
        lines = ["examples:", *(f"  {example}" for example in self.examples), "", "exit codes:"]
        for code, meaning in self.exit_codes:
            lines += textwrap.wrap(f"{code:<5}{meaning}", WIDTH - 2, initial_indent="  ",
                                   subsequent_indent="       ")
        return "\n".join(lines)


def add_command(sub: argparse._SubParsersAction, record: CommandHelp) -> argparse.ArgumentParser:
    """The sub-parser of `record`'s command: its summary, description and epilog, and `-v`
    accepted after the command name as before it."""
    parser = sub.add_parser(record.name, help=record.summary,
                            description=record.wrapped_description(), epilog=record.epilog(),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", dest=VERBOSE_AFTER, action="count", default=0,
                        help="more logging; adds to a -v given before the command")
    return parser


def apply_to(parser: argparse.ArgumentParser, record: CommandHelp) -> argparse.ArgumentParser:
    """`parser` (a command with a parser of its own, e.g. devicefarm-cli) with `record`'s
    description and epilog."""
    parser.description = record.wrapped_description()
    parser.epilog = record.epilog()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser
