"""A real headless Chromium (Debian's `chromium`) driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: requests on fd 3, answers and events on fd 4, each JSON message
ended by a NUL byte), so that a test sees every console message, uncaught exception and
browser-side error (a refused fetch, a failed load) of a page, reads its DOM with JavaScript
and takes a screenshot. No websocket, no port, no playwright: the protocol is what
`chrome://inspect` speaks (https://chromedevtools.github.io/devtools-protocol/).

The browser runs in its own session with a fresh profile folder and is ended by its process
group id when the test is done."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
         "--remote-debugging-pipe")
TIMEOUT_S = 60.0


def find_chromium() -> str | None:
    """The chromium executable (Debian's package), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageReport:
    """What loading a page showed."""

    problems: list[str] = field(default_factory=list)
    """Console errors and warnings, uncaught exceptions, browser log errors: each one line."""


class Chromium:
    """One headless Chromium with one page, over the DevTools pipe."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 900) -> None:
        executable = find_chromium()
        if executable is None:
            raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
        profile.mkdir(parents=True, exist_ok=True)
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def wire() -> None:  # in the child: fd 3 reads our requests, fd 4 writes answers
            read, write = os.dup(to_browser_read), os.dup(from_browser_write)  # never clobbered
            os.dup2(read, 3)
            os.dup2(write, 4)
            os.set_inheritable(3, True)  # dup2 onto itself (read == 3) keeps close-on-exec
            os.set_inheritable(4, True)

        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, pass_fds=(3, 4),  # kept open by the close after preexec_fn
            start_new_session=True)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_browser, data):]

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer (events meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def _wait_for(self, method: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not any(event.get("method") == method for event in self._events):
            self._events.append(self._receive(deadline))

    def load(self, url: str, settle_s: float = 0.5) -> PageReport:
        """Open `url`, wait for its load event (and `settle_s` for late messages); every
        console error or warning, uncaught exception and browser log error it caused."""
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self._wait_for("Page.loadEventFired")
        self.call("Runtime.evaluate", session=True, expression="1",
                  awaitPromise=False)  # a round trip: messages sent before it have arrived
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            try:
                self._events.append(self._receive(deadline))
            except TimeoutError:
                break
        return PageReport(problems=[line for event in self._events if (line := _problem(event))])

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", session=True, expression=expression,
                           returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the page (the whole page, not only the window, with `full_page`)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                                "scale": 1})
        data = self.call("Page.captureScreenshot", session=True, **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        """End the browser (and its helpers: its process group), close the pipes."""
        try:
            self._send({"id": self._next_id + 1, "method": "Browser.close"})
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if self.process.poll() is None or _group_alive(self.process.pid):
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=10)
        os.close(self._to_browser)
        os.close(self._from_browser)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _problem(event: dict[str, Any]) -> str | None:
    """One line for an event that is a problem of the page, else None."""
    method, params = event.get("method"), event.get("params") or {}
    if method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails") or {}
        description = (details.get("exception") or {}).get("description") or details.get("text")
        return f"uncaught exception: {description} (line {details.get('lineNumber')})"
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
        text = " ".join(str(arg.get("value", arg.get("description"))) for arg in params.get("args") or [])
        return f"console.{params['type']}: {text}"
    if method == "Log.entryAdded":
        entry = params.get("entry") or {}
        if entry.get("level") in ("error", "warning"):
            return f"browser {entry.get('level')} ({entry.get('source')}): {entry.get('text')}"
    return None
