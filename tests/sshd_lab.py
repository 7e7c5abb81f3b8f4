"""A real sshd for the tests: Debian's OpenSSH server (`scripts/setup` installs it), started by
the test as `/usr/sbin/sshd -D -f CONFIG` on a free loopback port with a host key and a client
key made in a temporary folder, and stopped by its PID. Never port 22, never `~/.ssh`.

Clients reach it through `ssh` on PATH: `bin/ssh` in that folder (put first on PATH) runs
`/usr/bin/ssh -F ssh_config "$@"`, whose `Host *` names the port, the key, and a known_hosts
file of the folder (StrictHostKeyChecking yes, as labgrid's own master connection asks: the
host key is known beforehand). Any host name goes to this sshd, so an exporter's host name,
its fully qualified proxy name and 127.0.0.1 all do. labgrid's util/ssh.py adds its options
after `-F` (its ControlMaster socket in a folder of its own) and runs `ssh -O check HOST`
first, which finds no ControlPath in this config and so starts its own master.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tests.processes import stop_process

SSHD = Path("/usr/sbin/sshd")
HOST_KEY_ALIAS = "hil-test-exporter"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sshd_available() -> bool:
    return SSHD.is_file() and shutil.which("ssh-keygen") is not None


class LoopbackSshd:
    """`sshd -D` on 127.0.0.1:`port` (inside the network namespace of `netns_pid` when given,
    through nsenter); `bin` holds the `ssh` wrapper; `env()` an environment with it first on
    PATH; `stop()` by PID."""

    def __init__(self, root: Path, port: int | None = None, netns_pid: int | None = None) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.bin = root / "bin"
        self.bin.mkdir(exist_ok=True)
        self.log = root / "sshd.log"
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f"]
        subprocess.run([*keygen, str(root / "host_key")], check=True, timeout=30)
        subprocess.run([*keygen, str(root / "client_key")], check=True, timeout=30)
        (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
        (root / "known_hosts").write_text(f"{HOST_KEY_ALIAS} {(root / 'host_key.pub').read_text()}")
        (root / "sshd_config").write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_key'}",
            f"AuthorizedKeysFile {root / 'authorized_keys'}", f"PidFile {root / 'sshd.pid'}",
            "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password", "UsePAM no", "StrictModes no",
            "AllowTcpForwarding yes", "X11Forwarding no", "PrintMotd no", "LogLevel VERBOSE",
            "MaxSessions 64", "MaxStartups 64", ""]))
        (root / "ssh_config").write_text("\n".join([
            "Host *", "  HostName 127.0.0.1", f"  Port {self.port}", f"  User {getpass.getuser()}",
            f"  IdentityFile {root / 'client_key'}", "  IdentitiesOnly yes",
            f"  HostKeyAlias {HOST_KEY_ALIAS}", f"  UserKnownHostsFile {root / 'known_hosts'}",
            "  GlobalKnownHostsFile /dev/null", "  StrictHostKeyChecking yes", "  BatchMode yes",
            "  ConnectTimeout 20", ""]))
        wrapper = self.bin / "ssh"
        wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {root / "ssh_config"} "$@"\n')
        wrapper.chmod(0o755)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder
        argv: Sequence[str] = [str(SSHD), "-D", "-f", str(root / "sshd_config"), "-E", str(self.log)]
        if netns_pid is not None:
            argv = ["nsenter", f"--net=/proc/{netns_pid}/ns/net", "--", *argv]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while not (root / "sshd.pid").exists():  # written once it listens
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sshd did not start: {self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (the process's environment) with the wrapper first on PATH."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.bin}:{env.get('PATH', '')}"
        return env

    def ssh(self, *command: str) -> subprocess.CompletedProcess[str]:
        """One command (an argument list) on the sshd's host, through the wrapper."""
        return subprocess.run([str(self.bin / "ssh"), "127.0.0.1", "--", shlex.join(command)], capture_output=True,
                              text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        """SIGTERM to the listening sshd by its PID (its sessions end with their connections)."""
        stop_process(self.process)
