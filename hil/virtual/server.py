"""The virtual board: the DEVICE side of adb over TCP, on 127.0.0.1 only.

`VirtualBoard` owns the listener, the device model, the warm executor and reboots: each
accepted connection is served by a `Transport` (`transport.py`), and each OPEN's service
name is answered here (`service`): `shell:`, `shell,v2,...:`, `exec:`, `sync:`, `reboot:`;
anything else is refused. A reboot drops every transport (Android's own, `adb reboot` or
the `reboot` command, after `shutdown_seconds` still on adb), stops listening for
`reboot_seconds`, listens again with `sys.boot_completed=0` and sets it to 1
`BOOT_COMPLETED_DELAY` seconds later. A reboot into the bootloader (`reboot:bootloader`)
comes back on fastboot instead (`bootloader.py`), and `fastboot reboot` back on adb.
It also owns the UART (`console.py`), the power switch (`power on|off|cycle`) and the
injected faults (`faults.py`): requests arrive as lines on the control FIFO
`ROOT/run/control` (`reboot [bootloader]`, `fault SPEC`, `fault clear [KIND]`, `console TEXT`,
`power on|off|cycle|bootloader`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import Protocol

from hil.errors import UsageError
from hil.virtual.auth import Authority
from hil.virtual.bootloader import BootloaderMode
from hil.virtual.console import VirtualConsole
from hil.virtual.device import Device, wrong_chipset
from hil.virtual.faults import BOARD_KINDS, Fault, FaultPlan, parse_fault
from hil.virtual.hostile import FORGE_PROPERTY
from hil.virtual.link import Link
from hil.virtual.shell import parse_shell, serve_shell
from hil.virtual.stream import Service, Stream
from hil.virtual.sync import serve_sync
from hil.virtual.transport import Transport

log = logging.getLogger(__name__)

LISTEN_HOST = "127.0.0.1"
EMULATOR_PORTS = range(5555, 5586)
"""Ports a starting adb server probes and registers as emulators: never listen there."""
BOOT_COMPLETED_DELAY = 0.5
"""Seconds between adbd coming back after a reboot and `sys.boot_completed=1`."""
FAULT_ACTION_TIMEOUT = 10.0
"""Seconds a thread waits for the board's event loop to apply a fault."""


