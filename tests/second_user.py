"""Another local user of the host, for the shared-host tests: the tests run as root and act
as uid 4321 in a forked child (`as_second_user`) or a command under `setpriv`
(`second_user_argv`), never as a mock of one."""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

SECOND_UID = 4321
"""A uid no account on the host has."""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 and not os.environ.get("CI"),
    reason="acting as a second user needs root (CI runs as root)",
)


def as_second_user(action: Callable[[], None]) -> None:
    """Run `action` in a forked child as uid/gid SECOND_UID (no supplementary groups);
    AssertionError with the child's traceback when it raised."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        code = 0
        try:
            os.setgroups([])
            os.setgid(SECOND_UID)
            os.setuid(SECOND_UID)
            action()
        except BaseException:  # noqa: BLE001 - reported to the parent, whatever it was
            os.write(write_end, traceback.format_exc().encode())
            code = 1
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as report:
        text = report.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"as uid {SECOND_UID}: {text}"


def second_user_argv(argv: Sequence[str]) -> list[str]:
    """`argv` run as uid/gid SECOND_UID with no supplementary groups (util-linux setpriv)."""
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is not installed"
    return [setpriv, f"--reuid={SECOND_UID}", f"--regid={SECOND_UID}", "--clear-groups", *argv]


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A fresh folder the second user can reach (pytest's own are private to root): in the
    host's temp folder, mode 0755, removed after the test."""
    folder = Path(tempfile.mkdtemp(prefix="hil-shared-host-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
