"""A private adb server per run: `adb -P PORT nodaemon server` as our own child process.

A private server keeps a run away from whatever uses the default port 5037, and owning
its PID lets us stop it for sure. Its `client` never runs `adb start-server` on its own
(adbutils does that when a connection fails, which would leave a stray daemon on 5037):
a dead server is an InfraError, and `restart()` brings it back on the same port.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import tempfile
import time
from types import TracebackType
from typing import IO

import adbutils
from adbutils import AdbConnection, AdbError
from adbutils._utils import adb_path

from hil.errors import InfraError

log = logging.getLogger(__name__)

DEFAULT_PORT = 5037
_RESERVED_PORTS = {DEFAULT_PORT, *range(5554, 5586)}
"""The default server port and the emulator ports a starting server probes."""
_POLL = 0.05


class _NoSpawnConnection(AdbConnection):
    """An adbutils connection that fails instead of running `adb start-server`."""

    def _safe_connect(self) -> socket.socket:
        return self._create_socket()


class _PrivateClient(adbutils.AdbClient):
    """`adbutils.AdbClient` for one private server: connections never spawn a server."""

    def __init__(self, port: int, socket_timeout: float | None) -> None:
        super().__init__(host="127.0.0.1", port=port, socket_timeout=socket_timeout)
        self._default_timeout = socket_timeout

    def make_connection(self, timeout: float | None = None) -> AdbConnection:
        connection = _NoSpawnConnection(self.host, self.port)
        timeout = timeout or self._default_timeout
        if timeout:
            connection.conn.settimeout(timeout)
        return connection


def _free_port() -> int:
    """A free loopback port that is neither 5037 nor an emulator port."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _RESERVED_PORTS:
            return port


class AdbServer:
    """A private adb server: `start()`, `client`, `connect(address)`, `stop()`."""

    def __init__(
        self, port: int = 0, socket_timeout: float | None = 30.0, start_timeout: float = 15.0
    ) -> None:
        if port == DEFAULT_PORT:
            raise ValueError("a private adb server must not use the default port 5037")
        self.port = port or _free_port()
        self.adb = adb_path()
        self.start_timeout = start_timeout
        self._client = _PrivateClient(self.port, socket_timeout)
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def client(self) -> adbutils.AdbClient:
        """An adbutils client of this server."""
        return self._client

    @property
    def pid(self) -> int | None:
        """The server's PID while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the server and wait until it answers; InfraError if it does not."""
        if self._process is not None:
            return
        env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(self.port), ADB_MDNS="0")
        self._log = tempfile.TemporaryFile(prefix="hil-adb-server-")
        self._process = subprocess.Popen(
            [self.adb, "-P", str(self.port), "nodaemon", "server"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                version = self._client.server_version()
                break
            except (AdbError, OSError) as exc:
                reason = str(exc)
            if self._process.poll() is not None:
                tail = self._log_tail()
                self._reap()
                raise InfraError(f"adb server on port {self.port} exited: {tail}")
            if time.monotonic() > deadline:
                self.stop()
                raise InfraError(
                    f"adb server on port {self.port} did not answer in "
                    f"{self.start_timeout:.0f} s: {reason}"
                )
            time.sleep(_POLL)
        log.info("adb server %s (protocol %d) on port %d, pid %d",
                 self.adb, version, self.port, self._process.pid)

    def connect(self, address: str, timeout: float = 30.0) -> adbutils.AdbDevice:
        """`adb connect ADDRESS`, retried until it succeeds, then wait until the device
        is in state `device`. InfraError when either does not happen within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                answer = self._client.connect(address, timeout=max(1.0, deadline - time.monotonic()))
            except (AdbError, OSError) as exc:
                raise InfraError(f"adb server on port {self.port}: {exc}") from exc
            if answer.startswith(("connected to", "already connected to")):
                break
            if time.monotonic() > deadline:
                raise InfraError(f"adb connect {address}: {answer}")
            time.sleep(_POLL * 4)
        device = self._client.device(serial=address)
        while True:
            try:
                state = device.get_state()
            except (AdbError, OSError) as exc:
                state = str(exc)
            if state == "device":
                return device
            if time.monotonic() > deadline:
                raise InfraError(f"{address}: state {state!r}, not 'device', after {timeout} s")
            time.sleep(_POLL)

    def disconnect(self, address: str) -> None:
        """`adb disconnect ADDRESS`; no error when it was not connected."""
        try:
            self._client.disconnect(address)
        except OSError as exc:
            raise InfraError(f"adb server on port {self.port}: {exc}") from exc

    def restart(self) -> None:
        """Stop the server (dead or alive) and start it again on the same port."""
        self.stop()
        self.start()

    def stop(self) -> None:
        """Ask the server to exit, then SIGTERM and SIGKILL it by PID; wait for it."""
        if self._process is None:
            return
        if self._process.poll() is None:
            with contextlib.suppress(AdbError, OSError):
                self._client.server_kill()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.terminate()
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
        self._reap()

    def _reap(self) -> None:
        if self._process is not None:
            self._process.wait()
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_tail(self, size: int = 2000) -> str:
        assert self._log is not None
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - size))
        return self._log.read().decode(errors="replace").strip() or "(no output)"

    def __enter__(self) -> AdbServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
