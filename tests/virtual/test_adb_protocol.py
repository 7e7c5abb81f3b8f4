"""The virtual board speaks adb well enough for the real adb server and adbutils: pushes,
pulls, shell v1/v2 with exit codes, sync stat/list, refusals, reboots, its stubs and its
sandbox. Everything runs against real processes: Debian's adb server, the board process."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import stat
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import adbutils
import pytest

from hil import adbwire
from hil.adbserver import AdbServer
from hil.adbwire import A_AUTH, A_CNXN, A_OKAY, A_OPEN, A_WRTE, Message
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.adb_auth import hil_key, sign
from tests.adb_lab import device_state, wait_for

TMP = "/data/local/tmp"


@pytest.fixture(scope="module")
def e9965_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualBoardProcess]:
    """A second board, E9965, with short reboots."""
    root = tmp_path_factory.mktemp("board-e9965")
    with start_virtual_board(root, "E9965", "hil-test-e9965", ["--reboot-seconds", "0.5"]) as board:
        yield board


@pytest.fixture(scope="module")
def e9965_device(adb_server: AdbServer, e9965_board: VirtualBoardProcess) -> adbutils.AdbDevice:
    return adb_server.connect(e9965_board.address, timeout=30.0)


def _sleep_argument() -> str:
    """A `sleep` duration no other process has: the board's PIDs are its own namespace's, so
    the host finds the process by its command line."""
    return f"100.{secrets.randbelow(10**9):09d}"


def _sleep_gone(argument: str) -> bool:
    """No live process on the host runs `sleep ARGUMENT`."""
    for folder in Path("/proc").iterdir():
        try:
            if (folder / "cmdline").read_bytes() != f"sleep\0{argument}\0".encode():
                continue
            state = (folder / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, NotADirectoryError, ProcessLookupError):
            continue
        if state not in ("Z", "X"):
            return False
    return True


def test_push_then_pull_20mb_random_is_identical(
    board_device: adbutils.AdbDevice, tmp_path: Path
) -> None:
    source = tmp_path / "random.bin"
    source.write_bytes(os.urandom(20 * 1024 * 1024))
    pushed = board_device.sync.push(source, f"{TMP}/big/random.bin")
    pulled = tmp_path / "pulled.bin"
    size = board_device.sync.pull(f"{TMP}/big/random.bin", pulled)
    assert pushed == size == 20 * 1024 * 1024
    assert hashlib.sha256(pulled.read_bytes()).digest() == hashlib.sha256(
        source.read_bytes()
    ).digest()


def test_shell_v2_reports_the_exit_code(board_device: adbutils.AdbDevice) -> None:
    assert board_device.shell2("exit 7", v2=True).returncode == 7
    assert board_device.shell2("true", v2=True).returncode == 0


def test_shell_v2_separates_stdout_and_stderr(board_device: adbutils.AdbDevice) -> None:
    result = board_device.shell2("echo to-out; echo to-err >&2", v2=True)
    assert result.stdout == "to-out\n"
    assert result.stderr == "to-err\n"


def test_shell_v1_merges_stderr_into_its_output(board_device: adbutils.AdbDevice) -> None:
    assert board_device.shell("echo a; echo b >&2").split() == ["a", "b"]


def test_process_killed_by_signal_reports_128_plus_n(board_device: adbutils.AdbDevice) -> None:
    assert board_device.shell2("sh -c 'kill -SEGV $$'", v2=True).returncode == 139


def test_getprop_reports_the_chipset(
    board_device: adbutils.AdbDevice, e9965_device: adbutils.AdbDevice
) -> None:
    assert board_device.shell("getprop ro.soc.model") == "S5E9955"
    assert e9965_device.shell("getprop ro.soc.model") == "S5E9965"
    assert board_device.shell("getprop ro.hil.virtual") == "1"
    assert board_device.shell("getprop no.such.property fallback") == "fallback"
    listing = board_device.shell("getprop")
    assert "[ro.hardware.chipname]: [s5e9955]" in listing.splitlines()
    assert "[ro.build.version.sdk]: [35]" in listing.splitlines()


def test_adb_server_sees_the_banner(adb_server: AdbServer, virtual_board: VirtualBoardProcess,
                                    board_device: adbutils.AdbDevice) -> None:
    features = set(board_device.get_features().split(","))
    assert features == {"shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir"}
    infos = {info.serial: info for info in adb_server.client.list(extended=True)}
    assert infos[virtual_board.address].state == "device"
    assert infos[virtual_board.address].tags["product"] == "hil_virtual"


def test_uname_reports_aarch64(board_device: adbutils.AdbDevice) -> None:
    assert board_device.shell("uname -m") == "aarch64"
    assert board_device.shell("uname -a").split()[-2:] == ["aarch64", "Toybox"]


def test_shell_runs_in_the_sandbox_like_adb(board_device: adbutils.AdbDevice) -> None:
    result = board_device.shell2("pwd; echo $PATH; touch /system/x", v2=True)
    cwd, path = result.stdout.splitlines()
    assert cwd == "/"
    assert path == "/system/bin:/vendor/bin:/usr/bin:/bin"
    assert result.returncode != 0
    assert "Read-only file system" in result.stderr


def test_stat_and_list_of_a_pushed_file(board_device: adbutils.AdbDevice) -> None:
    board_device.sync.push(b"12345", f"{TMP}/listed/five.bin", mode=0o640)
    info = board_device.sync.stat(f"{TMP}/listed/five.bin")
    assert info.size == 5
    assert info.mode == stat.S_IFREG | 0o640
    entries = {entry.path: entry for entry in board_device.sync.list(f"{TMP}/listed")}
    assert set(entries) == {".", "..", "five.bin"}
    assert entries["five.bin"].size == 5
    assert stat.S_ISDIR(entries["."].mode)


def test_sync_v2_stat_and_list_formats(board_device: adbutils.AdbDevice) -> None:
    board_device.sync.push(b"abc", f"{TMP}/v2/three.bin", mode=0o600)
    with board_device.open_transport() as connection:
        connection.send_command("sync:")
        connection.check_okay()

        def request(kind: bytes, path: str) -> None:
            connection.conn.sendall(kind + struct.pack("<I", len(path)) + path.encode())

        request(b"LST2", f"{TMP}/v2/three.bin")
        reply = connection.read(72)
        fields = struct.unpack("<4sIQQIIIIQqqq", reply)
        assert (fields[0], fields[1], fields[4], fields[8]) == (
            b"LST2", 0, stat.S_IFREG | 0o600, 3
        )
        request(b"STA2", f"{TMP}/v2/missing")
        assert struct.unpack("<4sI", connection.read(72)[:8]) == (b"STA2", 2)  # ENOENT
        request(b"LIS2", f"{TMP}/v2")
        names = []
        while (entry := connection.read(76))[:4] == b"DNT2":
            names.append(connection.read(struct.unpack("<I", entry[72:])[0]).decode())
        assert entry == b"DONE" + bytes(72)
        assert sorted(names) == [".", "..", "three.bin"]
        connection.conn.sendall(b"QUIT" + bytes(4))


def test_push_outside_data_fails(board_device: adbutils.AdbDevice,
                                 virtual_board: VirtualBoardProcess) -> None:
    with pytest.raises(adbutils.AdbError):
        board_device.sync.push(b"nope", "/system/x")
    assert not (virtual_board.root / "fs/system/x").exists()
    assert board_device.shell("ls /system/bin/getprop") == "/system/bin/getprop"


def test_push_escaping_the_root_fails_and_creates_nothing(
    board_device: adbutils.AdbDevice, virtual_board: VirtualBoardProcess
) -> None:
    name = f"escape-{os.getpid()}.txt"
    with pytest.raises(adbutils.AdbError):
        board_device.sync.push(b"evil", f"{TMP}/../../../../{name}")
    board_device.shell(f"ln -sfn ../../../../.. {TMP}/up")
    with pytest.raises(adbutils.AdbError):
        board_device.sync.push(b"evil", f"{TMP}/up/{name}")
    with pytest.raises(adbutils.AdbError, match="escapes the device root"):
        board_device.sync.read_bytes(f"{TMP}/up/run/logcat.txt")
    leaked = [p for p in virtual_board.root.parent.rglob(name) if "fs" not in p.parts]
    assert leaked == []


def test_pulling_a_missing_file_behaves_like_a_real_board(
    board_device: adbutils.AdbDevice, tmp_path: Path
) -> None:
    missing = f"{TMP}/no-such-file"
    assert board_device.sync.stat(missing).mode == 0
    with pytest.raises(adbutils.AdbError, match="No such file or directory"):
        board_device.sync.read_bytes(missing)
    assert board_device.sync.pull(missing, tmp_path / "out") == 0
    assert (tmp_path / "out").is_dir()


def test_unknown_service_is_refused(board_device: adbutils.AdbDevice) -> None:
    with board_device.open_transport() as connection:
        connection.send_command("no-such-service:x")
        with pytest.raises(adbutils.AdbError):
            connection.check_okay()
    assert board_device.shell("echo still-fine") == "still-fine"


def test_5mb_of_stdout_arrives_intact(board_device: adbutils.AdbDevice) -> None:
    result = board_device.shell2(
        "head -c 5000000 /dev/zero | tr '\\0' x", v2=True, encoding=None
    )
    assert result.returncode == 0
    assert result.stdout == b"x" * 5_000_000


class _RawHost:
    """The host side of one adb transport, by hand, to watch the board's flow control; it
    answers the board's AUTH with hil's own key, as hil's adb server does."""

    def __init__(self, address: str, version: int, maxdata: int) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.version = version
        self.send(Message(A_CNXN, version, maxdata, b"host::features=shell_v2\0"))
        token, _ = self.receive()
        assert (token.command, token.arg0, len(token.data)) == (A_AUTH, 1, 20)
        self.send(Message(A_AUTH, 2, 0, sign(token.data, hil_key())))

    def send(self, message: Message) -> None:
        self.sock.sendall(adbwire.encode(message, self.version))

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, "board closed the transport"
            data += chunk
        return data

    def receive(self) -> tuple[Message, int]:
        header = self._read(adbwire.HEADER_SIZE)
        command, arg0, arg1, length = adbwire.decode_header(header, 1 << 20)
        message = Message(command, arg0, arg1, self._read(length))
        return message, adbwire.HEADER.unpack(header)[4]

    def nothing_within(self, seconds: float) -> bool:
        self.sock.settimeout(seconds)
        try:
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(5)


