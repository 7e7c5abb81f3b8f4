"""Ask a network board's adbd itself whether it answers: one TCP connection, one CNXN.

The recovery ladder asks this before every `adb connect` of a network board, and bring-up
before its first (`hil/board/preflight.py`): the adb server's `adb connect` would wait out
adb's own 10 s handshake on a frozen board (one the server lost when it was restarted, or one
that froze while a reboot's wait reconnected it), and `adb reboot` cannot reach it. Asked only
where the board's adb server runs on this host. A board whose adbd
accepts the connection but stays silent is frozen; one that answers anything (CNXN, AUTH,
STLS), refuses, closes or cannot be reached is left to the reconnect, as before. A board that
is rebooting has no adbd listening (refused) or no network (unreachable), so it is never
judged frozen by this. Nor is a board whose kernel hangs: its TCP stack no longer completes the
handshake (the kernel, not adbd, answers a SYN), so the connect times out, the board counts as
unreachable, and the reconnect waits for it as it waits for any unreachable board. Only a
user-space hang (adbd stuck, the kernel still running) is seen here.

A real adbd serves every TCP connection as a transport of its own, so this second one does
not disturb the adb server's; it is closed as soon as the question is answered.
"""

from __future__ import annotations

import select
import socket
import time

from hil.adbwire import A_CNXN, VERSION_CHECKSUMMED, VERSION_SKIP_CHECKSUM, Message, encode

HOST_MAXDATA = 1024 * 1024
"""The payload size offered, as adb's host offers (MAX_PAYLOAD)."""
HOST_FEATURES = (
    "shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir", "apex", "abb",
    "fixed_push_symlink_timestamp", "abb_exec", "remount_shell", "track_app", "sendrecv_v2",
    "sendrecv_v2_brotli", "sendrecv_v2_lz4", "sendrecv_v2_zstd", "sendrecv_v2_dry_run_send",
    "openscreen_mdns", "devicetracker_proto_format", "devraw", "app_info", "server_status",
)
"""The features an adb host of Android 15's platform-tools announces (`supported_features()` in
`packages/modules/adb/transport.cpp`; `delayed_ack` only in its burst mode, left out)."""
HOST_BANNER = ("host::features=" + ",".join(HOST_FEATURES)).encode()
"""What a real host's CNXN carries: `get_connection_string()` in `packages/modules/adb/adb.cpp`
(`<banner>::<properties>`, a host's only property its features; no trailing NUL: `send_connect`
sends the string's bytes as they are)."""


def _hello() -> bytes:
    """The CNXN an adb host opens a transport with: it offers VERSION_SKIP_CHECKSUM but, as no
    version is agreed yet, still checksums this first message (an adbd before Android 9
    checks it). As AOSP's adb does: `send_connect` in `packages/modules/adb/adb.cpp` sends
    A_VERSION and "host::..." on a transport initialised to A_VERSION_MIN, and `send_packet`
    in `transport.cpp` checksums while the version is below A_VERSION_SKIP_CHECKSUM."""
    return encode(Message(A_CNXN, VERSION_SKIP_CHECKSUM, HOST_MAXDATA, HOST_BANNER),
                  VERSION_CHECKSUMMED)


def split_address(address: str) -> tuple[str, int]:
    """(host, port) of a network board's `host:port` (`[v6]:port` too); ValueError when
    `address` is not one (a USB serial)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{address!r} is not host:port")
    return host.strip("[]"), int(port)


def adbd_silent(address: str, limit_s: float) -> bool:
    """True when the adbd at `address` accepts a TCP connection but sends nothing back to a
    CNXN within `limit_s` (frozen); False when it answers, refuses, closes the connection or
    cannot be reached within `limit_s`."""
    deadline = time.monotonic() + limit_s
    try:
        sock = socket.create_connection(split_address(address), timeout=limit_s)
    except (OSError, ValueError):
        return False
    with sock:
        try:
            sock.sendall(_hello())
            left = deadline - time.monotonic()
            readable, _, _ = select.select([sock], [], [], max(0.0, left))
        except OSError:
            return False
        return not readable  # readable: an answer, or the connection's end (EOF, reset)
