"""The virtual runner's command line, parsed as gflags parses `enn_executor_runner`'s.

The flags and their types are upstream's `DEFINE_*` lines in
`examples/samsung/executor_runner/enn_executor_runner.cpp`. gflags semantics: `--flag=value`,
`--flag value` and a single dash; bools as `--flag`, `--flag=true|false` (also 1/0, yes/no,
t/f, y/n) and `--noflag`; `--` ends the flags; `--help` prints the flags and exits 1; an
unknown flag or a bad value is `ERROR: ...` and exit 1. Arguments that are not flags are
left over (the runner rejects them: "Extra commandline args").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One DEFINE_* of the runner."""

    kind: str
    """gflags type: `string`, `uint32`, `int32`, `bool`."""
    default: str | int | bool
    help: str


FLAGS = {
    "model": Flag("string", "model.pte", "Model serialized in flatbuffer format."),
    "input": Flag("string", "", "Input file path, support multiple inputs: input_1 input_2 ..."),
    "num_executions": Flag("uint32", 1, "Number of times to run the model."),
    "warm_up": Flag("int32", 0, "Pre-run before inference."),
    "dump_statistics": Flag("bool", False, "Dump inference statistics."),
    "output_path": Flag("string", "", "Output Execution results to target directory."),
}
_TRUE = frozenset({"true", "t", "yes", "y", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "0"})
_INT = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|[0-9]+)")
_RANGES = {"int32": (-(2**31), 2**31), "uint32": (0, 2**32)}


class FlagError(Exception):
    """A gflags parse error; the runner prints `ERROR: <message>` and exits 1."""


@dataclass(frozen=True)
class Parsed:
    """The flags' values, what was left over, and whether `--help` was asked for."""

    values: dict[str, Any]
    extra: tuple[str, ...]
    want_help: bool


def _value(name: str, value: str) -> str | int | bool:
    flag = FLAGS[name]
    if flag.kind == "string":
        return value
    if flag.kind == "bool":
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
    elif _INT.fullmatch(value):
        number = int(value, 16 if "x" in value.lower() else 10)
        low, high = _RANGES[flag.kind]
        if low <= number < high:
            return number
    raise FlagError(f"illegal value '{value}' specified for {flag.kind} flag '{name}'")


def parse(args: Sequence[str]) -> Parsed:
    """Parse the runner's argv (without argv[0]); FlagError on a gflags error."""
    values: dict[str, Any] = {name: flag.default for name, flag in FLAGS.items()}
    extra: list[str] = []
    want_help = False
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            extra.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            extra.append(arg)
            continue
        name, has_value, value = arg.lstrip("-").partition("=")
        if name == "help":
            want_help = True
        elif name in FLAGS and FLAGS[name].kind == "bool":
            values[name] = _value(name, value) if has_value else True
        elif name.startswith("no") and name[2:] in FLAGS and FLAGS[name[2:]].kind == "bool":
            if has_value:
                raise FlagError(f"illegal value '{arg}' specified for bool flag '{name[2:]}'")
            values[name[2:]] = False
        elif name in FLAGS:
            if not has_value:
                if i == len(args):
                    raise FlagError(
                        f"flag '{arg}' is missing its argument; flag description: {FLAGS[name].help}"
                    )
                value = args[i]
                i += 1
            values[name] = _value(name, value)
        else:
            raise FlagError(f"unknown command line flag '{name}'")
    return Parsed(values, tuple(extra), want_help)


def usage() -> str:
    """What `--help` prints (gflags' layout, this runner's flags)."""
    lines = ["enn_executor_runner: Run an ExecuTorch program (hil VIRTUAL board).", "", "  Flags:"]
    for name, flag in FLAGS.items():
        default = str(flag.default).lower() if flag.kind == "bool" else flag.default
        lines.append(f'    -{name} ({flag.help}) type: {flag.kind} default: "{default}"')
    return "\n".join(lines) + "\n"
