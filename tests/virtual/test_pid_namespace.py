"""The board's pid namespace where none can start (a container run as a non-root user: bwrap
writes its --info-fd, then cannot mount /proc): the board says so once and its shells share
the pid namespace they start in, as before, instead of failing every shell."""

from __future__ import annotations

import os
import time

import pytest

from hil.virtual.sandboxes import PidNamespace


def failing_init(info_fd: int) -> list[str]:
    """What bwrap does in such a container: info first, then the mount fails."""
    script = (f'echo \'{{"child-pid": {os.getpid()}}}\' >&{info_fd}; '
              "echo \"bwrap: Can't mount proc on /newroot/proc: Operation not permitted\" >&2; exit 1")
    return ["bash", "-c", script]


def test_a_namespace_that_cannot_start_leaves_shells_in_their_own_once_said():
    said: list[str] = []
    pids = PidNamespace(failing_init, dict(os.environ), said.append)
    assert pids.join() == ([], ())
    assert pids.join() == ([], ())  # not tried again for every shell
    assert pids.unavailable is not None
    assert len(said) == 1
    assert "Can't mount proc on /newroot/proc: Operation not permitted" in said[0]
    assert "share the pid namespace" in said[0]
    pids.close()


def test_a_namespace_that_started_once_and_then_cannot_is_an_error(tmp_path):
    """Only a namespace that never started falls back: a working one failing later is not
    the container's doing."""
    flag = tmp_path / "started"

    def init(info_fd: int) -> list[str]:
        if flag.exists():
            return failing_init(info_fd)
        flag.touch()
        return ["bash", "-c", f'echo \'{{"child-pid": \'$$\'}}\' >&{info_fd}; exec {info_fd}>&-; '
                            f"echo ready; exec sleep 0.2"]

    pids = PidNamespace(init, dict(os.environ))
    options, fds = pids.join()
    assert options[-2:] == ["--pidns", str(fds[0])]
    time.sleep(0.5)  # the first init ends
    with pytest.raises(OSError, match="pid namespace did not start"):
        pids.join()
    assert pids.unavailable is None
    pids.close()