def test_board_waits_for_okay_and_honours_maxdata_and_checksums(
    virtual_board: VirtualBoardProcess,
) -> None:
    host = _RawHost(virtual_board.address, adbwire.VERSION_CHECKSUMMED, 4096)
    try:
        cnxn, _ = host.receive()
        assert (cnxn.command, cnxn.arg0) == (A_CNXN, adbwire.VERSION_CHECKSUMMED)
        assert cnxn.data.startswith(b"device::")
        host.send(Message(A_OPEN, 7, 0, b"exec:head -c 10000 /dev/zero\0"))
        okay, _ = host.receive()
        assert (okay.command, okay.arg1) == (A_OKAY, 7)
        received = b""
        while len(received) < 10000:
            write, check = host.receive()
            assert (write.command, write.arg0, write.arg1) == (A_WRTE, okay.arg0, 7)
            assert len(write.data) <= 4096
            assert check == sum(write.data)
            received += write.data
            if len(received) < 10000:
                assert host.nothing_within(0.3), "a second WRTE came before our OKAY"
            host.send(Message(A_OKAY, 7, okay.arg0))
        assert received == bytes(10000)
    finally:
        host.sock.close()


def test_replies_written_while_a_wrte_awaits_its_okay_go_out_together(
    virtual_board: VirtualBoardProcess,
) -> None:
    """Like adbd, the board sends what a service wrote while the host had not yet
    acknowledged the last WRTE together in the next one: a command's lines written while the
    host holds back its OKAY arrive in one WRTE after it; three pushed files in one host WRTE
    get their three OKAYs in fewer than three."""
    host = _RawHost(virtual_board.address, adbwire.VERSION_CHECKSUMMED, 4096)
    try:
        host.receive()  # CNXN
        host.send(Message(A_OPEN, 7, 0, b"exec:echo first; sleep 0.3; echo second; echo third\0"))
        okay, _ = host.receive()
        first, _ = host.receive()
        assert (first.command, first.data) == (A_WRTE, b"first\n")
        assert host.nothing_within(0.8), "a second WRTE came before our OKAY"  # both written meanwhile
        host.send(Message(A_OKAY, 7, okay.arg0))
        rest, _ = host.receive()
        assert (rest.command, rest.data) == (A_WRTE, b"second\nthird\n")

        host.send(Message(A_OPEN, 9, 0, b"sync:\0"))
        okay, _ = host.receive()
        while okay.arg1 == 7:  # the command's end: its exit's CLSE
            okay, _ = host.receive()
        assert (okay.command, okay.arg1) == (A_OKAY, 9)
        requests = b""
        for name in ("a", "b", "c"):
            path = f"{TMP}/together/{name}.txt".encode()
            requests += b"SEND" + struct.pack("<I", len(path) + 6) + path + b",33188"
            requests += b"DATA" + struct.pack("<I", 1) + name.encode() + b"DONE" + bytes(4)
        host.send(Message(A_WRTE, 9, okay.arg0, requests))
        replies: list[bytes] = []
        while len(b"".join(replies)) < 24:
            message, _ = host.receive()
            if message.command == A_WRTE and message.arg1 == 9:
                replies.append(message.data)
                host.send(Message(A_OKAY, 9, okay.arg0))
        assert b"".join(replies) == (b"OKAY" + bytes(4)) * 3 and len(replies) < 3
    finally:
        host.sock.close()


