"""The fastboot flasher: Debian's (AOSP's) `fastboot` client, run as argument lists.

Every call is `fastboot -s ENDPOINT ARGS...` with a timeout, as labgrid's AndroidFastbootDriver
builds it (labgrid/driver/fastbootdriver.py `_get_fastboot_prefix`: `-s usb:PATH` or
`-s PROTOCOL:ADDRESS:PORT`; here a USB board is named by its serial, which `fastboot -s` also
takes). `getvar` reads the client's `NAME: VALUE` line (stderr), as the driver's
`_filter_fastboot_output` does.

Waiting for a board: over USB, until `fastboot devices` lists its serial; over TCP, until its
port accepts a connection and `getvar product` answers. (AOSP's client retries a TCP connect
that fails in a loop of its own, forever, `fastboot.cpp` `open_device`: hil connects first, so
the client is only started on a port that listens, and every call is killed at its timeout.)

A labgrid place's fastboot runs where labgrid runs it: on the exporter's host (`via`), through
the resource's ssh command prefix (labgrid driver/fastbootdriver.py `_get_fastboot_prefix`:
`command_prefix + [fastboot, -s, ...]`; hil/board/labgrid_ssh.py). There the image is staged
first (labgrid's ManagedFile, as the driver's `flash` does), the TCP connect is made on that host
too, and every call carries its limit as coreutils `timeout` as well: sshd signals no program of
a session without a tty when the client is killed, so a fastboot waiting on the board would
otherwise run on.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hil.board import labgrid_ssh
from hil.board.images import NET_ENDPOINT, Image
from hil.errors import InfraError

log = logging.getLogger(__name__)

FASTBOOT = "fastboot"
"""The client (Debian package `fastboot`)."""
COMMAND_S = 30.0
"""Limit of a short fastboot call (getvar, reboot, devices)."""
POLL_S = 0.25
"""Between two looks for a board that is entering the bootloader."""
REMOTE_GRACE_S = 5.0
"""On an exporter's host, a call's `timeout` is its limit and this much more (hil kills the ssh
client at the limit: the remote `timeout` only ends what that left running)."""
CONNECT_S = 2.0
"""Limit of the TCP connect made before a network board's first fastboot call."""


class NoAnswer(InfraError, TimeoutError):
    """A fastboot call outlived its timeout (and was killed): the bootloader stopped answering."""


