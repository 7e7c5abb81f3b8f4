"""docs/getting-started.md runs as written: every `$ ` command of the page, in page order, in
one bash session in a fresh folder (the files the page asks to save saved there when the page
reaches them), against this checkout's .venv, with a fresh artifact cache (the first run lowers
from scratch, as a reader's does). Each must exit 0 and print what the page shows, after
normalising what differs from run to run (tests/docs/console_page.py).

`./scripts/run` is this checkout's script without its `./scripts/setup` line (the session
uses the checkout's .venv, which setup made; CI runs setup itself)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from . import console_page
from .console_page import Step

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "getting-started.md"
SETUP_LINE = "./scripts/setup"


def _workspace(folder: Path) -> None:
    """`folder` as the page's reader has it after cloning: scripts/run and .venv."""
    run = (REPO / "scripts" / "run").read_text().splitlines()
    assert SETUP_LINE in run, "scripts/run no longer runs ./scripts/setup: update this test"
    (folder / "scripts").mkdir()
    script = folder / "scripts" / "run"
    script.write_text("\n".join(line for line in run if line != SETUP_LINE) + "\n")
    script.chmod(0o755)
    (folder / ".venv").symlink_to(REPO / ".venv")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Step], dict, Path]:
    """The page's steps, what each command printed, and the folder they ran in."""
    folder = tmp_path_factory.mktemp("reader")
    _workspace(folder)
    env = {key: value for key, value in os.environ.items()  # a reader's plain shell, output in a pipe
           if not key.startswith(("GITHUB_", "VIRTUAL_ENV", "COLUMNS", "LINES", "FORCE_COLOR", "TTY_"))}
    env.update(HIL_CACHE_DIR=str(tmp_path_factory.mktemp("artifact-cache")), PYTHONUNBUFFERED="1")
    steps = console_page.steps(PAGE.read_text())
    return steps, console_page.run(steps, folder, env, timeout=600), folder


def test_the_page_has_the_tutorials_commands() -> None:
    commands = [step.command for step in console_page.steps(PAGE.read_text()) if step.command]
    for expected in ("./scripts/run", "hil report", "hil list", "hil run --suite smoke --filter",
                     "hil doctor", "hil run --suite my_cases.yaml", "hil dashboard"):
        assert any(command.startswith(expected) for command in commands), expected


def test_every_command_of_the_page_prints_what_the_page_shows(session) -> None:
    steps, printed, folder = session
    commands = [index for index, step in enumerate(steps) if step.command]
    assert sorted(printed) == commands, "a command of the page did not run"
    problems = [console_page.differences(steps[index], *printed[index], folder) for index in commands]
    problems = [problem for problem in problems if problem]
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("change", ["a line the command does not print", "a word changed"])
def test_a_line_the_command_does_not_print_fails_the_check(session, change) -> None:
    """The comparison is not vacuous: the page changed by one line no longer matches."""
    steps, printed, folder = session
    index = next(i for i, step in enumerate(steps) if step.command == "hil list --suite smoke")
    shown = list(steps[index].shown)
    if change == "a word changed":
        shown[0] = shown[0].replace("conv2d_3x3", "conv2d_5x5")
    else:
        shown.insert(2, "smoke.fp32.not_a_case")
    assert console_page.differences(steps[index], *printed[index], folder) == ""
    assert console_page.differences(Step(command=steps[index].command, shown=shown), *printed[index], folder)
