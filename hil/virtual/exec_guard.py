"""The virtual board's exec guard: what runs when a shell on the board executes a file is decided
when it is executed, by what the file is, as a board's kernel decides it.

A real board runs whatever program is there, however it arrived (adb push, unpacked by the
board's own `tar`, copied, written by a script), and its kernel refuses what it cannot run. The
virtual board's shells run on this host's kernel instead, which would run an x86-64 ELF and
refuse an aarch64 one. So every `execve`/`execveat` in a board's sandbox stops at a seccomp
filter whose listener the board holds (`SECCOMP_RET_USER_NOTIF`, Linux 5.5 or later for
`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: `man 2 seccomp_unotify`), and the board looks at the file:

| the file executed, on `/data` | an aarch64 board | here |
|---|---|---|
| not executable | `EACCES` | the kernel's own `EACCES` |
| a `#!` script, or no known format | runs it / `ENOEXEC`, the shell runs it as a script | the same |
| an aarch64 ELF named `enn_executor_runner` | runs the runner | replaced by the board's runner front, run |
| another aarch64 ELF | runs it | `ENOEXEC`: a virtual board cannot run Android binaries |
| an ELF for another machine (x86-64...) | `ENOEXEC` ("Exec format error") | `ENOEXEC` |

The runner is recognised by what is executed, not by how it arrived; its bytes are replaced by
the runner front (`runner_front.py`, which runs the program in the board's warm executor under
its runner profile) at its first exec, keeping its mode, and the board logs the swap. Files
outside `/data` (the board's own programs: its stubs in `/system/bin`, the host's `/usr`) run
as they are. The decision is made on the path the process names, read from its memory; a
process that changes the file between the look and the exec only fools its own emulation (this
is no security boundary: the sandbox is, `device.py`).

The listener is created in the shell's process before it execs bubblewrap (`preexec`), sent to
the board over a socket pair and closed there, so nothing in the sandbox holds it; one thread
per board answers every sandbox's notifications (`ioctl`s through ctypes, which release the GIL).
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import select
import socket
import stat
import struct
import threading
from collections.abc import Callable
from pathlib import Path

from hil.errors import InfraError

log = logging.getLogger(__name__)

EM_AARCH64 = 183
"""`e_machine` of an aarch64 ELF (elf.h)."""
ELF_MAGIC = b"\x7fELF"

_SYSCALLS = {  # machine -> (AUDIT_ARCH_*, execve, execveat)
    "x86_64": (0xC000003E, 59, 322),
    "aarch64": (0xC00000B7, 221, 281),
}
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER, _SECCOMP_GET_NOTIF_SIZES = 1, 3
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_SECCOMP_RET_ALLOW, _SECCOMP_RET_USER_NOTIF = 0x7FFF0000, 0x7FC00000
_SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_NOTIF = struct.Struct("<QIIiIQ6Q")
"""struct seccomp_notif: id, pid, flags, then struct seccomp_data: nr, arch, ip, args[6]."""
_RESP = struct.Struct("<QqiI")
"""struct seccomp_notif_resp: id, val, error, flags."""


def _iowr(number: int, size: int) -> int:
    return (3 << 30) | (size << 16) | (ord("!") << 8) | number


_NOTIF_RECV = _iowr(0, _NOTIF.size)
_NOTIF_SEND = _iowr(1, _RESP.size)
_NOTIF_ID_VALID = (1 << 30) | (8 << 16) | (ord("!") << 8) | 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _filter(arch: int, execve: int, execveat: int) -> bytes:
    """BPF: notify the listener of execve and execveat of the native architecture, allow the
    rest."""
    def stmt(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("<HBBI", code, jt, jf, k)

    return b"".join([
        stmt(_BPF_LD_W_ABS, 4),                  # seccomp_data.arch
        stmt(_BPF_JEQ_K, arch, 0, 3),            # another architecture: allow
        stmt(_BPF_LD_W_ABS, 0),                  # seccomp_data.nr
        stmt(_BPF_JEQ_K, execve, 2, 0),
        stmt(_BPF_JEQ_K, execveat, 1, 0),
        stmt(_BPF_RET_K, _SECCOMP_RET_ALLOW),
        stmt(_BPF_RET_K, _SECCOMP_RET_USER_NOTIF),
    ])


def elf_machine(head: bytes) -> int | None:
    """`e_machine` of an ELF file's first bytes; None when they are no ELF header."""
    if len(head) < 20 or not head.startswith(ELF_MAGIC):
        return None
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


