"""The recovery ladder's direct look at a network board's adbd (real sockets; a frozen
virtual board behind a dead adb server, and one that froze while it rebooted, are in
tests/faults/test_matrix.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hil import adbwire
from hil.adbserver import AdbServer, LabAdbServer
from hil.board.adb import AdbBoard
from hil.board.adbd_probe import adbd_silent, split_address
from hil.board.recovery import Recovery, ServerKeeper
from hil.virtual.launcher import VirtualBoardProcess

LIMIT_S = 1.0


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP port that accepts connections (the kernel completes them) and answers nothing."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def _address(server: socket.socket) -> str:
    host, port = server.getsockname()[:2]
    return f"{host}:{port}"


def test_a_board_that_accepts_but_never_answers_is_silent(listener: socket.socket) -> None:
    assert adbd_silent(_address(listener), LIMIT_S)


def test_the_hello_is_a_cnxn_an_adbd_before_android_9_accepts(listener: socket.socket) -> None:
    """What reaches the board: a CNXN offering the checksum-free version, its data checksummed
    (no version is agreed yet), and its magic right."""
    received: list[bytes] = []

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            received.append(connection.recv(4096))

    reader = threading.Thread(target=serve)
    reader.start()
    adbd_silent(_address(listener), LIMIT_S)
    reader.join(5)
    header, data = received[0][:adbwire.HEADER_SIZE], received[0][adbwire.HEADER_SIZE:]
    command, arg0, _arg1, length = adbwire.decode_header(header, 1 << 20)
    assert (command, arg0, length) == (adbwire.A_CNXN, adbwire.VERSION_SKIP_CHECKSUM, len(data))
    assert adbwire.HEADER.unpack(header)[4] == adbwire.checksum(data) != 0
    assert data.startswith(b"host::")


def test_the_hello_carries_a_real_hosts_banner_on_the_wire(listener: socket.socket) -> None:
    """A real host's CNXN says `host::features=...` (AOSP `adb.cpp` `get_connection_string`),
    with no trailing NUL; an adbd reads the host's features from it."""
    received = bytearray()

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            while len(received) < adbwire.HEADER_SIZE or len(received) < adbwire.HEADER_SIZE + \
                    adbwire.decode_header(bytes(received[:adbwire.HEADER_SIZE]), 1 << 20)[3]:
                chunk = connection.recv(4096)
                if not chunk:
                    return
                received.extend(chunk)

    reader = threading.Thread(target=serve)
    reader.start()
    adbd_silent(_address(listener), LIMIT_S)
    reader.join(5)
    data = bytes(received[adbwire.HEADER_SIZE:])
    banner, _, features = data.decode("ascii").partition("::")
    assert banner == "host" and not data.endswith(b"\0")
    key, _, names = features.partition("=")
    assert key == "features"
    assert {"shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir"} <= set(names.split(","))


def test_a_board_that_closes_the_connection_is_not_silent(listener: socket.socket) -> None:
    def close_at_once() -> None:
        connection, _ = listener.accept()
        connection.close()

    closer = threading.Thread(target=close_at_once)
    closer.start()
    assert not adbd_silent(_address(listener), LIMIT_S)
    closer.join(5)


def test_a_board_with_no_adbd_listening_is_not_silent() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = _address(server)
    assert not adbd_silent(address, LIMIT_S)  # refused: rebooting, not frozen


def test_a_virtual_board_answers(virtual_board: VirtualBoardProcess) -> None:
    assert not adbd_silent(virtual_board.address, LIMIT_S)


@pytest.mark.parametrize(("address", "parts"), [
    ("127.0.0.1:5555", ("127.0.0.1", 5555)),
    ("board-7.lab:40001", ("board-7.lab", 40001)),
    ("[fe80::1]:5555", ("fe80::1", 5555)),
])
def test_network_addresses_split(address: str, parts: tuple[str, int]) -> None:
    assert split_address(address) == parts


@pytest.mark.parametrize("serial", ["R3CN30ABCDE", "host:", ":5555", "host:port"])
def test_a_usb_serial_is_not_an_address_and_not_silent(serial: str) -> None:
    with pytest.raises(ValueError, match="is not host:port"):
        split_address(serial)
    assert not adbd_silent(serial, LIMIT_S)


def _recovery(server: AdbServer | LabAdbServer) -> Recovery:
    """The ladder of a network board (never connected: only the choice is looked at)."""
    board = AdbBoard("b", "127.0.0.1:5555", None, "r", Path("runner"), 10.0)  # type: ignore[arg-type]
    return Recovery(board, ServerKeeper(server), server.connect, server.disconnect, network=True)


@pytest.mark.parametrize(("server", "asked"), [
    ("127.0.0.1:5037", True),  # the host's own server: the board's address means the same here
    ("localhost:5038", True),
    ("192.0.2.7:5037", False),  # a lab's server elsewhere: the address is as it sees it
])
def test_a_boards_adbd_is_asked_only_where_its_adb_server_runs_on_this_host(
    server: str, asked: bool, adb_server: AdbServer
) -> None:
    assert _recovery(LabAdbServer(server))._asks_adbd() is asked
    assert _recovery(adb_server)._asks_adbd()  # hil's private server