def test_stdin_reaches_the_command(board_device: adbutils.AdbDevice) -> None:
    connection = board_device.open_shell(f"head -n 1 > {TMP}/stdin.txt; echo done")
    try:
        connection.conn.sendall(b"from stdin\n")
        assert connection.read_until_close().strip() == "done"
    finally:
        connection.close()
    assert board_device.sync.read_text(f"{TMP}/stdin.txt") == "from stdin\n"


def test_host_closing_the_stream_kills_the_command(board_device: adbutils.AdbDevice) -> None:
    argument = _sleep_argument()
    connection = board_device.open_shell(f"sleep {argument} & echo $!; wait")
    pid = int(connection.conn.recv(64).decode())
    wait_for(lambda: not _sleep_gone(argument), 5.0, f"sleep (pid {pid} on the board) to run")
    connection.close()
    wait_for(lambda: _sleep_gone(argument), 5.0, f"sleep (pid {pid} on the board) to be killed")


def test_pids_are_shared_across_shells(board_device: adbutils.AdbDevice) -> None:
    argument = _sleep_argument()
    connection = board_device.open_shell(f"sleep {argument} & echo $!; wait")
    try:
        pid = int(connection.conn.recv(64).decode())
        wait_for(lambda: not _sleep_gone(argument), 5.0, f"sleep (pid {pid} on the board) to run")
        assert board_device.shell2(f"kill {pid}", v2=True).returncode == 0
        wait_for(lambda: _sleep_gone(argument), 5.0, f"sleep (pid {pid} on the board) to die")
    finally:
        connection.close()