@dataclass(frozen=True)
class FastbootFlasher:
    """Flashes one board with `fastboot -s ENDPOINT` (hil/provision/flasher.py's Flasher)."""

    endpoint: str
    """A USB serial, or `tcp:HOST:PORT` / `udp:HOST:PORT`."""
    flash_s: float = 300.0
    """Limit of one `fastboot flash` (download and write of one image)."""
    command_s: float = COMMAND_S
    tool: str = FASTBOOT
    via: str | None = None
    """The host fastboot runs on over ssh (a labgrid place's exporter, or its proxy); None: here."""

    method = "fastboot"
    reboot_target = "bootloader"
    """What `adb reboot` is given to reach this flashing mode."""

    def describe(self) -> str:
        return f"fastboot -s {self.endpoint}" + (f" on {self.via} (ssh)" if self.via else "")

    def _argv(self, argv: Sequence[str], limit_s: float) -> list[str]:
        """`argv` run here, or on `via` through labgrid's ssh prefix under `timeout`."""
        if self.via is None:
            return list(argv)
        limit = f"{limit_s + REMOTE_GRACE_S:g}"
        return labgrid_ssh.remote_argv(self.via, ["timeout", "--kill-after=5", limit, *argv])

    def _call(self, args: Sequence[str], limit_s: float) -> str:
        """Run `fastboot -s ENDPOINT ARGS`; its output (stdout + stderr). InfraError naming
        the command (never more than its first words) when it fails or outlives `limit_s`."""
        argv = self._argv([self.tool, "-s", self.endpoint, *args], limit_s)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=limit_s,
                                  check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise NoAnswer(f"fastboot {args[0]}: no answer within {limit_s:g} s") from exc
        except OSError as exc:
            raise InfraError(f"fastboot: cannot run {argv[0]!r}: {exc.strerror or exc} "
                             f"(apt-get install {'openssh-client' if self.via else 'fastboot'})") from exc
        output = (done.stdout or "") + (done.stderr or "")
        if done.returncode != 0:
            raise InfraError(f"fastboot {' '.join(args[:2])}: exit {done.returncode}: {_failure(output)}")
        return output

    def getvar(self, name: str) -> str:
        """`fastboot getvar NAME`: its value (labgrid's AndroidFastbootDriver.getvar)."""
        output = self._call(["getvar", name], self.command_s)
        values = [line.split(": ", 1)[1].strip() for line in output.splitlines()
                  if line.startswith(f"{name}: ")]
        if len(values) != 1:
            raise InfraError(f"fastboot getvar {name}: no single '{name}: VALUE' line in "
                             f"{_failure(output)!r}")
        return values[0]

    def wait(self, limit_s: float) -> None:
        """Return once the board answers in fastboot; InfraError past `limit_s`."""
        deadline = time.monotonic() + limit_s
        last = "not seen"
        while time.monotonic() < deadline:
            try:
                if self._present(max(1.0, min(self.command_s, deadline - time.monotonic()))):
                    return
            except InfraError as exc:
                last = str(exc)
            time.sleep(POLL_S)
        raise InfraError(f"{self.endpoint} not in fastboot within {limit_s:g} s ({last})")

    def answers(self) -> bool:
        """Whether the board is in fastboot now (one quick look)."""
        try:
            return self._present(min(5.0, self.command_s))
        except InfraError:
            return False

    def _present(self, limit_s: float) -> bool:
        match = NET_ENDPOINT.match(self.endpoint)
        if match is None:  # USB: listed by `fastboot devices` ("SERIAL\tfastboot")
            try:
                listed = subprocess.run(self._argv([self.tool, "devices"], limit_s), capture_output=True,
                                        text=True, errors="replace", timeout=limit_s, check=False,
                                        stdin=subprocess.DEVNULL)
            except (OSError, subprocess.SubprocessError) as exc:
                raise InfraError(f"fastboot devices: {type(exc).__name__}: {exc}") from exc
            return any(line.split()[:1] == [self.endpoint] for line in listed.stdout.splitlines())
        protocol, host, port = match.group(1), match.group(2), int(match.group(3))
        if protocol == "tcp" and not self._connects(host, port, min(CONNECT_S, limit_s)):
            return False
        self._call(["getvar", "product"], limit_s)
        return True

    def _connects(self, host: str, port: int, limit_s: float) -> bool:
        """Whether `host:port` accepts a TCP connection, from where fastboot runs (on `via`:
        bash's /dev/tcp under `timeout`, both on every Debian host)."""
        if self.via is None:
            try:
                with socket.create_connection((host, port), timeout=limit_s):
                    return True
            except OSError:
                return False
        probe = ["timeout", f"{limit_s:g}", "bash", "-c", 'exec 3<>"/dev/tcp/$0/$1"', host, str(port)]
        try:
            done = subprocess.run(labgrid_ssh.remote_argv(self.via, probe), capture_output=True,
                                  timeout=limit_s + REMOTE_GRACE_S, check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            raise InfraError(f"ssh {self.via}: connect to {host}:{port}: {type(exc).__name__}") from exc
        if done.returncode == 255:  # ssh's own failure, not the probe's
            raise InfraError(f"ssh {self.via}: {_failure(done.stderr.decode(errors='replace'))}")
        return done.returncode == 0

    def product(self) -> str:
        """`getvar product`."""
        return self.getvar("product")

    def write(self, image: Image) -> None:
        """`fastboot flash PARTITION FILE` (the client downloads, then the board writes); on
        `via`, the file staged there first."""
        path = labgrid_ssh.stage(self.via, image.path) if self.via else str(image.path)
        self._call(["flash", image.partition, path], self.flash_s)

    def boot(self) -> None:
        """`fastboot reboot`: leave the bootloader for the OS."""
        self._call(["reboot"], self.command_s)


def _failure(output: str) -> str:
    """The line that says why fastboot failed (`FAILED (remote: '...')`), else the last one."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    failed = [line for line in lines if "FAILED" in line]
    errors = [line for line in lines if line.startswith("fastboot: error")]
    return (failed or errors or lines or ["(no output)"])[-1][:300]
