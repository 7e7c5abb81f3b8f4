"""The virtual board's running shells, the pid namespace they share (`PidNamespace`), and
`/data` made read-only (or writable) under them.

Each shell runs in a bubblewrap sandbox whose `/data` is a bind mount of the board's data
folder (`Device.sandbox_argv`). A real board's `/data` remounted read-only (an ext4 error)
is read-only at once for every process, a shell started before it included: a case's run
shell goes through the board's kept shell (hil/board/kept_shell.py), started long before.
So `remount_data` remounts `/data` in the mount namespace of every running sandbox
(`nsenter --mount`, then `mount -o remount,bind,ro|rw`), as well as new sandboxes binding it
read-only. It needs what bubblewrap itself needs here (root, or CAP_SYS_ADMIN); where the
remount fails the board logs it, and the shells started before keep a writable `/data`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

REMOUNT_TIMEOUT_S = 10.0


class Sandboxes:
    """The bwrap processes of a board's running shells (`add` each one started)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._running: set[asyncio.subprocess.Process] = set()
        self._log = log

    def add(self, process: asyncio.subprocess.Process) -> None:
        """A sandbox just started (its bwrap process); ended ones are forgotten here: a
        process not yet reaped keeps its PID, so no PID here belongs to anything else."""
        self._running = {p for p in self._running if p.returncode is None}
        self._running.add(process)

    def remount_data(self, readonly: bool) -> int:
        """Remount `/data` read-only (or writable) in every running sandbox; the number
        remounted."""
        mode = "ro" if readonly else "rw"
        nsenter = shutil.which("nsenter")
        done = 0
        for process in list(self._running):
            if process.returncode is not None:
                continue
            inner = _sandboxed_child(process.pid)
            if inner is None:
                continue
            if nsenter is None:
                self._log(f"/data not remounted {mode} in running shell {inner}: no nsenter")
                continue
            result = subprocess.run(  # noqa: S603 - a fixed argument list
                [nsenter, "--target", str(inner), "--mount", "--",
                 "mount", "-o", f"remount,bind,{mode}", "/data"],
                capture_output=True, text=True, timeout=REMOUNT_TIMEOUT_S, check=False,
            )
            if result.returncode == 0:
                done += 1
            else:
                self._log(f"/data not remounted {mode} in running shell {inner}: "
                          f"{(result.stderr or result.stdout).strip()[:200]}")
        return done


