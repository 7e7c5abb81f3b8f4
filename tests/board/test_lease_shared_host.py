"""Leases on a host other users share: what another local user plants in the lease folder
never makes hil write elsewhere; a lease another user's run made is still taken over.
Acted out as uid 4321 (tests/second_user.py), with whole `hil run`s."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hil.board.lease import UnsafeLeaseDir, _file_name, acquire, check_lease_dir
from hil.errors import InfraError
from tests.second_user import SECOND_UID, as_second_user, needs_root, second_user_argv, shared_tmp

pytestmark = needs_root
__all__ = ["shared_tmp"]  # the fixture

REPO = Path(__file__).resolve().parents[2]
BOARD = "192.0.2.7:5555"
"""A network board (TEST-NET-1: nothing answers); its lease is taken before it is reached."""


def _shared_folder(shared_tmp: Path) -> Path:
    """A lease folder as root makes it for everyone: root's, mode 1777."""
    folder = shared_tmp / "leases"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def _run(lease_dir: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hil", "run", "--board", BOARD, "--suite", "smoke", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "HIL_LEASE_DIR": str(lease_dir)},
    )


def _refusals(stderr: str, folder: Path) -> list[str]:
    return [line for line in stderr.splitlines() if "not usable: lease of" in line and str(folder) in line]


def test_a_symlink_another_user_planted_under_a_lease_name_is_refused(shared_tmp: Path) -> None:
    folder = _shared_folder(shared_tmp)
    target = shared_tmp / "root-only"
    target.write_text("root's secret\n")
    target.chmod(0o600)
    planted = folder / _file_name(BOARD)
    as_second_user(lambda: planted.symlink_to(target))
    assert planted.lstat().st_uid == SECOND_UID

    run = _run(folder, shared_tmp / "out")

    assert run.returncode == 2, run.stderr
    (line,) = _refusals(run.stderr, folder)
    assert f"in lease folder {folder}: it is a symbolic link" in line
    assert target.read_text() == "root's secret\n"  # not emptied
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # not made 0666


def test_a_lease_folder_another_user_made_is_refused(shared_tmp: Path) -> None:
    shared_tmp.chmod(0o777)
    folder = shared_tmp / "leases"
    target = shared_tmp / "root-only"
    target.write_text("root's secret\n")
    target.chmod(0o600)

    def plant() -> None:  # their own folder, with a link to root's file under the lease name
        folder.mkdir(mode=0o777)
        os.chmod(folder, 0o1777)
        (folder / _file_name(BOARD)).symlink_to(target)

    as_second_user(plant)
    run = _run(folder, shared_tmp / "out")

    assert run.returncode == 2, run.stderr
    (line,) = _refusals(run.stderr, folder)
    assert f"lease folder {folder} belongs to uid {SECOND_UID}, not root or you" in line
    assert target.read_text() == "root's secret\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_shared_folder_must_be_sticky_and_a_real_folder(shared_tmp: Path) -> None:
    loose = shared_tmp / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    with pytest.raises(UnsafeLeaseDir, match=r"writable by others \(mode 0777\) and not sticky"):
        check_lease_dir(loose)
    link = shared_tmp / "link"
    link.symlink_to(_shared_folder(shared_tmp))
    with pytest.raises(InfraError, match=f"lease folder {link} is a symbolic link"):
        acquire("localhost/R3CX40", "run", 0, folder=link)
    private = shared_tmp / "mine"
    private.mkdir(mode=0o700)
    acquire("localhost/R3CX40", "run", 0, folder=private).release()  # the user's own: fine


def test_a_hard_link_or_a_foreign_private_file_is_refused(shared_tmp: Path) -> None:
    folder = _shared_folder(shared_tmp)
    target = shared_tmp / "root-only"
    target.write_text("root's secret\n")
    os.link(target, folder / _file_name("localhost/R3CX40"))
    with pytest.raises(InfraError, match="it has 2 hard links"):
        acquire("localhost/R3CX40", "run", 0, folder=folder)
    assert target.read_text() == "root's secret\n"

    def private_file() -> None:
        fd = os.open(folder / _file_name("localhost/R3CX41"), os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)

    as_second_user(private_file)
    with pytest.raises(InfraError, match=f"belongs to uid {SECOND_UID} and is not shared"):
        acquire("localhost/R3CX41", "run", 0, folder=folder)


def test_another_users_lease_excludes_and_is_taken_over(shared_tmp: Path) -> None:
    folder = _shared_folder(shared_tmp)
    code = ("import sys, time; from pathlib import Path; from hil.board.lease import acquire; "
            f"acquire('localhost/R3CX40', 'theirs', 0, folder=Path({str(folder)!r})); "
            "print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen(second_user_argv([sys.executable, "-c", code]), cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        (path,) = folder.glob("*.lease")
        info = path.stat()
        assert info.st_uid == SECOND_UID and stat.S_IMODE(info.st_mode) == 0o666
        with pytest.raises(InfraError, match=r"busy: held by run theirs"):
            acquire("localhost/R3CX40", "mine", 0, folder=folder)
        assert holder.stdin is not None
        holder.stdin.close()  # it ends; the kernel drops its lock
        assert holder.wait(timeout=60) == 0
        lease = acquire("localhost/R3CX40", "mine", 0, folder=folder)
        lease.release()
    finally:
        holder.kill()
        holder.wait()
