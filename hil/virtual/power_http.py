"""The virtual board's power switch over HTTP, as labgrid's `simplerest` power model drives
one (labgrid/driver/power/simplerest.py: `GET host.format(value=1|0, index=i)` switches,
`GET host.format(value="", index=i)` with the trailing `/` removed reads "1" or "0").

```
python -m hil.virtual.power_http --root BOARD_ROOT [--port 0]
  → prints `hil-virtual-power http://127.0.0.1:PORT/power/{value}` (the exporter's `host:`)
GET /power/1  → "power on"  on the board's control FIFO (BOARD_ROOT/run/control)
GET /power/0  → "power off"
GET /power    → "1" or "0": the switch's state
```

Loopback only. A switch, not the board: it says what it last set (on at start), as a relay
does; the board obeys through its control FIFO (hil/virtual/server.py's `power on|off`).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

READY_PREFIX = "hil-virtual-power "


class PowerSwitch:
    """The switch: its state, and the board's control FIFO it writes to."""

    def __init__(self, root: Path) -> None:
        self.control_path = root / "run" / "control"
        self.powered = True
        self._lock = threading.Lock()

    def set(self, on: bool) -> None:
        """Switch and tell the board; OSError when the board is not running."""
        with self._lock:
            fd = os.open(self.control_path, os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"power on\n" if on else b"power off\n")
            finally:
                os.close(fd)
            self.powered = on


def make_server(switch: PowerSwitch, port: int = 0) -> ThreadingHTTPServer:
    """The HTTP endpoint on 127.0.0.1:`port` (0: a free one)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if parts[:1] != ["power"] or len(parts) > 2:
                self._reply(404, "not found\n")
                return
            if len(parts) == 2:
                if parts[1] not in ("0", "1"):
                    self._reply(400, "value: 0 or 1\n")
                    return
                try:
                    switch.set(parts[1] == "1")
                except OSError as exc:
                    self._reply(503, f"board not running: {exc}\n")
                    return
            self._reply(200, "1" if switch.powered else "0")

        def _reply(self, code: int, text: str) -> None:
            body = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            return

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hil.virtual.power_http",
                                     description="a virtual board's power switch for labgrid's simplerest")
    parser.add_argument("--root", required=True, help="the virtual board's --root folder")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: free)")
    args = parser.parse_args(argv)
    server = make_server(PowerSwitch(Path(args.root)), args.port)
    sys.stdout.write(f"{READY_PREFIX}http://127.0.0.1:{server.server_address[1]}/power/{{value}}\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
