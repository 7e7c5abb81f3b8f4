"""A lab's adb server for the tests: Debian's real `adb` (or adbutils' bundled one when it
is not installed), started by the test as `adb -P PORT nodaemon server` on a free port and
stopped by its PID; boards are `adb connect`ed to it with the adb command line, as a lab
does before hil ever runs. hil must only use it."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import adbutils
from adbutils._utils import adb_path

from hil.adbserver import LabAdbServer, _free_port
from tests.processes import stop_process


class LabServer:
    """`adb -P PORT nodaemon server`, owned by the test: `address`, `pid`, `adb(...)`,
    `devices()`, `alive()`, `stop()`."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.adb_path = adb_path()
        self.log = Path(tempfile.mkstemp(prefix="hil-test-lab-adb-", suffix=".log")[1])
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANDROID_ADB_SERVER")}
        env["ADB_MDNS"] = "0"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [self.adb_path, "-P", str(self.port), "nodaemon", "server"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + 15
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"lab adb server did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def public_key(self) -> Path:
        """The public half of the key the server signs with (the user's `~/.android/adbkey`,
        made by the server at its start): what a lab's boards trust, as a user accepts it."""
        return Path(os.environ.get("HOME") or Path.home()) / ".android" / "adbkey.pub"

    @property
    def pid(self) -> int:
        return self.process.pid

    def answers(self) -> bool:
        """True when the server answers `host:version`."""
        try:
            LabAdbServer(self.address, socket_timeout=5).client.server_version()
        except Exception:  # noqa: BLE001 - any failure means no
            return False
        return True

    def alive(self) -> bool:
        """The same process still runs and answers."""
        return self.process.poll() is None and self.answers()

    def adb(self, *args: str, check: bool = True) -> str:
        """The adb command line against this server (`adb -P PORT ARGS`); its output."""
        done = subprocess.run([self.adb_path, "-P", str(self.port), *args], capture_output=True,
                              text=True, timeout=30, check=check)
        return done.stdout

    def connect(self, address: str) -> None:
        """`adb -P PORT connect ADDRESS`, as the lab does."""
        out = self.adb("connect", address)
        assert "connected to" in out, out

    def devices(self) -> dict[str, str]:
        """serial -> state, as the server lists them."""
        return dict(LabAdbServer(self.address, socket_timeout=5).devices())

    def stop(self) -> None:
        """SIGTERM by PID, then SIGKILL."""
        stop_process(self.process)
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> LabServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def dead_server_address() -> str:
    """`127.0.0.1:PORT` where no adb server listens."""
    return f"127.0.0.1:{_free_port()}"


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `predicate` every 50 ms; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def device_state(device: adbutils.AdbDevice) -> str:
    """The device's adb state, or the adb error's text (`device offline`, `not found`...)."""
    try:
        return device.get_state()
    except adbutils.AdbError as exc:
        return str(exc)
