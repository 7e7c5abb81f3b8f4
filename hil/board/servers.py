"""Which adb server a board belongs to, for one `hil run` or `hil boards`.

```
virtual board (hil starts it)            -> hil's private server (started on first use)
entry.adb_server / SERIAL@HOST:PORT      -> that lab server (hil is only its client)
--adb-server / HIL_ADB_SERVER /
ADB_SERVER_SOCKET / ANDROID_ADB_SERVER_* -> that lab server, for every other board
--adb-server own                         -> hil's private server, for every other board
otherwise: a network board (HOST:PORT)   -> hil's private server (it `adb connect`s it)
           a USB board (a serial)        -> the host's own server, 127.0.0.1:5037
```

A USB board never goes to a private server: two servers on one host fight over USB devices
(reference: adb-protocol.md item 10). A lab server that does not answer is an
InfraError of the boards that belong to it, never of the others. Each server has its own
`ServerKeeper`: the private one is restarted when it dies, a lab's is not (hil does not own
it), so its boards climb the recovery ladder and end quarantined.
"""

from __future__ import annotations

import threading
from types import TracebackType

from hil.adbaddress import DEFAULT_SERVER, OWN_SERVER, UNIX_SOCKET
from hil.adbserver import AdbServer, LabAdbServer
from hil.board.inventory import InventoryEntry
from hil.board.lease import board_key
from hil.board.recovery import ServerKeeper
from hil.errors import InfraError

Server = AdbServer | LabAdbServer


class BoardServers:
    """The adb servers of one command: `server_for(entry)`, `keeper_for(server)`, `close()`."""

    def __init__(self, lab_default: str | None = None, socket_timeout: float | None = 30.0) -> None:
        self.lab_default = lab_default
        """`--adb-server` (`hil.adbaddress.server_choice`): the server of every board that
        hil does not start itself and whose entry names none; `own`: the private one."""
        self.socket_timeout = socket_timeout
        self._lock = threading.Lock()
        self._private: AdbServer | None = None
        self._labs: dict[str, LabAdbServer] = {}
        self._keepers: dict[int, ServerKeeper] = {}

    @property
    def private(self) -> AdbServer | None:
        """hil's private server, once a board needed it."""
        return self._private

    def address_for(self, entry: InventoryEntry) -> str | None:
        """`HOST:PORT` of the lab server `entry` belongs to; None for the private server."""
        if entry.virtual:
            return None
        if entry.adb_server:
            return entry.adb_server
        if self.lab_default == OWN_SERVER:
            return None
        if self.lab_default:
            return self.lab_default
        return None if entry.network else DEFAULT_SERVER

    def lease_key(self, entry: InventoryEntry) -> str:
        """The key of `entry`'s lease (`hil.board.lease.board_key`)."""
        address = self.address_for(entry)
        on_host = address is None or address.startswith(UNIX_SOCKET)  # a unix socket: this host's
        return board_key(entry.adb, None if on_host else address.rpartition(":")[0])

    def server_for(self, entry: InventoryEntry) -> Server:
        """The (started, answering) server of `entry`; InfraError when it does not answer."""
        address = self.address_for(entry)
        with self._lock:
            if address is None:
                if self._private is None:
                    server = AdbServer(socket_timeout=self.socket_timeout)
                    server.start()
                    self._private = server
                return self._private
            lab = self._labs.get(address)
            if lab is None:
                lab = self._labs[address] = LabAdbServer(address, self.socket_timeout)
        lab.start()  # every board asks again: a server down at first may be back
        return lab

    def keeper_for(self, server: Server) -> ServerKeeper:
        """The one ServerKeeper of `server`."""
        with self._lock:
            keeper = self._keepers.get(id(server))
            if keeper is None:
                keeper = self._keepers[id(server)] = ServerKeeper(server)
            return keeper

    def used(self) -> list[Server]:
        """Every server a board was routed to, the private one first."""
        with self._lock:
            return [*([self._private] if self._private else []), *self._labs.values()]

    def close(self) -> None:
        """No keeper restarts anything any more; the private server stops; lab servers
        lose only the network boards hil connected."""
        with self._lock:
            keepers = list(self._keepers.values())
        for keeper in keepers:
            keeper.close()
        for server in self.used():
            server.stop()

    def __enter__(self) -> BoardServers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def describe_servers(servers: BoardServers, entries: list[InventoryEntry]) -> str:
    """One line per server the boards used: which it is, who owns it, and what it sees
    (`adb devices`), e.g. `adb server: the lab's adb server 127.0.0.1:5037 (used as a client:
    not started, not stopped by hil); sees 2: R3CX40 device, 10.0.0.7:5555 offline`."""
    lines = []
    for server in servers.used():
        mine = [e.name for e in entries if servers.address_for(e) == (
            None if server.owned else server.address)]
        owner = ("started for this command, stopped after it" if server.owned
                 else "used as a client: not started, not stopped by hil")
        try:
            devices = server.devices()
            seen = f"sees {len(devices)}" + (
                ": " + ", ".join(f"{serial} {state}" for serial, state in devices) if devices else "")
        except InfraError as exc:
            seen = f"does not answer: {exc}"
        lines.append(f"adb server: {server.describe()} ({owner}); boards: "
                     f"{', '.join(mine) or '-'}; {seen}\n")
    return "".join(lines)
