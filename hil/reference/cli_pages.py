"""docs/reference/cli.md (every command: usage, description, options, examples, exit codes)
and exit-codes.md (every command's exit codes), from the argparse parsers and the help
records of hil/commands/manual.py."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from hil.commands.help import CommandHelp
from hil.commands.manual import COMMAND_HELP, SCRIPTS
from hil.reference.markdown import NOTICE, cell, code, table, usage

WIDTH = 100
"""Columns the usage lines are wrapped to (argparse reads $COLUMNS)."""
ENVIRONMENT_DEFAULTS = ("HIL_RUNNER", "HIL_CACHE_DIR")
"""Variables some defaults are read from when the parser is built: unset while the pages are
generated, so that a page does not depend on the machine (the help says where they come from)."""


@contextmanager
def _stable_environment() -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in ("COLUMNS", *ENVIRONMENT_DEFAULTS)}
    os.environ["COLUMNS"] = str(WIDTH)
    for name in ENVIRONMENT_DEFAULTS:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """`hil`'s parser, and every command's parser by name (hil's sub-commands, then the other
    console scripts)."""
    from hil.cli import build_parser
    from hil.devicefarm.cli import _parser as devicefarm_parser

    root = build_parser()
    (sub,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    commands = dict(sub.choices)
    commands["devicefarm-cli"] = devicefarm_parser()
    return root, commands


def _records() -> dict[str, CommandHelp]:
    return {**COMMAND_HELP, **SCRIPTS}


def _title(name: str) -> str:
    return name if name in SCRIPTS else f"hil {name}"


def _paragraphs(text: str) -> str:
    return "\n\n".join(" ".join(p.split()) for p in text.strip().split("\n\n"))


def _default(action: argparse.Action) -> str:
    """The default to show beside an option whose help does not already say it."""
    if "default" in (action.help or "") or action.default in (None, False, [], argparse.SUPPRESS):
        return ""
    if isinstance(action, argparse._CountAction) and action.default == 0:
        return ""
    return f" (default: {action.default})"


def _options(parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    out = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.help != argparse.SUPPRESS
                   and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if not actions:
            continue
        rows = []
        for action in actions:
            invocation = formatter._format_action_invocation(action)
            required = "required; " if action.required and action.option_strings else ""
            meaning = formatter._expand_help(action) if action.help else ""
            rows.append((code(invocation), required + meaning + _default(action)))
        kind = "option" if any(a.option_strings for a in actions) else "argument"
        out.append(f"**{group.title}**\n\n" + table((kind, "meaning"), rows))
    return "\n".join(out)


def _exit_codes(record: CommandHelp) -> str:
    return table(("exit code", "meaning"), [(code(str(c)), meaning) for c, meaning in record.exit_codes])


def _section(name: str, parser: argparse.ArgumentParser, record: CommandHelp) -> str:
    synopsis = usage(parser.format_usage())
    return (f"## {_title(name)}\n\n{cell(record.summary)}.\n\n```text\n{synopsis}\n```\n\n"
            f"{_paragraphs(record.description)}\n\n{_options(parser)}\n"
            f"**Examples**\n\n```sh\n" + "\n".join(record.examples) + "\n```\n\n"
            f"**Exit codes**\n\n{_exit_codes(record)}")


def cli_page() -> str:
    """docs/reference/cli.md."""
    with _stable_environment():
        root, commands = parsers()
        records = _records()
        index = table(("command", "what it does"),
                      [(f"[{_title(n)}](#{_title(n).replace(' ', '-')})", records[n].summary)
                       for n in commands])
        global_options = _options(root)
        root_usage = usage(root.format_usage())
        sections = [_section(name, parser, records[name]) for name, parser in commands.items()]
    return (f"# Command line\n\n{NOTICE}\n`hil` is one command with sub-commands; `hil COMMAND "
            "--help` prints the same text as this page. `devicefarm-cli` is a command of its own: "
            "the one upstream ExecuTorch's Samsung tests call. Every command's exit codes are "
            "also on one page: [exit codes](exit-codes.md).\n\n" + index
            + f"\n## hil\n\n```text\n{root_usage}\n```\n\n"
            + global_options + "\n" + "\n".join(sections))


def exit_codes_page() -> str:
    """docs/reference/exit-codes.md."""
    rows = []
    for name, record in _records().items():
        for number, meaning in record.exit_codes:
            link = f"[{_title(name)}](cli.md#{_title(name).replace(' ', '-')})"
            rows.append((link, code(str(number)), meaning))
    return (f"# Exit codes\n\n{NOTICE}\nEvery command's exit codes, from the same records as "
            "each `--help`. A workflow step under `bash -e` stops at any non-zero one: put the "
            "steps that must still run (report, summary, upload) under `if: always()`. Exit `3` is "
            "one line naming the flag, file or field, never a traceback. Any `hil` command exits "
            "`130` when interrupted (Ctrl-C).\n\n"
            + table(("command", "exit code", "meaning"), rows))
