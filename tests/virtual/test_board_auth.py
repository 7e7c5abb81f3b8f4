"""A virtual board only hil (and the keys it is told to trust) can use: it asks every host for
adb authentication as a secure board (`ro.adb.secure=1`) does. Another local user (uid 4321,
tests/second_user.py) with its own adb server and its own raw client gets AUTH, never CNXN,
and never a shell, from a board root runs; an untrusted key leaves the board `unauthorized`,
which hil reports as a board a person must see to; hil's own server is let in."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from adbutils._utils import adb_path

from hil import adbwire
from hil.adbkey import parse_public_key, public_key_path, read_keys, verify
from hil.adbserver import AdbServer, _free_port
from hil.adbwire import A_AUTH, A_CNXN, A_OPEN, Message
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.adb_auth import hil_key, new_key, sign
from tests.adb_lab import LabServer, wait_for
from tests.second_user import SECOND_UID, as_second_user, needs_root, second_user_argv, shared_tmp

__all__ = ["shared_tmp"]  # the fixture
REPO = Path(__file__).resolve().parents[2]


class _Raw:
    """One raw adb transport from this process (any uid): messages in and out."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)

    def send(self, message: Message) -> None:
        self.sock.sendall(adbwire.encode(message, adbwire.VERSION_CHECKSUMMED))

    def receive(self) -> Message:
        header = self._read(adbwire.HEADER_SIZE)
        command, arg0, arg1, length = adbwire.decode_header(header, 1 << 20)
        return Message(command, arg0, arg1, self._read(length))

    def silent_for(self, seconds: float) -> bool:
        self.sock.settimeout(seconds)
        try:
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except TimeoutError:
            return True

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, "the board closed the transport"
            data += chunk
        return data


def _hello(raw: _Raw) -> Message:
    raw.send(Message(A_CNXN, adbwire.VERSION_SKIP_CHECKSUM, 1 << 20, b"host::\0"))
    return raw.receive()


def test_the_check_is_adbds_rsa_sha1_pkcs1_over_the_token(tmp_path: Path) -> None:
    key = new_key(tmp_path / "adbkey")
    (public,) = read_keys(public_key_path(key))
    token = os.urandom(20)
    signature = sign(token, key)
    assert verify(token, signature, public)
    assert not verify(os.urandom(20), signature, public)
    assert not verify(token, signature[:-1] + bytes([signature[-1] ^ 1]), public)
    (other,) = read_keys(public_key_path(new_key(tmp_path / "other")))
    assert not verify(token, signature, other)
    line = public_key_path(key).read_text()
    assert parse_public_key(line).modulus == public.modulus and public.exponent == 65537
    with pytest.raises(ValueError, match="not an adb key"):
        parse_public_key("QUFBQQ== user@host")


def test_a_host_is_served_only_after_its_signature(virtual_board: VirtualBoardProcess, tmp_path: Path) -> None:
    raw = _Raw(virtual_board.address)
    token = _hello(raw)
    assert (token.command, token.arg0, len(token.data)) == (A_AUTH, 1, 20)
    raw.send(Message(A_OPEN, 1, 0, b"shell:id\0"))  # before authentication: ignored
    assert raw.silent_for(0.5)
    raw.send(Message(A_AUTH, 2, 0, sign(token.data, new_key(tmp_path / "stranger"))))
    again = raw.receive()
    assert (again.command, again.arg0) == (A_AUTH, 1) and again.data != token.data  # a new token
    raw.send(Message(A_AUTH, 2, 0, sign(again.data, hil_key())))
    connected = raw.receive()
    assert connected.command == A_CNXN and connected.data.startswith(b"device::")
    raw.sock.close()


@needs_root
def test_another_users_client_gets_auth_not_cnxn_and_no_shell(shared_tmp: Path, adb_server: AdbServer) -> None:
    home = shared_tmp / "home"
    home.mkdir(mode=0o700)
    os.chown(home, SECOND_UID, SECOND_UID)
    with start_virtual_board(shared_tmp / "board", "E9955", "roots") as board:
        def raw_client() -> None:  # uid 4321, a key of its own
            raw = _Raw(board.address)
            token = _hello(raw)
            assert (token.command, token.arg0) == (A_AUTH, 1), f"{token.name} instead of AUTH"
            raw.send(Message(A_OPEN, 1, 0, b"shell:cat /etc/shadow\0"))
            assert raw.silent_for(0.5), "the board answered an OPEN before authentication"
            key = home / "adbkey"
            subprocess.run([adb_path(), "keygen", str(key)], capture_output=True, check=True, timeout=60)
            raw.send(Message(A_AUTH, 2, 0, sign(token.data, key)))
            reply = raw.receive()
            assert (reply.command, reply.arg0) == (A_AUTH, 1), f"{reply.name} after a stranger's signature"

        as_second_user(raw_client)

        port = _free_port()
        env = {"HOME": str(home), "PATH": os.environ["PATH"], "ADB_MDNS": "0"}
        server = subprocess.Popen(second_user_argv([adb_path(), "-P", str(port), "nodaemon", "server"]),
                                  env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            def adb(*args: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(second_user_argv([adb_path(), "-P", str(port), *args]), env=env,
                                      capture_output=True, text=True, timeout=60)

            wait_for(lambda: adb("devices").returncode == 0, 15, "uid 4321's adb server")
            assert "failed to authenticate" in adb("connect", board.address).stdout
            assert f"{board.address}\tunauthorized" in adb("devices").stdout
            shell = adb("-s", board.address, "shell", "id")
            assert shell.returncode != 0 and "unauthorized" in shell.stderr
            assert "uid=" not in shell.stdout
        finally:
            server.kill()
            server.wait()
        device = adb_server.connect(board.address, timeout=30)  # hil's own server: let in
        assert device.shell2("id -u", v2=True).stdout.strip() == "0"
        adb_server.disconnect(board.address)
        log = board.log_path.read_text()
        assert "is unauthorized: its key" in log and "authorized by key" in log


def test_an_untrusted_server_leaves_the_board_unauthorized_and_hil_says_so(tmp_path: Path) -> None:
    with LabServer() as lab, start_virtual_board(tmp_path / "board", "E9955", "stranger") as board:
        assert "failed to authenticate" in lab.adb("connect", board.address)
        assert lab.devices() == {board.address: "unauthorized"}
        run = subprocess.run(
            [sys.executable, "-m", "hil", "boards", "--adb-server", lab.address, "--board", board.address,
             "--check"], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert run.returncode == 2, run.stdout + run.stderr
        (problem,) = [line for line in run.stdout.splitlines() if line.startswith(f"{board.address}: ")]
        assert "device unauthorized" in problem and "the board has not accepted this host's adb key" in problem
        assert "hil virtual-board --trusted-key FILE" in problem
        assert f"sees 1: {board.address} unauthorized" in run.stdout

    trusted = tmp_path / "trusted"
    with LabServer() as lab, start_virtual_board(trusted, "E9955", "accepted",
                                                 trusted_keys=[lab.public_key]) as board:
        lab.connect(board.address)
        wait_for(lambda: lab.devices() == {board.address: "device"}, 10, "the board to be a device")
