"""Which adb server a board belongs to, as the user names it: `--adb-server`, HIL_ADB_SERVER,
or adb's own variables (ADB_SERVER_SOCKET, ANDROID_ADB_SERVER_ADDRESS/PORT), each validated
with a one-line UsageError naming where the value came from. The servers themselves:
`hil/adbserver.py`."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from hil.errors import UsageError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 5037
DEFAULT_SERVER = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
"""Where a host's own adb server listens unless told otherwise (adb's default)."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Server hosts that are this host."""
OWN_SERVER = "own"
"""`--adb-server own`: hil's private server for every board, USB boards included; only right
where no other server runs (a container with the USB bus, `hil replicate --access usb`)."""
CHOICE_ENV = "HIL_ADB_SERVER"
"""The environment's `--adb-server` (set by `hil replicate --access usb` to `own`)."""
_SERVER = re.compile(r"^([A-Za-z0-9.-]{1,253}):(\d{1,5})$")
UNIX_SOCKET = "localfilesystem:"
"""adb's socket spec of a unix socket: `localfilesystem:PATH` (a server no other user reaches)."""


def parse_server(text: str, flag: str) -> str:
    """`HOST:PORT` (or `localfilesystem:/PATH`) of an adb server, validated (UsageError naming
    `flag` otherwise)."""
    if text.startswith(UNIX_SOCKET + "/"):
        return text
    match = _SERVER.match(text)
    if match is None or not 1 <= int(match.group(2)) <= 65535:
        raise UsageError(f"{flag}: {text!r} is not an adb server HOST:PORT")
    return text


SERVER_ENV = (
    "ADB_SERVER_SOCKET", "ANDROID_ADB_SERVER_ADDRESS", "ANDROID_ADB_SERVER_PORT",
    "ANDROID_ADB_SERVER_HOST",
)
"""Every variable that points an adb client at a server: adb's own three (AOSP
`client/main.cpp`: `ADB_SERVER_SOCKET=tcp:[HOST:]PORT` wins over
`ANDROID_ADB_SERVER_ADDRESS` + `ANDROID_ADB_SERVER_PORT`) and adbutils' name for the host,
`ANDROID_ADB_SERVER_HOST`, kept as an alias of `_ADDRESS`."""


def server_choice(flag: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """Which adb server the boards hil does not start belong to: `--adb-server`, else
    HIL_ADB_SERVER, else adb's own variables (`lab_server_from_env`); `HOST:PORT`,
    OWN_SERVER, or None (decided per board). UsageError naming the source when malformed."""
    environ = os.environ if environ is None else environ
    for value, source in ((flag, "--adb-server"), (environ.get(CHOICE_ENV), CHOICE_ENV)):
        if value:
            return OWN_SERVER if value == OWN_SERVER else parse_server(value, source)
    return lab_server_from_env(environ)


def lab_server_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """`HOST:PORT` of the server adb itself would use, as configured (`localhost:5038` stays
    `localhost:5038`), when the environment names one, else None. As adb reads them:
    `ADB_SERVER_SOCKET=tcp:PORT` or `tcp:HOST:PORT` first; else `ANDROID_ADB_SERVER_ADDRESS`
    (adbutils' `ANDROID_ADB_SERVER_HOST` when it is unset) and `ANDROID_ADB_SERVER_PORT`,
    each defaulting to 127.0.0.1 and 5037. A socket spec hil cannot reach (not TCP) is a
    UsageError naming the variable."""
    environ = os.environ if environ is None else environ
    socket_spec = environ.get("ADB_SERVER_SOCKET", "").strip()
    if socket_spec:
        kind, _, rest = socket_spec.partition(":")
        if kind == UNIX_SOCKET.rstrip(":") and rest.startswith("/"):
            return socket_spec
        if kind != "tcp" or not rest:
            raise UsageError(
                f"ADB_SERVER_SOCKET: {socket_spec!r} is not tcp:PORT, tcp:HOST:PORT or "
                "localfilesystem:/PATH"
            )
        host, _, port = rest.rpartition(":")
        return parse_server(f"{host or DEFAULT_HOST}:{port}", "ADB_SERVER_SOCKET")
    address = environ.get("ANDROID_ADB_SERVER_ADDRESS", "").strip()
    alias = environ.get("ANDROID_ADB_SERVER_HOST", "").strip()
    host_name = "ANDROID_ADB_SERVER_ADDRESS" if address else "ANDROID_ADB_SERVER_HOST"
    host = address or alias
    port = environ.get("ANDROID_ADB_SERVER_PORT", "").strip()
    if not host and not port:
        return None
    return parse_server(f"{host or DEFAULT_HOST}:{port or DEFAULT_PORT}",
                        f"{host_name}/ANDROID_ADB_SERVER_PORT")