class ExecGuard:
    """The exec guard of one board. `decide(device_path, host_path)` returns 0 (let the exec
    go on) or the errno to fail it with; it may replace the file first."""

    def __init__(self, to_host: Callable[[str], Path | None], decide: Callable[[str, Path], int]) -> None:
        """`to_host(device_path)`: the host path of a file on the board's `/data`, None for
        any other (a board program, a path that escapes); `decide` as above."""
        machine = platform.machine()
        if machine not in _SYSCALLS:
            raise InfraError(f"the virtual board's exec guard needs an x86_64 or aarch64 host, not {machine}")
        self._to_host = to_host
        self._decide = decide
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._sys_seccomp = _SYS_SECCOMP[machine]
        _arch, self._execve, self._execveat = _SYSCALLS[machine]
        sizes = (ctypes.c_uint16 * 3)()
        if self._libc.syscall(self._sys_seccomp, _SECCOMP_GET_NOTIF_SIZES, 0, sizes) != 0:
            raise InfraError("the virtual board's exec guard needs seccomp user notification (Linux 5.5 "
                             f"or later): {os.strerror(ctypes.get_errno())}")
        self._notif_size = max(sizes[0], _NOTIF.size)
        self._program = ctypes.create_string_buffer(_filter(*_SYSCALLS[machine]))
        self._fprog = _SockFprog(len(self._program.raw) // 8, ctypes.addressof(self._program))
        self._receiver, self._sender = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        threading.Thread(target=self._serve, name="hil-exec-guard", daemon=True).start()

    @property
    def pass_fd(self) -> int:
        """The file descriptor a sandbox's process must keep open for `preexec`."""
        return self._sender.fileno()

    def preexec(self) -> None:
        """In the forked child before it execs bubblewrap (`preexec_fn`): install the filter
        with a new listener, send the listener to the board, close it. Only system calls and
        objects made before the fork: no lock a thread of the board may hold."""
        if self._libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        listener = self._libc.syscall(self._sys_seccomp, _SECCOMP_SET_MODE_FILTER,
                                      _SECCOMP_FILTER_FLAG_NEW_LISTENER, ctypes.byref(self._fprog))
        if listener < 0:
            raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)")
        socket.send_fds(self._sender, [b"L"], [listener])
        os.close(listener)
        os.close(self._sender.fileno())

    # -- the board's side ------------------------------------------------------------------------
    def _serve(self) -> None:
        poller = select.poll()
        poller.register(self._receiver.fileno(), select.POLLIN)
        while True:
            for fd, events in poller.poll():
                if fd == self._receiver.fileno():
                    _, fds, _, _ = socket.recv_fds(self._receiver, 16, 4)
                    for listener in fds:
                        os.set_inheritable(listener, False)
                        poller.register(listener, select.POLLIN)
                elif events & select.POLLIN:
                    self._answer(fd)
                else:  # POLLHUP: every process of that sandbox has ended
                    poller.unregister(fd)
                    os.close(fd)

    def _answer(self, listener: int) -> None:
        request = ctypes.create_string_buffer(self._notif_size)
        if self._libc.ioctl(listener, _NOTIF_RECV, request) != 0:
            return  # ENOENT: the process died before it was read
        notif_id, pid, _flags, nr, _arch, _ip, *args = _NOTIF.unpack_from(request.raw)
        error = 0
        try:
            error = self._judge(listener, notif_id, pid, nr, args)
        except Exception:  # noqa: BLE001 - never leave an exec hanging: let it go on
            log.exception("exec guard: pid %d", pid)
        response = _RESP.pack(notif_id, 0, -error, 0 if error else _SECCOMP_USER_NOTIF_FLAG_CONTINUE)
        self._libc.ioctl(listener, _NOTIF_SEND, ctypes.create_string_buffer(response, _RESP.size))

    def _judge(self, listener: int, notif_id: int, pid: int, nr: int, args: list[int]) -> int:
        if nr == self._execve:
            dirfd, pointer, flags = _AT_FDCWD, args[0], 0
        else:
            dirfd, pointer, flags = ctypes.c_int32(args[0] & 0xFFFFFFFF).value, args[1], args[4]
        path = _read_string(pid, pointer)
        if path is None:
            return 0
        device_path = self._device_path(pid, path, dirfd, flags)
        valid = ctypes.c_uint64(notif_id)
        if device_path is None or self._libc.ioctl(listener, _NOTIF_ID_VALID, ctypes.byref(valid)) != 0:
            return 0  # not one of ours, or the process is gone (its PID may be another's)
        host = self._to_host(device_path)
        return 0 if host is None else self._decide(device_path, host)

    @staticmethod
    def _device_path(pid: int, path: str, dirfd: int, flags: int) -> str | None:
        """The path as the process names it on the board, made absolute."""
        if path.startswith("/"):
            return path
        try:
            if dirfd == _AT_FDCWD:
                base = os.readlink(f"/proc/{pid}/cwd")
            else:
                base = os.readlink(f"/proc/{pid}/fd/{dirfd}")
        except OSError:
            return None
        if not path and flags & _AT_EMPTY_PATH:
            return base
        return base.rstrip("/") + "/" + path


def _read_string(pid: int, address: int, limit: int = 4096) -> str | None:
    """The NUL-terminated string at `address` in process `pid`, or None."""
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
            memory.seek(address)
            data = memory.read(limit)
    except (OSError, ValueError, OverflowError):
        return None
    end = data.find(b"\0")
    return os.fsdecode(data[:end]) if end >= 0 else None


def executable_verdict(path: Path, runner_name: str) -> str:
    """What a board does with the file at `path` (on its `/data`) when executed: `kernel` (the
    kernel decides: not executable, a script, no known format), `runner` (an aarch64 ELF named
    like the runner), `android` (another aarch64 ELF), `foreign` (an ELF for another machine)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111:
            return "kernel"
        with path.open("rb") as file:
            head = file.read(64)
    except OSError:
        return "kernel"
    machine = elf_machine(head)
    if machine is None:
        return "kernel"
    if machine != EM_AARCH64:
        return "foreign"
    return "runner" if path.name == runner_name else "android"
