"""An exporter's host for the tests: a network namespace of its own, so that an address the
exporter publishes can be reachable there and nowhere else, as on a lab's private network.

The namespace is made by one relay process (`python -m tests.pool.exporter_host`, run as root:
unshare(CLONE_NEWNET) and setns, as `unshare --net` and `nsenter` do). It joins the namespace
to the test's host only where a lab's network would:

```
--into PORT            the test host's 127.0.0.1:PORT  ─► the namespace's 127.0.0.1:PORT
                       (the exporter host's sshd: how hil gets in)
--out NSPORT=PORT      the namespace's 127.0.0.1:NSPORT ─► the test host's 127.0.0.1:PORT
                       (the coordinator, and what only the exporter's host reaches: a board's
                       fastboot, adb, power; NSPORT is free on the test host, so nothing
                       answers there at that address)
```

Processes of the exporter's host (sshd, labgrid-exporter and the ser2net it starts) run in the
namespace through `nsenter --net=/proc/PID/ns/net` (util-linux). The relay is stopped by its
PID, and the connections through it end with it.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import selectors
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from tests.processes import stop_process

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, SIOCSIFADDR, IFF_UP = 0x8913, 0x8914, 0x8916, 0x1
READY = "exporter-host ready "
REPO = Path(__file__).resolve().parents[2]


class ExporterHost:
    """The relay process; `pid` names the namespace (`nsenter_argv`); `stop()` by PID."""

    def __init__(self, into: Sequence[int], out: dict[int, int]) -> None:
        argv = [sys.executable, "-m", "tests.pool.exporter_host"]
        argv += [f"--into={port}" for port in into]
        argv += [f"--out={ns_port}={port}" for ns_port, port in out.items()]
        self.process = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        start_new_session=True)
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout=30)
        line = self.process.stdout.readline().decode() if ready else ""
        if not line.startswith(READY):
            self.stop()
            raise RuntimeError(f"the exporter host's namespace did not start: {line!r}")
        self.pid = self.process.pid

    def nsenter_argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` run in the namespace."""
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net", "--", *argv]

    def stop(self) -> None:
        stop_process(self.process)
        if self.process.stdout is not None:
            self.process.stdout.close()


# -- the relay process ----------------------------------------------------------------------

_LIBC = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _listener(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


def _loopback_up() -> None:
    """lo up, with a second address (127.0.0.2 as `lo:1`): glibc's getaddrinfo(AI_ADDRCONFIG)
    resolves no IPv4 name on a host whose only address is 127.0.0.1 (check_pf.c), and
    ser2net resolves its accepter's 127.0.0.1 that way."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))
        address = struct.pack("=H2s4s8x", socket.AF_INET, b"\0\0", socket.inet_aton("127.0.0.2"))
        fcntl.ioctl(sock, SIOCSIFADDR, struct.pack("16s16s", b"lo:1", address))


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _serve(listener: socket.socket, namespace: int, port: int) -> None:
    """Accept on `listener`; connect each to 127.0.0.1:`port` in `namespace` (this thread joins
    it: a socket lives in the namespace of the thread that made it)."""
    _check(_LIBC.setns(namespace, CLONE_NEWNET), "setns")
    while True:
        conn, _ = listener.accept()
        try:
            peer = socket.create_connection(("127.0.0.1", port), timeout=10)
            peer.settimeout(None)
        except OSError:
            conn.close()
            continue
        for a, b in ((conn, peer), (peer, conn)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the exporter's host: a network namespace and its relays")
    parser.add_argument("--into", action="append", type=int, default=[], help="host port into the namespace")
    parser.add_argument("--out", action="append", default=[], help="NSPORT=PORT out of the namespace")
    args = parser.parse_args(argv)
    host_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    into = [(_listener(port), port) for port in args.into]  # made in the host's namespace
    _check(_LIBC.unshare(CLONE_NEWNET), "unshare")
    _loopback_up()
    own_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    out = []
    for item in args.out:
        ns_port, port = (int(part) for part in item.split("=", 1))
        out.append((_listener(ns_port), port))
    for listener, port in into:
        threading.Thread(target=_serve, args=(listener, own_ns, port), daemon=True).start()
    for listener, port in out:
        threading.Thread(target=_serve, args=(listener, host_ns, port), daemon=True).start()
    sys.stdout.write(f"{READY}{os.getpid()}\n")
    sys.stdout.flush()
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
