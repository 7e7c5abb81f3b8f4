"""Which adb server the environment names, read as adb reads it, and what hil's private
server takes from that environment (nothing)."""

from __future__ import annotations

import os
import pwd
import socket
from pathlib import Path

import pytest

from hil import container
from hil.adbaddress import SERVER_ENV, lab_server_from_env, server_choice
from hil.adbserver import AdbServer
from hil.errors import UsageError
from tests.second_user import as_second_user, needs_root


@pytest.mark.parametrize(("environ", "server"), [
    ({}, None),
    ({"ANDROID_ADB_SERVER_PORT": "5038"}, "127.0.0.1:5038"),
    ({"ANDROID_ADB_SERVER_ADDRESS": "lab-host"}, "lab-host:5037"),
    ({"ANDROID_ADB_SERVER_ADDRESS": "localhost", "ANDROID_ADB_SERVER_PORT": "5038"}, "localhost:5038"),
    ({"ANDROID_ADB_SERVER_HOST": "lab-host"}, "lab-host:5037"),  # adbutils' alias
    ({"ANDROID_ADB_SERVER_HOST": "alias", "ANDROID_ADB_SERVER_ADDRESS": "adbs"}, "adbs:5037"),
    ({"ADB_SERVER_SOCKET": "tcp:5039"}, "127.0.0.1:5039"),
    ({"ADB_SERVER_SOCKET": "tcp:localhost:5039"}, "localhost:5039"),
    # adb prefers ADB_SERVER_SOCKET over ANDROID_ADB_SERVER_ADDRESS/PORT (client/main.cpp)
    ({"ADB_SERVER_SOCKET": "tcp:lab:5039", "ANDROID_ADB_SERVER_ADDRESS": "other",
      "ANDROID_ADB_SERVER_PORT": "1"}, "lab:5039"),
])
def test_adbs_own_variables_name_the_lab_server_as_configured(environ, server) -> None:
    assert lab_server_from_env(environ) == server
    assert server_choice(None, environ) == server
    assert server_choice("flag:1", environ) == "flag:1"  # the flag wins


def test_a_server_socket_hil_cannot_reach_is_one_line_naming_the_variable() -> None:
    with pytest.raises(UsageError, match="ADB_SERVER_SOCKET: 'localabstract:adb' is not tcp:PORT"):
        lab_server_from_env({"ADB_SERVER_SOCKET": "localabstract:adb"})
    with pytest.raises(UsageError, match="ANDROID_ADB_SERVER_ADDRESS/ANDROID_ADB_SERVER_PORT"):
        lab_server_from_env({"ANDROID_ADB_SERVER_ADDRESS": "lab", "ANDROID_ADB_SERVER_PORT": "x"})


def test_the_private_server_takes_none_of_the_labs_variables(monkeypatch) -> None:
    # adb reads ANDROID_ADB_SERVER_ADDRESS even with -P: a lab's address (here one no
    # machine has) leaking into `adb -P PORT nodaemon server` makes it listen there and fail
    monkeypatch.setenv("ANDROID_ADB_SERVER_ADDRESS", "192.0.2.1")
    monkeypatch.setenv("ANDROID_ADB_SERVER_HOST", "192.0.2.1")
    monkeypatch.setenv("ADB_SERVER_SOCKET", "tcp:192.0.2.1:5037")
    with AdbServer(socket_timeout=10.0, start_timeout=10.0) as server:
        assert server.client.server_version() > 0


def test_replicate_passes_adbs_variables_into_the_container_by_name(monkeypatch) -> None:
    for name in SERVER_ENV:
        monkeypatch.delenv(name, raising=False)

    def argv() -> list[str]:
        return container.run_argv(container.RunSpec(
            image="img:1", args=("run", "--board", "R3CX1"), workspace=Path("/ws"),
            user=(1001, 1001), apparmor=False))

    assert "ANDROID_ADB_SERVER_PORT=5037" in argv()  # none named: the host's own server
    for name, value in (("ADB_SERVER_SOCKET", "tcp:lab:5039"), ("ANDROID_ADB_SERVER_ADDRESS", "lab")):
        monkeypatch.setenv(name, value)
        passed = argv()
        assert name in passed and "ANDROID_ADB_SERVER_PORT=5037" not in passed
        assert value not in " ".join(passed)  # by name: the value stays out of the command line
        monkeypatch.delenv(name)


def test_adb_servers_the_tests_start_leave_nothing_in_the_users_home() -> None:
    # adb 29 writes ~/.android/adb.<port> (the server's path) per TCP server: 89 such files
    # after one test run, before the session's HOME was its own and the private server's socket
    user_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    user_files = set((user_home / ".android").glob("adb.*"))  # other processes' may be there
    with AdbServer(socket_timeout=10.0) as server:
        assert server.client.server_version() > 0
    assert set((user_home / ".android").glob("adb.*")) <= user_files
    assert Path(os.environ["HOME"]) != user_home


@needs_root
def test_no_other_user_reaches_hils_private_adb_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """adb's server protocol has no authentication: on a TCP port of 127.0.0.1 any local user
    could drive the boards it holds. The private server listens on a unix socket in a folder
    only its user may enter, writes no adb.<port> file, and leaves nothing behind."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ANDROID_USER_HOME", raising=False)
    (tmp_path / ".android").mkdir()
    with AdbServer(socket_timeout=10.0) as server:
        folder = server.socket_path.parent
        assert server.address == f"localfilesystem:{server.socket_path}"
        assert folder.stat().st_mode & 0o777 == 0o700 and folder.stat().st_uid == os.geteuid()

        def ask_version() -> None:  # uid 4321: adb's `host:version` request, by hand
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                try:
                    conn.connect(str(server.socket_path))
                except PermissionError:
                    return
                conn.sendall(b"000chost:version")
                raise AssertionError(f"uid 4321 reached the server: {conn.recv(64)!r}")

        as_second_user(ask_version)
        assert list((tmp_path / ".android").glob("adb.*")) == []
    assert not folder.exists()