def test_shells_see_only_the_boards_own_processes(board_device: adbutils.AdbDevice) -> None:
    """A pid namespace of the board's own (the host's processes, the board's included, out of
    sight: no /proc/PID/root leads out), and IPC and network namespaces of each shell's own
    (no shell reaches a service on the host's loopback, such as an adb server)."""
    result = board_device.shell2(
        "echo $$; cat /proc/1/comm; ls /proc | grep -c '^[0-9]'; "
        "readlink /proc/self/ns/pid /proc/self/ns/ipc /proc/self/ns/net; cat /proc/net/tcp", v2=True)
    own, init, count, pid_ns, ipc_ns, net_ns, *tcp = result.stdout.splitlines()
    assert init == "bwrap" and int(count) < 50 and int(own) > 1  # the namespace's pid 1, a few shells
    assert pid_ns != os.readlink("/proc/self/ns/pid")
    assert ipc_ns != os.readlink("/proc/self/ns/ipc")
    assert net_ns != os.readlink("/proc/self/ns/net")
    assert len(tcp) == 1  # the header: no socket of the host's listening (the adb server's)


def test_hil_python_runs_a_pushed_script(board_device: adbutils.AdbDevice) -> None:
    script = (
        b"#!/system/bin/hil-python\n"
        b"import os, sys\n"
        b"print(os.getcwd(), sys.flags.isolated, sys.argv[1:])\n"
        b"sys.exit(3)\n"
    )
    board_device.sync.push(script, f"{TMP}/py/front.py", mode=0o755)
    result = board_device.shell2(f"cd {TMP}/py && ./front.py a 'b c'", v2=True)
    assert result.returncode == 3, result.stderr
    assert result.stdout == f"{TMP}/py 1 ['a', 'b c']\n"


