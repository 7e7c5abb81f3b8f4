"""The adb servers hil talks to: its own private one, or a lab's that it only uses.

- `AdbServer`: a private server, `adb -L localfilesystem:PATH nodaemon server` as hil's own
  child process, presenting hil's own adb key besides the user's (`hil/adbkey.py`: the virtual
  boards trust it). PATH is a unix socket in a folder private to the user (mode 0700): adb's
  server protocol has no authentication, and on a TCP port of 127.0.0.1 any local user could
  drive the boards it holds (hil's virtual boards, the network boards it connected). It keeps
  a run away from whatever uses the default port 5037, and owning its PID lets us stop it for
  sure; it dies with hil even when hil is killed (`hil.lifeline`). Right for
  boards the run itself `adb connect`s (virtual and network boards); never for USB boards
  (two servers on one host fight over USB devices).
- `LabAdbServer`: an existing server (the host's on 127.0.0.1:5037, another machine's
  through `adb -H HOST -P PORT`'s protocol): hil is only its client. It starts none, kills
  none, restarts none, and disconnects only the network boards it connected itself.

Both clients never run `adb start-server` on their own (adbutils does that when a
connection fails, which would leave a stray daemon on 5037): a dead server is an
InfraError; only the private one is brought back (`restart()`, same port).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import adbutils
from adbutils import AdbConnection, AdbError
from adbutils._utils import adb_path

from hil import lifeline
from hil.adbaddress import DEFAULT_PORT, LOOPBACK_HOSTS, SERVER_ENV, UNIX_SOCKET, parse_server
from hil.adbkey import ensure_hil_key
from hil.attention import check_state
from hil.errors import InfraError

log = logging.getLogger(__name__)

_RESERVED_PORTS = {DEFAULT_PORT, *range(5554, 5586)}
"""The default server port and the emulator ports a starting server probes."""
_POLL = 0.05
_VANISHED_S = 1.0
"""How long a transport may stay listed after `adb disconnect`, or unlisted after `adb
connect` answered, before hil goes on (the server removes a kicked transport in its main
loop, after it has answered)."""


class _NoSpawnConnection(AdbConnection):
    """An adbutils connection that fails instead of running `adb start-server`; to a unix
    socket when `unix_path` is given (hil's private server), else TCP."""

    def __init__(self, host: str, port: int, unix_path: str | None = None) -> None:
        self._unix_path = unix_path
        super().__init__(host, port)

    def _safe_connect(self) -> socket.socket:
        return self._create_socket()

    def _create_socket(self) -> socket.socket:
        if self._unix_path is None:
            return super()._create_socket()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(3)
            sock.connect(self._unix_path)
            sock.settimeout(None)
        except OSError as exc:
            sock.close()
            raise AdbError(f"connect to adb server {self._unix_path}: {exc.strerror or exc}") from exc
        return sock


class _NoSpawnClient(adbutils.AdbClient):
    """`adbutils.AdbClient` for one server: connections never spawn a server."""

    def __init__(self, host: str, port: int, socket_timeout: float | None,
                 unix_path: str | None = None) -> None:
        super().__init__(host=host, port=port, socket_timeout=socket_timeout)
        self._default_timeout = socket_timeout
        self.unix_path = unix_path
        """The server's unix socket (hil's private server), or None: TCP to host:port."""

    def server_kill(self) -> None:
        """`host:kill` (adbutils' own looks for a TCP server first: a unix socket's never got it)."""
        with self.make_connection() as connection:
            connection.send_command("host:kill")
            connection.check_okay()

    def make_connection(self, timeout: float | None = None) -> AdbConnection:
        connection = _NoSpawnConnection(self.host, self.port, self.unix_path)
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


class _Server:
    """What both kinds of server do for hil: `client`, `connect`, `disconnect`, `devices`."""

    owned = False
    """True when hil started this server and may stop or restart it."""

    def __init__(self, host: str, port: int, socket_timeout: float | None,
                 unix_path: str | None = None) -> None:
        self.host = host
        self.port = port
        self.unix_path = unix_path
        """The server's unix socket, or None (TCP to host:port)."""
        self._client = _NoSpawnClient(host, port, socket_timeout, unix_path)

    def start(self) -> None:
        """Make the server usable (start it, or check the lab's is there)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Let go of the server (stop it if hil owns it)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def address(self) -> str:
        """`HOST:PORT` of the server, or `localfilesystem:PATH` (its unix socket)."""
        return f"{UNIX_SOCKET}{self.unix_path}" if self.unix_path else f"{self.host}:{self.port}"

    @property
    def on_this_host(self) -> bool:
        """The server runs on this host (hil's own, or a lab's on a loopback address or a unix
        socket), so a network board's `HOST:PORT` it was given reaches the same board from here."""
        return self.owned or self.unix_path is not None or self.host in LOOPBACK_HOSTS

    @property
    def client(self) -> adbutils.AdbClient:
        """An adbutils client of this server."""
        return self._client

    def describe(self) -> str:
        """One phrase: which server this is."""
        raise NotImplementedError

    def ended(self) -> str | None:
        """How the server hil started has ended (its exit status and last output), or None
        while it runs or when hil did not start it."""
        return None

    def devices(self) -> list[tuple[str, str]]:
        """(serial, state) of every device the server sees; InfraError when it does not answer."""
        try:
            return [(item.serial, item.state) for item in self._client.list()]
        except (AdbError, OSError) as exc:
            raise InfraError(f"{self.describe()}: {exc}") from exc

    def connect(self, address: str, timeout: float = 30.0) -> adbutils.AdbDevice:
        """`adb connect ADDRESS`, retried until it succeeds, then wait until the device
        is in state `device`. InfraError when either does not happen within `timeout`.

        A transport that vanishes after the answer is connected again: the server answers
        "already connected to" while it still lists a transport it has kicked (an earlier
        `adb disconnect`; the removal is posted to its main loop, `remove_transport` in
        adb/transport.cpp), and then drops it."""
        deadline = time.monotonic() + timeout
        while True:
            self._connect_once(address, deadline)
            device = self._client.device(serial=address)
            gone_since: float | None = None
            while True:
                try:
                    state = device.get_state()
                except (AdbError, OSError) as exc:
                    state = str(exc)
                if state == "device":
                    return device
                check_state(address, state)
                if (ended := self.ended()) is not None:
                    raise InfraError(f"{address}: {ended}")
                now = time.monotonic()
                if now > deadline:
                    raise InfraError(f"{address}: state {state!r}, not 'device', after {timeout} s")
                if "not found" not in state:
                    gone_since = None
                elif gone_since is None:
                    gone_since = now
                elif now - gone_since > _VANISHED_S:
                    log.info("%s: not listed %.1f s after adb connect: connecting again",
                             address, now - gone_since)
                    break
                time.sleep(_POLL)

    def _connect_once(self, address: str, deadline: float) -> None:
        """`adb connect ADDRESS` until the server says connected (InfraError past `deadline`)."""
        while True:
            try:
                answer = self._client.connect(address, timeout=max(1.0, deadline - time.monotonic()))
            except (AdbError, OSError) as exc:
                raise InfraError(f"{self.describe()}: {exc}") from exc
            if answer.startswith(("connected to", "already connected to")):
                self._connected(address, fresh=answer.startswith("connected to"))
                return
            check_state(address, answer)
            if time.monotonic() > deadline:
                raise InfraError(f"adb connect {address}: {answer}")
            time.sleep(_POLL * 4)

    def _connected(self, address: str, fresh: bool) -> None:
        """Hook: `address` is connected (`fresh`: by this call, not before)."""

    def disconnect(self, address: str) -> None:
        """`adb disconnect ADDRESS`, returning once the server no longer lists it (at most
        `_VANISHED_S`: the server answers before its main loop has removed the transport,
        and an `adb connect` in between is answered "already connected to"); no error when
        it was not connected."""
        try:
            self._client.disconnect(address)
        except OSError as exc:
            raise InfraError(f"{self.describe()}: {exc}") from exc
        deadline = time.monotonic() + _VANISHED_S
        while any(serial == address for serial, _state in self.devices()):
            if time.monotonic() > deadline:
                log.info("%s: still listed %g s after adb disconnect", address, _VANISHED_S)
                return
            time.sleep(_POLL)


class LabAdbServer(_Server):
    """A lab's adb server that hil only uses: `start()` checks that it answers, `stop()`
    disconnects the network boards hil connected (and nothing else), `restart()` refuses."""

    def __init__(self, address: str, socket_timeout: float | None = 30.0) -> None:
        address = parse_server(address, "--adb-server")
        if address.startswith(UNIX_SOCKET):
            super().__init__("localhost", 0, socket_timeout, unix_path=address.removeprefix(UNIX_SOCKET))
        else:
            host, _, port = address.rpartition(":")
            super().__init__(host, int(port), socket_timeout)
        self._lock = threading.Lock()
        self._ours: set[str] = set()
        """Network boards this server had not connected before hil did."""

    def describe(self) -> str:
        return f"the lab's adb server {self.address}"

    def start(self) -> None:
        """Return when the server answers; InfraError (saying hil starts none) otherwise."""
        try:
            version = self._client.server_version()
        except (AdbError, OSError) as exc:
            raise InfraError(
                f"no adb server answers at {self.address} ({exc or type(exc).__name__}); hil "
                "does not start a lab's server: start it on its host (`adb start-server`)"
            ) from exc
        log.info("using %s (protocol %d)", self.describe(), version)

    def _connected(self, address: str, fresh: bool) -> None:
        if fresh:
            with self._lock:
                self._ours.add(address)

    def disconnect(self, address: str) -> None:
        """`adb disconnect ADDRESS` only when hil connected it; a board the lab connected
        stays connected."""
        with self._lock:
            ours = address in self._ours
            self._ours.discard(address)
        if not ours:
            log.debug("%s: not disconnecting %s (hil did not connect it)", self.describe(), address)
            return
        super().disconnect(address)

    def restart(self) -> None:
        """A lab's server that died is the lab's problem: InfraError, never a new server."""
        raise InfraError(
            f"{self.describe()} does not answer; hil never starts or restarts a server it "
            "does not own"
        )

    def stop(self) -> None:
        """Disconnect what hil connected; the server itself keeps running."""
        with self._lock:
            ours = sorted(self._ours)
        for address in ours:
            with contextlib.suppress(InfraError):
                self.disconnect(address)

class AdbServer(_Server):
    """A private adb server: `start()`, `client`, `connect(address)`, `stop()`. It listens
    on a unix socket in a folder of its own, private to the user (see the module docstring);
    `address` is its socket spec (`localfilesystem:PATH`: what `ADB_SERVER_SOCKET` takes)."""

    owned = True

    def __init__(self, socket_timeout: float | None = 30.0, start_timeout: float = 15.0) -> None:
        folder = Path(tempfile.mkdtemp(prefix="hil-adb-"))  # mode 0700
        lifeline.remove_with(folder)  # gone with hil even when hil is killed
        self.socket_path = folder / "adb.sock"
        super().__init__("localfilesystem", 0, socket_timeout, unix_path=str(self.socket_path))
        self.adb = adb_path()
        self.start_timeout = start_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def describe(self) -> str:
        pid = f", pid {self.pid}" if self.pid is not None else ""
        return f"hil's private adb server ({self.address}{pid})"

    def ended(self) -> str | None:
        if self._process is None or (status := self._process.poll()) is None:
            return None
        return f"{self.describe()} exited with status {status}: {self._log_tail(500)}"

    @property
    def pid(self) -> int | None:
        """The server's PID while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the server and wait until it answers; InfraError if it does not."""
        if self._process is not None:
            return
        self._private_folder()
        # adb reads ANDROID_ADB_SERVER_ADDRESS even with -L; none of the lab's variables reach it
        env = lifeline.child_env({k: v for k, v in os.environ.items() if k not in SERVER_ENV})
        env["ADB_MDNS"] = "0"
        # hil's own key besides the user's: the virtual boards hil starts trust it (hil/adbkey.py)
        vendor = [env["ADB_VENDOR_KEYS"]] if env.get("ADB_VENDOR_KEYS") else []
        env["ADB_VENDOR_KEYS"] = os.pathsep.join([*vendor, str(ensure_hil_key(self.adb))])
        self._log = tempfile.TemporaryFile(prefix="hil-adb-server-")
        self._process = subprocess.Popen(
            [self.adb, "-L", self.address, "nodaemon", "server"],  # localfilesystem:PATH
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
                raise InfraError(f"{self.describe()} exited: {tail}")
            if time.monotonic() > deadline:
                self.stop()
                raise InfraError(f"{self.describe()} did not answer in {self.start_timeout:.0f} s: {reason}")
            time.sleep(_POLL)
        log.info("adb server %s (protocol %d) on %s, pid %d",
                 self.adb, version, self.address, self._process.pid)

    def _private_folder(self) -> None:
        """The socket's folder, made again (mode 0700) after a stop; InfraError when what is
        there is not the user's private folder."""
        folder = self.socket_path.parent
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise InfraError(f"{folder}: not a private folder of this user: the adb server's socket "
                             "is not put there")
        self.socket_path.unlink(missing_ok=True)  # a dead server's

    def restart(self) -> None:
        """Stop the server (dead or alive) and start it again on the same socket."""
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
        shutil.rmtree(self.socket_path.parent, ignore_errors=True)

    def _log_tail(self, size: int = 2000) -> str:
        assert self._log is not None
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - size))
        return self._log.read().decode(errors="replace").strip() or "(no output)"