class _Executor(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def wait_warm(self, timeout: float | None = None) -> bool: ...


class VirtualBoard:
    """The board process: listener, transports, services, reboots and the executor."""

    def __init__(
        self,
        device: Device,
        port: int,
        reboot_seconds: float,
        link: Link | None = None,
        faults: FaultPlan | None = None,
        console: VirtualConsole | None = None,
        fastboot_port: int = 0,
        device_time: str | None = None,
        shutdown_seconds: float = 0.0,
        authority: Authority | None = None,
    ) -> None:
        self.device = device
        self.authority = authority or Authority()
        """The keys a host must sign with (`auth.py`)."""
        self.device_time = device_time
        """The off-host measuring mode (`offhost.py`): `measured`, ms per execution, or None."""
        self.link = link or Link("none")
        self.port = port
        self.reboot_seconds = reboot_seconds
        self.shutdown_seconds = shutdown_seconds
        """How long a requested reboot stays on adb first (a power cut does not)."""
        self.faults = faults or FaultPlan()
        self.console = console
        self._server: asyncio.Server | None = None
        self._transports: dict[Transport, asyncio.Task[None]] = {}
        self._reboot_task: asyncio.Task[None] | None = None
        self._boot_task: asyncio.Task[None] | None = None
        self._ending: asyncio.Future[int] | None = None
        """`Device.end_processes` in its thread: a cancelled reboot does not stop the thread,
        so the next shutdown and boot wait for it (else it kills the next boot's shells)."""
        self._control_fd: int | None = None
        self._control_buffer = b""
        self._executor: _Executor | None = None
        self._thawed = asyncio.Event()
        self._thawed.set()
        self._powered = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cooling: set[int] = set()
        """`hot` faults (by id) whose end is scheduled."""
        self._ready = False
        self.bootloader = BootloaderMode(self, LISTEN_HOST, fastboot_port)
        """Its fastboot side: listening only while the board is in the bootloader."""

    async def start(self) -> None:
        """Prepare the device, start the executor and listen; the board is booted."""
        self._loop = asyncio.get_running_loop()
        self.device.prepare()
        self.bootloader.reserve()
        await self.bootloader.boot_android()
        self._apply_state_faults()
        self.device.log("hil virtual board booting")
        if self.console is not None:
            self.console.boot_banner(self.device.chipset, self.device.serial)
        self._executor = self._start_executor()
        self._control_fd = os.open(self.device.control_path, os.O_RDWR | os.O_NONBLOCK)
        asyncio.get_running_loop().add_reader(self._control_fd, self._on_control)
        await self._listen()
        self._set_boot_completed()
        log.info("%s", self.authority.describe())

    async def stop(self) -> None:
        """Stop listening, drop every transport, end every process the board's shells
        started, stop the executor."""
        for task in (self._reboot_task, self._boot_task):
            if task is not None:
                task.cancel()
        await self._drop_transports()
        self.device.close()  # the board's pid namespace: whatever still runs in it ends
        await self._end_processes()
        await self.bootloader.leave()
        self.bootloader.release()
        if self._control_fd is not None:
            asyncio.get_running_loop().remove_reader(self._control_fd)
            os.close(self._control_fd)
            self._control_fd = None
        if self._executor is not None:
            self._executor.stop()
            self._executor = None

    def when_warm(self, callback: Callable[[], None]) -> None:
        """Call `callback` in the event loop once the executor has imported the host runtime
        (a board's own start-up: the first case must not pay for it); a `hot` fault's time
        counts from then. Waits in a daemon thread, so that a stop is not held up."""
        loop = asyncio.get_running_loop()
        executor = self._executor

        def warm() -> None:
            self._ready = True
            self._apply_heat()
            callback()

        def wait() -> None:
            assert executor is not None
            executor.wait_warm()
            with contextlib.suppress(RuntimeError):  # the loop closed: the board stopped
                loop.call_soon_threadsafe(warm)

        if executor is None:
            warm()
        else:
            threading.Thread(target=wait, name="hil-board-warm", daemon=True).start()

    def _start_executor(self) -> _Executor | None:
        try:
            from hil.virtual.executor import WarmExecutor
        except ImportError as exc:
            log.warning("no warm executor (%s): running without %s", exc,
                        self.device.executor_socket)
            return None
        executor = WarmExecutor(
            self.device.fs, self.device.executor_socket, vendor_lib=self.device.vendor_lib,
            hooks=self, profile=self.device.runner_profile, device_time=self.device_time,
        )
        executor.start()
        return executor

    # -- faults -------------------------------------------------------------------------
    async def awake(self, delay: bool) -> None:
        """Wait while the board is frozen; with `delay`, add a `slow` fault's delay."""
        await self._thawed.wait()
        slow = self.faults.state("slow") if delay else None
        if slow is not None:
            await asyncio.sleep(slow.delay)

    def fire(self, event: str, path: str = "") -> list[Fault]:
        """The faults firing on `event` (in the event loop); board faults are applied at
        once, the others are the caller's to act on."""
        fired = self.faults.fire(event, path)
        for fault in fired:
            log.warning("fault %s fires on %s %s", fault.kind, event, path)
            self.device.log(f"fault injected: {fault.kind} on {event}", level="W")
            if fault.kind in BOARD_KINDS:
                self._apply(fault)
        return fired

    def fire_threadsafe(self, event: str, path: str = "") -> list[Fault]:
        """`fire` from another thread, returning once the event loop has applied it."""
        assert self._loop is not None

        async def fire() -> list[Fault]:
            return self.fire(event, path)

        return asyncio.run_coroutine_threadsafe(fire(), self._loop).result(FAULT_ACTION_TIMEOUT)

    def _apply(self, fault: Fault) -> None:
        if fault.kind == "drop":
            for transport in list(self._transports):
                transport.abort()
        elif fault.kind == "freeze":
            self._thawed.clear()
        elif fault.kind == "reboot":
            self.request_reboot(f"fault reboot on {fault.on}")
        elif fault.kind == "panic" and self.console is not None:
            self.console.write_line(fault.text)

    def add_fault(self, spec: str) -> None:
        """Arm a fault SPEC (`on=now`: apply it at once)."""
        fault = parse_fault(spec)
        if fault.on == "now":
            self._apply(fault)
            return
        self.faults.add(fault)
        self._apply_state_faults()

    def clear_faults(self, kind: str | None = None) -> None:
        """Disarm every fault (or those of `kind`); a frozen board stays frozen until rebooted."""
        self.faults.clear(kind)
        self._apply_state_faults()

    def _apply_state_faults(self) -> None:
        self.device.readonly_data = self.faults.state("readonly-data") is not None
        self.device.hostile = frozenset(k for k in ("forge-command", "list-escape") if self.faults.state(k))
        if (self.device.properties.get(FORGE_PROPERTY) == "1") != ("forge-command" in self.device.hostile):
            self.device.set_property(FORGE_PROPERTY, "1" if "forge-command" in self.device.hostile else "0")
        if self.console is not None and not self.faults.state("endless-line"):
            self.console.stop_endless_line()
        wrong = self.faults.state("wrong-chipset") is not None
        self.device.report_chipset(wrong_chipset(self.device.chipset) if wrong else self.device.chipset)
        self._apply_heat()
        self.bootloader.apply_vendor()

    def _apply_heat(self) -> None:
        """The `hot` fault: the sysfs thermal files at its temperature until its time is up."""
        hot = self.faults.state("hot")
        self.device.set_heat(hot.temp if hot is not None else None)
        if hot is not None and hot.seconds > 0 and id(hot) not in self._cooling and self._ready:
            self._cooling.add(id(hot))
            asyncio.get_running_loop().call_later(hot.seconds, self._cool_down, hot)

    def _cool_down(self, hot: Fault) -> None:
        self._cooling.discard(id(hot))
        self.faults.remove(hot)
        log.info("fault hot: %g s are up, the board cools down", hot.seconds)
        self._apply_heat()

    # -- executor hooks (called from the executor's threads) ------------------------------
    def runner_started(self, pid: int | None, cwd: str) -> list[Fault]:
        """A runner exec begins: log it, fire the `exec` faults."""
        self.device.log(f"enn_executor_runner pid {pid}: start in {cwd}", tag="enn")
        if self.console is not None:
            self.console.write_line(f"enn: runner pid {pid} started (VIRTUAL, no NPU)")
        states = [self.faults.state("slow", on="exec"), self.faults.state("jitter")]
        try:
            fired = self.fire_threadsafe("exec") + [state for state in states if state is not None]
        except (concurrent.futures.TimeoutError, RuntimeError) as exc:
            log.warning("exec faults not evaluated: %s", exc)
            return []
        for fault in fired:  # a hostile UART: its first 128 KiB written before the runner goes on
            if fault.kind == "endless-line" and self.console is not None:
                self.console.endless_line(fault.size)
        return fired

    def runner_finished(self, pid: int | None, status: int) -> None:
        """A runner exec ended with shell status `status` (128+N: killed by signal N)."""
        if status > 128:
            signum = status - 128
            self.device.log(
                f"Fatal signal {signum} ({signal.Signals(signum).name}) in tid {pid} "
                f"(enn_executor_runner), pid {pid} (enn_executor_runner)",
                tag="libc", level="F",
            )
        self.device.log(f"enn_executor_runner pid {pid}: exit status {status}", tag="enn")
        if self.console is not None:
            self.console.write_line(f"enn: runner pid {pid} exited with status {status}")

    async def _listen(self) -> None:
        while True:
            server = await asyncio.start_server(self._accept, LISTEN_HOST, self.port)
            port = server.sockets[0].getsockname()[1]
            if port not in EMULATOR_PORTS:
                break
            server.close()
        self._server = server
        self.port = port
        log.info("listening on %s:%d", LISTEN_HOST, port)

    async def _drop_transports(self) -> None:
        self._thawed.set()  # a reboot or power cut ends a freeze
        if self._server is not None:
            self._server.close()
        for transport in list(self._transports):
            transport.abort()
        await asyncio.gather(*self._transports.values(), return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = Transport(self, reader, writer)
        task = asyncio.current_task()
        assert task is not None
        self._transports[transport] = task
        try:
            await transport.run()
        finally:
            self._transports.pop(transport, None)

    def _set_boot_completed(self) -> None:
        self.device.set_property("sys.boot_completed", "1")
        self.device.log("boot completed")
        if self.console is not None:
            self.console.write_line("init: sys.boot_completed=1")
        log.info("boot completed")

    def request_reboot(self, reason: str, target: str = "", orderly: bool = False) -> None:
        """Reboot soon (once, however often asked while rebooting); `target` "bootloader"
        comes back on fastboot, anything else on adb. An `orderly` reboot (Android's own:
        `adb reboot`, the `reboot` command) stays on adb for `shutdown_seconds` first."""
        if self._reboot_task is None or self._reboot_task.done():
            self._reboot_task = asyncio.create_task(self._reboot(reason, target, orderly))

    async def _reboot(self, reason: str, target: str, orderly: bool) -> None:
        shutdown_s = self.shutdown_seconds if orderly else 0.0
        log.info("rebooting (%s): shutting down for %.1f s, then down for %.1f s", reason,
                 shutdown_s, self.reboot_seconds)
        await asyncio.sleep(shutdown_s)
        await self._shutdown(reason)
        await asyncio.sleep(self.reboot_seconds)
        await self._boot(target)

    def request_power(self, action: str) -> None:
        """The power switch (`on`, `off`, `cycle`; `bootloader`: a cycle with the board's
        bootloader key held): works on a frozen board too."""
        if self._reboot_task is not None and not self._reboot_task.done():
            self._reboot_task.cancel()
        self._reboot_task = asyncio.create_task(self._power(action))

    async def _power(self, action: str) -> None:
        if action in ("off", "cycle", "bootloader") and self._powered:
            await self._shutdown(f"power {action}")
            self._powered = False
            if self.console is not None:
                self.console.enabled = False
        if action in ("cycle", "bootloader"):
            await asyncio.sleep(self.reboot_seconds)
        if action in ("on", "cycle", "bootloader") and not self._powered:
            self._powered = True
            if self.console is not None:
                self.console.enabled = True
            await self._boot("bootloader" if action == "bootloader" else "")

    async def _shutdown(self, reason: str) -> None:
        self.device.log(f"reboot requested ({reason})")
        if self.console is not None:
            self.console.write_line(f"reboot: Restarting system with command '{reason}'")
        if self._boot_task is not None:
            self._boot_task.cancel()
        self.device.set_property("sys.boot_completed", "0")
        await self._drop_transports()
        await self._end_processes()  # what outlived its shell ends too
        await self.bootloader.leave()

    async def _end_processes(self) -> None:
        """End every process of the board's shells: after the pass still running (see
        `_ending`), a pass of its own."""
        while self._ending is not None and not self._ending.done():
            await asyncio.shield(self._ending)
        self._ending = asyncio.ensure_future(asyncio.to_thread(self.device.end_processes))
        await asyncio.shield(self._ending)

    async def _boot(self, target: str = "") -> None:
        if self._ending is not None:
            await asyncio.shield(self._ending)  # a cancelled shutdown's, still ending processes
        if target == "bootloader":
            if self.console is not None:
                self.console.write_line("bootloader: entering fastboot mode (VIRTUAL)")
            if await self.bootloader.enter():
                self.device.log(f"bootloader: fastboot on {self.bootloader.endpoint}")
            return
        self.device.log("hil virtual board booting")
        if self.console is not None:
            self.console.boot_banner(self.device.chipset, self.device.serial)
        await self.bootloader.boot_android()
        await self._listen()
        self._boot_task = asyncio.create_task(self._finish_boot())

    async def _finish_boot(self) -> None:
        await asyncio.sleep(BOOT_COMPLETED_DELAY)
        self._set_boot_completed()

    def _on_control(self) -> None:
        assert self._control_fd is not None
        try:
            self._control_buffer += os.read(self._control_fd, 4096)
        except BlockingIOError:
            return
        *lines, self._control_buffer = self._control_buffer.split(b"\n")
        for line in lines:
            self._control(line.decode(errors="replace"))

    def _control(self, line: str) -> None:
        """One control request: `reboot [bootloader]`, `fault SPEC`, `fault clear [KIND]`,
        `console TEXT`, `power on|off|cycle|bootloader`."""
        command, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if command == "reboot":
            self.request_reboot(" ".join(["reboot command", rest]).strip(), rest, orderly=True)
        elif command == "fault" and rest.split(" ")[0] == "clear":
            self.clear_faults(rest.removeprefix("clear").strip() or None)
        elif command == "fault":
            try:
                self.add_fault(rest)
            except UsageError as exc:
                log.warning("control: %s", exc)
        elif command == "console" and self.console is not None:
            self.console.write_line(rest)
        elif command == "power" and rest in ("on", "off", "cycle", "bootloader"):
            self.request_power(rest)
        elif command:
            log.warning("unknown control request %r", line)

    def service(self, name: str) -> Service | None:
        """The handler of an OPEN's service name, or None to refuse it."""
        shell = parse_shell(name)
        if shell is not None:
            v2, env, command = shell
            if v2 and self.faults.state("old-adbd") is not None:
                return None  # an adbd before Android 7 knows no shell protocol
            return lambda stream: serve_shell(self.device, stream, command, env, v2)
        if name.startswith("exec:"):
            command = name.removeprefix("exec:")
            return lambda stream: serve_shell(self.device, stream, command, {}, False)
        if name == "sync:":
            return lambda stream: serve_sync(stream, self.device)
        if name.startswith("reboot:"):
            return lambda stream: self._reboot_service(stream, name.removeprefix("reboot:"))
        return None

    async def _reboot_service(self, stream: Stream, target: str) -> None:
        self.request_reboot(f"adb reboot {target}".strip(), target, orderly=True)
        await asyncio.Future()  # the reboot drops the transport and cancels this