def test_logcat_dumps_and_clears_the_board_log(board_device: adbutils.AdbDevice) -> None:
    assert "boot completed" in board_device.shell("logcat -d")
    board_device.shell("logcat -c")
    assert board_device.shell("logcat -d") == ""


def test_board_listens_on_loopback_only(virtual_board: VirtualBoardProcess) -> None:
    port = int(virtual_board.address.rsplit(":", 1)[1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                listening.append(local.rsplit(":", 1)[0])
    assert listening == ["0100007F"]
    assert virtual_board.address.startswith("127.0.0.1:")


def test_adb_cli_shell_push_and_pull(
    adb_server: AdbServer, board_device: adbutils.AdbDevice, tmp_path: Path
) -> None:
    def adb(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [adb_server.adb, "-s", board_device.serial, *args],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
            env={**os.environ, "ADB_SERVER_SOCKET": adb_server.address},  # its unix socket
        )

    result = adb("shell", "echo cli; exit 5")
    assert (result.returncode, result.stdout) == (5, "cli\n")
    (tmp_path / "cli.txt").write_text("via the adb CLI\n")
    assert adb("push", str(tmp_path / "cli.txt"), f"{TMP}/cli/cli.txt").returncode == 0
    assert adb("pull", f"{TMP}/cli/cli.txt", str(tmp_path / "back.txt")).returncode == 0
    assert (tmp_path / "back.txt").read_text() == "via the adb CLI\n"
    missing = adb("pull", f"{TMP}/cli/missing.txt", str(tmp_path))
    assert missing.returncode != 0
    assert "No such file or directory" in missing.stdout + missing.stderr


@pytest.mark.parametrize("via", ["reboot service", "reboot command"])
def test_reboot_drops_the_board_until_reconnected(
    adb_server: AdbServer, e9965_board: VirtualBoardProcess, e9965_device: adbutils.AdbDevice,
    via: str,
) -> None:
    address = e9965_board.address
    device = adb_server.connect(address, timeout=10.0)
    if via == "reboot service":
        connection = device.open_transport()
        connection.send_command("reboot:")
        connection.check_okay()
    else:
        device.shell("reboot", timeout=10)
    wait_for(lambda: device_state(device) != "device", 5.0, "the board to drop")
    adb_server.disconnect(address)
    device = adb_server.connect(address, timeout=10.0)
    wait_for(lambda: device.shell("getprop sys.boot_completed") == "1", 5.0, "boot completed")
    assert "reboot requested" in device.shell("logcat -d")


def test_sigterm_stops_the_board_and_its_commands(
    adb_server: AdbServer, tmp_path: Path
) -> None:
    board = start_virtual_board(tmp_path / "board", "E9955", "hil-test-sigterm")
    with board:
        device = adb_server.connect(board.address, timeout=30.0)
        argument = _sleep_argument()
        connection = device.open_shell(f"sleep {argument} & echo $!; wait")
        pid = int(connection.conn.recv(64).decode())
        wait_for(lambda: not _sleep_gone(argument), 5.0, f"sleep (pid {pid} on the board) to run")
    connection.close()
    assert board.process.returncode == 0
    wait_for(lambda: _sleep_gone(argument), 5.0, f"sleep (pid {pid} on the board) to be killed")
    adb_server.disconnect(board.address)


def _run_board_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hil.virtual.main", "--root", str(tmp_path / "b"), *args],
        capture_output=True, text=True, timeout=60,
    )


@pytest.mark.parametrize("args", [["--chipset", "E1234"], ["--port", "5555"]])
def test_cli_rejects_bad_usage_with_exit_3(tmp_path: Path, args: list[str]) -> None:
    result = _run_board_cli(tmp_path, *args)
    assert result.returncode == 3
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