def _sandboxed_child(bwrap_pid: int) -> int | None:
    """The process bwrap started in the sandbox's namespaces (the shell), or None when it
    has none (yet, or any more)."""
    try:
        children = Path(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def shell_pid(bwrap_pid: int) -> int | None:
    """The shell a sandbox runs (what adbd's forked child is on a board), or None once it has
    ended."""
    return _sandboxed_child(bwrap_pid)


INIT_READY = b"ready\n"
INIT_COMMAND = "echo ready; exec sleep infinity"
"""What the first process of a board's pid namespace runs (in the board's sandbox): its line
on stdout says the sandbox is up (bwrap writes its --info-fd before it mounts anything)."""


def is_namespace_init(cmdline: str) -> bool:
    """True for a process of a board's pid namespace init (its bwrap, its `sleep`): part of a
    running board, as a device's init is, not something a shell left behind."""
    text = cmdline.replace("\0", " ").strip()
    return text.endswith(INIT_COMMAND) or text == "sleep infinity"


CLOSE_S = 10.0
"""How long a closing namespace's bwrap may take to see its pid 1 gone."""
NS_GET_USERNS = 0xB701
"""ioctl(2) on a namespace file: the user namespace that owns it (ioctl_ns(2))."""


class PidNamespace:
    """The board's own pid namespace, which every shell joins (bwrap `--pidns FD`): a PID one
    shell prints is one another can kill, as on a board, and no shell sees a process of the
    host (the board's own included). Its first process is a bwrap `init` started here
    (`--unshare-pid --unshare-ipc`, its own IPC namespace too), dying with the board; when it
    dies every process in the namespace dies with it, and the next shell starts a new one.
    Run as root, bwrap joins it directly; otherwise through the user namespace that owns it
    (`--userns FD`: unprivileged bwrap makes one user namespace for the sandbox and another
    inside it).

    Where no pid namespace of its own can start (a container run as a non-root user: its
    masked /proc forbids the fresh /proc a new pid namespace needs), the board says so once
    in its log and its shells share the pid namespace bwrap runs in, as they did before:
    they still have their own IPC and network namespaces."""

    def __init__(self, init_argv: Callable[[int], list[str]], env: dict[str, str],
                 log: Callable[[str], None] = lambda line: None) -> None:
        """`init_argv(info_fd)`: the bwrap command line of the namespace's first process,
        writing bwrap's `--info-fd` JSON to `info_fd`."""
        self._init_argv = init_argv
        self._env = env
        self._log = log
        self._started = False
        self.unavailable: str | None = None
        """Why the board has no pid namespace of its own (its shells share bwrap's), or None."""
        self._init: subprocess.Popen[bytes] | None = None
        self._first: int | None = None
        """The namespace's first process (pid 1 inside), as the host numbers it."""
        self._fds: tuple[int, ...] = ()

    def join(self) -> tuple[list[str], tuple[int, ...]]:
        """bwrap options joining the namespace and the descriptors they name (to pass to the
        sandbox's bwrap); the namespace is started (again) when its init is not running.
        None ([], ()) where it cannot start at all (`unavailable`)."""
        if self.unavailable is not None:
            return [], ()
        if self._init is None or self._init.poll() is not None or not _running(self._first):
            try:  # (a killed pid 1 whose bwrap has not exited yet: a namespace no one can join)
                self._start()
            except OSError as exc:
                if self._started:  # it worked before: something else is wrong
                    raise
                self.unavailable = str(exc)
                self._log(f"{exc}: the board's shells share the pid namespace they start in "
                          "(each still has its own IPC and network namespaces)")
                return [], ()
            self._started = True
        pid_fd, *owner = self._fds
        options = ["--pidns", str(pid_fd)]
        if owner:
            options = ["--userns", str(owner[0]), *options]
        return options, self._fds

    def _start(self) -> None:
        self.close()
        read_end, write_end = os.pipe()
        try:
            self._init = subprocess.Popen(  # noqa: S603 - a fixed argument list
                self._init_argv(write_end), pass_fds=(write_end,), env=self._env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # in the board's process group: a kill of the board's group ends it too
        finally:
            os.close(write_end)
        init = self._init
        with os.fdopen(read_end, "rb") as info:
            text = info.read().decode(errors="replace")
        try:
            assert init is not None and init.stdout is not None
            if init.stdout.readline() != INIT_READY:  # EOF: bwrap failed after its info
                raise OSError("no sandbox")
            child = int(json.loads(text)["child-pid"])
            pid_fd = os.open(f"/proc/{child}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except (ValueError, KeyError, OSError) as exc:
            said = _said(init)
            self.close()
            raise OSError(f"the board's pid namespace did not start "
                          f"({said.splitlines()[-1] if said else exc})") from exc
        finally:
            for pipe in (init.stdout, init.stderr):
                if pipe is not None:
                    pipe.close()  # nothing more comes once the sandbox runs
        self._first = child
        self._fds = (pid_fd,)
        if os.geteuid() != 0:
            self._fds += (fcntl.ioctl(pid_fd, NS_GET_USERNS),)

    def close(self) -> None:
        """End the namespace: its pid 1 killed, the kernel ends every process in it before pid
        1 is gone; bwrap, its parent, reaps it and exits."""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = ()
        init, self._init = self._init, None
        first, self._first = self._first, None
        if init is None or init.poll() is not None:
            return
        if first is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(first, signal.SIGKILL)
        try:
            init.wait(timeout=CLOSE_S)
        except subprocess.TimeoutExpired:
            init.kill()
            init.wait()


def _running(pid: int | None) -> bool:
    """`pid` runs (it is not gone, and not a zombie waiting for its parent)."""
    if pid is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _said(process: subprocess.Popen[bytes] | None) -> str:
    """What a failed bwrap wrote to its stderr pipe, without blocking on it."""
    if process is None or process.stderr is None:
        return ""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=1.0)  # a bwrap that failed has exited
    fd = process.stderr.fileno()
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 4096).decode(errors="replace").strip()
    except OSError:
        return ""
