"""The virtual board's device model: its filesystem, properties, log and shell sandbox.

Board root layout (`--root DIR`):

- `DIR/fs/` is the device's `/`. Shell commands run in a bubblewrap sandbox with `fs/`
  mounted read-only as `/`, `fs/data` read-write as `/data` (like an unrooted board:
  only `/data` is writable), the host's `/usr` and `/etc` (and the Python running the
  board) read-only, `/proc` and a fresh `/dev`. Every shell joins the board's own pid
  namespace (`sandboxes.PidNamespace`): a PID printed by one shell can be killed from another,
  and no shell sees the host's processes (the board's own included: no `/proc/PID/root` leads
  out). Each shell has an IPC and a network namespace of its own: the board's loopback is not
  the host's (no shell reaches an adb server or any other service listening on the host's).
- `DIR/run/` holds the board's own files, not visible as such to the device:
  `logcat.txt` (bound at `/dev/hil/logcat`, read by the `logcat` stub),
  `control` (a FIFO bound at `/dev/hil/control`: the `reboot` stub writes `reboot` there),
  `props/properties` (`key=value` lines, the folder bound read-only at
  `/dev/__properties__`, read by the `getprop` stub) and `executor.sock` (bound at
  `/dev/socket/hil-enn-executor` when present).

Mount points for the host paths are created inside `fs/` at board start (empty folders
such as `fs/usr`, `fs/proc`, and one for the host Python's prefix), because the sandbox's
`/` is read-only.

`fs/sys` holds the sysfs files hil reads before each case (`hil/board/thermal.py`), as a
board has them: thermal zones (`/sys/class/thermal/thermal_zone<N>/{type,temp}`, milli-°C)
and cpufreq policies (`/sys/devices/system/cpu/cpufreq/policy<N>/scaling_*`, kHz). The
numbers are made up (a VIRTUAL board has no sensors): an idle board's, and under the `hot`
fault every zone at the fault's temperature with the clocks throttled to their minimum.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import posixpath
import shlex
import shutil
import stat
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hil import lifeline
from hil.errors import InfraError, UsageError
from hil.report.results import atomic_write_text
from hil.runner.profiles import DEFAULT_VIRTUAL_PROFILE, VIRTUAL_PROFILE_PROPERTY, profile_named
from hil.virtual.device_programs import stub_programs
from hil.virtual.exec_guard import ExecGuard, executable_verdict
from hil.virtual.protocol import DEVICE_MAXDATA
from hil.virtual.sandboxes import INIT_COMMAND, PidNamespace, Sandboxes

log = logging.getLogger(__name__)

CHIPSETS: dict[str, str] = {"E9955": "S5E9955", "E9965": "S5E9965"}
"""Chipset name (as in `--chipset`) → the board's `ro.soc.model`."""

DEVICE_PATH = "/system/bin:/vendor/bin:/usr/bin:/bin"
PRODUCT_NAME = "hil_virtual"
PRODUCT_MODEL = "Exynos Virtual Board (hil, no NPU)"
FEATURES = ("shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir")
"""What the board's adb side implements, advertised in its CNXN banner."""

EXECUTOR_SOCKET_DEVICE_PATH = "/dev/socket/hil-enn-executor"
LOGCAT_DEVICE_PATH = "/dev/hil/logcat"
CONTROL_DEVICE_PATH = "/dev/hil/control"
PROPERTIES_DEVICE_DIR = "/dev/__properties__"
VENDOR_LIB_PATH = "/vendor/lib64/libenn_public_api_cpp.so"
RUNNER_FILE_NAME = "enn_executor_runner"
RUNNER_FRONT = Path(__file__).with_name("runner_front.py")
"""What an aarch64 `enn_executor_runner` becomes when executed (`Device.stand_in_runner`)."""

THERMAL_ZONES = (("BIG", 38.0), ("MID", 37.0), ("LITTLE", 36.0), ("G3D", 35.5), ("NPU", 36.5))
"""The virtual board's thermal zones (type, idle °C), `thermal_zone0` first."""
CPUFREQ_POLICIES = (("policy0", 400_000, 1_950_000), ("policy4", 600_000, 2_600_000),
                    ("policy7", 800_000, 3_300_000))
"""The virtual board's cpufreq policies (name, minimum kHz, maximum kHz); governor
`schedutil`, running at the maximum while the board is cool."""
THERMAL_ROOT = "sys/class/thermal"
CPUFREQ_ROOT = "sys/devices/system/cpu/cpufreq"

_HOST_READ_ONLY = ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc")
_MAX_SYMLINK_HOPS = 40

def soc_model(chipset: str) -> str:
    """`ro.soc.model` for a `--chipset` value; UsageError for an unknown one."""
    try:
        return CHIPSETS[chipset]
    except KeyError:
        known = ", ".join(sorted(CHIPSETS))
        raise UsageError(f"--chipset {chipset!r}: expected one of {known}") from None


def wrong_chipset(chipset: str) -> str:
    """A chipset other than `chipset` (what the `wrong-chipset` fault reports)."""
    return next(other for other in sorted(CHIPSETS) if other != chipset)


def _host_python_roots() -> list[Path]:
    """The host folders the board's Python needs inside the sandbox, outermost only,
    leaving out those under the read-only host folders already bound."""
    candidates = {
        Path(p).resolve()
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    candidates.add(Path(sys.executable).resolve().parent.parent)
    bound = [Path(p).resolve() for p in _HOST_READ_ONLY if Path(p).exists()]
    roots: list[Path] = []
    for path in sorted(candidates, key=lambda p: len(p.parts)):
        if any(path.is_relative_to(outer) for outer in [*bound, *roots]):
            continue
        roots.append(path)
    return roots


class Device:
    """The virtual board's device side: filesystem, properties, log and shell sandbox."""

    def __init__(
        self, root: Path, chipset: str, serial: str, vendor_lib: bool = True,
        runner_profile: str = DEFAULT_VIRTUAL_PROFILE,
    ) -> None:
        self.chipset = chipset
        self.serial = serial
        self.vendor_lib = vendor_lib
        """Whether `/vendor/lib64/libenn_public_api_cpp.so` exists (without it the runner
        segfaults, as on a real board)."""
        self.runner_profile = profile_named(runner_profile)
        """The runner binary this board imitates: what its runner refuses to load."""
        self._readonly_data = False
        self.hostile: frozenset[str] = frozenset()
        """The hostile faults in force (`hostile.py`): `list-escape` is the sync service's to act on."""
        self.root = root.resolve()
        self.fs = self.root / "fs"
        self.run_dir = self.root / "run"
        self.logcat_path = self.run_dir / "logcat.txt"
        self.control_path = self.run_dir / "control"
        self.executor_socket = self.run_dir / "executor.sock"
        self._props_path = self.run_dir / "props" / "properties"
        self._python_roots = _host_python_roots()
        self._sandboxes = Sandboxes(self.log)
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise InfraError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
        self._bwrap = bwrap
        self._exec_guard = ExecGuard(self._data_file, self._on_exec)
        """What the board's shells execute is looked at first (exec_guard.py)."""
        self._pids = PidNamespace(self._init_argv, lifeline.child_env(),
                                  lambda line: self.log(line, level="W"))
        platform = soc_model(chipset).lower()
        self.properties: dict[str, str] = {
            "ro.soc.manufacturer": "Samsung",
            "ro.soc.model": soc_model(chipset),
            "ro.hardware.chipname": platform,
            "ro.board.platform": platform,
            "ro.hardware": platform,
            "ro.product.cpu.abi": "arm64-v8a",
            "ro.product.brand": "samsung",
            "ro.product.manufacturer": "samsung",
            "ro.product.model": PRODUCT_MODEL,
            "ro.product.name": PRODUCT_NAME,
            "ro.product.device": PRODUCT_NAME,
            "ro.build.version.sdk": "35",
            "ro.build.version.release": "15",
            "ro.build.type": "user",
            "ro.adb.secure": "1",  # adb authentication required (hil/virtual/auth.py)
            "ro.serialno": serial,
            "ro.hil.virtual": "1",
            "ro.hil.virtual.chipset": chipset,
            VIRTUAL_PROFILE_PROPERTY: self.runner_profile.name,
            "sys.boot_completed": "0",
        }

    def banner(self, old_adbd: bool = False) -> bytes:
        """The CNXN banner: the identity the adb server shows in `adb devices -l`, and the
        features (`old_adbd`: without `shell_v2`, as before Android 7)."""
        props = ";".join(
            f"{key}={self.properties[key]}"
            for key in ("ro.product.name", "ro.product.model", "ro.product.device")
        )
        features = [name for name in FEATURES if not (old_adbd and name == "shell_v2")]
        return f"device::{props};features={','.join(features)}".encode()

    def prepare(self) -> None:
        """Create the board root's layout, the mount points, the stubs and the
        properties file. Safe to call on an existing root."""
        for folder in ("data/local/tmp", "system/bin", "vendor/bin", "vendor/lib64",
                       "proc", "dev"):
            (self.fs / folder).mkdir(parents=True, exist_ok=True)
        (self.fs / "data/local/tmp").chmod(0o771)
        self.place_vendor_lib(self.vendor_lib)
        self._props_path.parent.mkdir(parents=True, exist_ok=True)
        for host in _HOST_READ_ONLY:
            self._mirror_host_path(Path(host))
        for python_root in self._python_roots:
            (self.fs / python_root.relative_to("/")).mkdir(parents=True, exist_ok=True)
        sh = self.fs / "system/bin/sh"
        if not sh.is_symlink():
            sh.symlink_to("/bin/sh")
        python = shlex.quote(str(Path(sys.executable).absolute()))
        for name, text in stub_programs(python).items():
            path = self.fs / "system/bin" / name
            path.write_text(text)
            path.chmod(0o755)
        if self.control_path.exists() and not stat.S_ISFIFO(self.control_path.lstat().st_mode):
            self.control_path.unlink()
        if not self.control_path.exists():
            os.mkfifo(self.control_path, 0o600)
        self.logcat_path.touch()
        self._write_properties()
        self.set_heat(None)

    def place_vendor_lib(self, present: bool) -> None:
        """Put ENN's library (a placeholder) on the board, or take it off."""
        vendor_lib = self.fs / VENDOR_LIB_PATH.lstrip("/")
        if present:
            vendor_lib.write_text("hil VIRTUAL board: placeholder for the ENN vendor library\n")
        else:
            vendor_lib.unlink(missing_ok=True)

    def set_heat(self, celsius: float | None) -> None:
        """Write the sysfs thermal and cpufreq files: every zone at `celsius` with the
        clocks at their minimum (throttled), or the idle board (None)."""
        for index, (kind, idle_c) in enumerate(THERMAL_ZONES):
            zone = self.fs / THERMAL_ROOT / f"thermal_zone{index}"
            zone.mkdir(parents=True, exist_ok=True)
            # written whole: a shell reading one meanwhile sees the old or the new value,
            # never an empty file (sysfs reads are atomic; a truncating write is not)
            atomic_write_text(zone / "type", kind + "\n", durable=False)
            atomic_write_text(zone / "temp", f"{round((idle_c if celsius is None else celsius) * 1000)}\n",
                              durable=False)
        for name, low, high in CPUFREQ_POLICIES:
            policy = self.fs / CPUFREQ_ROOT / name
            policy.mkdir(parents=True, exist_ok=True)
            values = {"scaling_governor": "schedutil", "scaling_min_freq": low,
                      "scaling_max_freq": high, "cpuinfo_max_freq": high,
                      "scaling_cur_freq": high if celsius is None else low}
            for file, value in values.items():
                atomic_write_text(policy / file, f"{value}\n", durable=False)

    def _mirror_host_path(self, host: Path) -> None:
        """Make `fs/<host>` a mount point for a host folder, or the same symlink the host
        has (merged /usr: `/bin -> usr/bin`)."""
        if not host.exists():
            return
        inside = self.fs / host.relative_to("/")
        if host.is_symlink():
            if not inside.is_symlink():
                if inside.is_dir():
                    inside.rmdir()
                inside.symlink_to(os.readlink(host))
        else:
            inside.mkdir(parents=True, exist_ok=True)

    def report_chipset(self, chipset: str) -> None:
        """Make getprop report `chipset` (`self.chipset` keeps the configured one)."""
        model = soc_model(chipset)
        for key in ("ro.hardware.chipname", "ro.board.platform", "ro.hardware"):
            self.properties[key] = model.lower()
        self.properties["ro.soc.model"] = model
        self.properties["ro.hil.virtual.chipset"] = chipset
        self._write_properties()

    def set_property(self, key: str, value: str) -> None:
        """Set one property, visible to the next `getprop`."""
        self.properties[key] = value
        self._write_properties()

    def _write_properties(self) -> None:
        text = "".join(f"{key}={value}\n" for key, value in sorted(self.properties.items()))
        tmp = self._props_path.with_name(".properties.tmp")
        tmp.write_text(text)
        tmp.replace(self._props_path)

    @property
    def readonly_data(self) -> bool:
        """Shells see `/data` read-only (the `readonly-data` fault): new ones and, as on a
        real board, those already running (`sandboxes.py`)."""
        return self._readonly_data

    @readonly_data.setter
    def readonly_data(self, readonly: bool) -> None:
        if readonly != self._readonly_data:
            self._readonly_data = readonly
            self._sandboxes.remount_data(readonly)

    def log(self, message: str, tag: str = "hil-board", level: str = "I") -> None:
        """Append one line to the board's log, in logcat's threadtime format."""
        now = time.time()
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(now))
        millis = int(now * 1000) % 1000
        pid = os.getpid()
        with self.logcat_path.open("a") as out:
            out.write(f"{stamp}.{millis:03d} {pid:5d} {pid:5d} {level} {tag}: {message}\n")

    def resolve(self, device_path: str, follow_last: bool = True) -> Path:
        """The host path of a device path, resolving `..` and symlinks with `fs/` as the
        root. OSError(EACCES) when the path or a symlink in it leads above `/`."""
        pending = [part for part in device_path.split("/") if part not in ("", ".")]
        current: list[str] = []
        hops = 0
        while pending:
            name = pending.pop(0)
            if name == "..":
                if not current:
                    raise OSError(errno.EACCES, f"{device_path}: escapes the device root")
                current.pop()
                continue
            candidate = self.fs.joinpath(*current, name)
            if (pending or follow_last) and candidate.is_symlink():
                hops += 1
                if hops > _MAX_SYMLINK_HOPS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                target = os.readlink(candidate)
                if target.startswith("/"):
                    current = []
                pending = [p for p in target.split("/") if p not in ("", ".")] + pending
                continue
            current.append(name)
        host = self.fs.joinpath(*current)
        real = Path(os.path.realpath(host.parent)) / host.name
        if not real.is_relative_to(self.fs):
            raise OSError(errno.EACCES, f"{device_path}: escapes the device root")
        return host

    def _data_file(self, device_path: str) -> Path | None:
        """The host path of a device path under `/data` (where every file a user put on the
        board is), None for any other. Only `/data` is writable, so no path outside it (the
        board's own programs) can lead into it: those are answered without a look."""
        if not posixpath.normpath(device_path).startswith("/data/"):
            return None
        try:
            host = self.resolve(device_path)
        except OSError:
            return None
        return host if host.is_relative_to(self.fs / "data") else None

    def _on_exec(self, device_path: str, host_path: Path) -> int:
        """What the board does when a shell executes the file at `device_path` on `/data`
        (exec_guard.py's table): 0 to let the exec go on, else the errno it fails with."""
        kind = executable_verdict(host_path, RUNNER_FILE_NAME)
        if kind == "runner":
            self.stand_in_runner(device_path, host_path)
        elif kind == "android":
            self.log(f"{device_path}: an aarch64 program a virtual board cannot execute (it imitates "
                     f"{RUNNER_FILE_NAME} only): Exec format error", level="W")
            return errno.ENOEXEC
        elif kind == "foreign":
            self.log(f"{device_path}: not an aarch64 program: Exec format error", level="W")
            return errno.ENOEXEC
        return 0

    def stand_in_runner(self, device_path: str, host_path: Path) -> None:
        """An aarch64 ELF named `enn_executor_runner`, executed on the board (however it got
        there: pushed, unpacked by the board's `tar`, copied), becomes this board's runner
        front: the binary is built for Android and cannot run here. The front runs the program
        in the warm executor under this board's runner profile, as the board's own runner
        does; the file keeps its mode (replaced whole, so a concurrent exec sees one or the
        other). The swap is logged."""
        data = host_path.read_bytes()
        replacement = host_path.with_name(f".{host_path.name}.hil-front")
        replacement.write_bytes(RUNNER_FRONT.read_bytes())
        os.chmod(replacement, stat.S_IMODE(host_path.stat().st_mode))
        os.replace(replacement, host_path)
        self.log(f"{device_path}: executed runner ({len(data)} bytes, sha256 "
                 f"{hashlib.sha256(data).hexdigest()[:12]}) stands as the virtual runner "
                 f"(profile {self.runner_profile.name}): a virtual board cannot execute it")

    def check_writable(self, host_path: Path) -> None:
        """OSError(EROFS) unless `host_path` is under `/data`, the only writable tree."""
        if not host_path.is_relative_to(self.fs / "data"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    def sandbox_argv(self, command: str | None, env: dict[str, str],
                     namespaces: Sequence[str] = ()) -> list[str]:
        """The bwrap command line that runs `/system/bin/sh -c COMMAND` on the device
        (an interactive-less `sh` reading stdin when COMMAND is None), in its own IPC and
        network namespaces and `namespaces` (bwrap options: the board's pid namespace)."""
        argv = [
            self._bwrap, *namespaces, "--unshare-ipc", "--unshare-net",
            "--ro-bind", str(self.fs), "/",
            "--ro-bind" if self.readonly_data else "--bind", str(self.fs / "data"), "/data",
        ]
        for host in _HOST_READ_ONLY:
            path = Path(host)
            if path.exists() and not path.is_symlink():
                argv += ["--ro-bind", host, host]
        for python_root in self._python_roots:
            argv += ["--ro-bind", str(python_root), str(python_root)]
        argv += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--bind-try", str(self.logcat_path), LOGCAT_DEVICE_PATH,
            "--bind-try", str(self.control_path), CONTROL_DEVICE_PATH,
            "--ro-bind-try", str(self._props_path.parent), PROPERTIES_DEVICE_DIR,
            "--bind-try", str(self.executor_socket), EXECUTOR_SOCKET_DEVICE_PATH,
            "--cap-drop", "ALL",
            "--new-session",  # the shell leads a session, as adbd's setsid() makes it
            "--die-with-parent",
            "--chdir", "/",
            "--clearenv",
        ]
        full_env = {
            "PATH": DEVICE_PATH,
            "HOME": "/",
            "ANDROID_DATA": "/data",
            "ANDROID_ROOT": "/system",
            "TMPDIR": "/data/local/tmp",
            **env,
        }
        for key, value in full_env.items():
            argv += ["--setenv", key, value]
        argv += ["--", "/system/bin/sh"]
        if command is not None:
            argv += ["-c", command]
        return argv

    async def spawn(
        self, command: str | None, env: dict[str, str], merge_stderr: bool
    ) -> asyncio.subprocess.Process:
        """Start a shell command in the sandbox, in its own process group, with pipes
        for stdin, stdout and stderr (stderr into stdout when `merge_stderr`). Whatever it
        starts dies with the board, even when the board is killed with SIGKILL: the shell
        carries the board's lifeline token (`hil.lifeline`) into the sandbox, where the
        device's environment shows it as HIL_LIFELINE (bwrap's --die-with-parent alone
        leaves the sandboxed shell running once bwrap is gone)."""
        tied = lifeline.child_env()
        namespaces, fds = self._pids.join()
        process = await asyncio.create_subprocess_exec(
            *self.sandbox_argv(command, {lifeline.TOKEN_ENV: tied[lifeline.TOKEN_ENV], **env}, namespaces),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            env=tied,  # its own session, but it dies with the board all the same
            start_new_session=True,
            limit=DEVICE_MAXDATA,
            preexec_fn=self._exec_guard.preexec,  # system calls only: safe beside the board's threads
            pass_fds=(*fds, self._exec_guard.pass_fd),  # the pid namespace's, the guard's
        )
        self._sandboxes.add(process)
        return process

    def end_processes(self) -> int:
        """SIGKILL every process the board's shells started, those whose shell is gone
        included (a board going down ends them all): everything carrying the board's own
        lifeline token. The number of signals sent. The pid namespace ends first and for
        sure: the next shell starts a new one, never joins one whose pid 1 is dying."""
        self._pids.close()
        own = lifeline.child_env({})[lifeline.TOKEN_ENV]  # this process's token alone
        return lifeline.end_tied(own)

    def _init_argv(self, info_fd: int) -> list[str]:
        """The first process of the board's pid namespace: a sandbox like a shell's, with
        `--unshare-pid`, sleeping until the board ends (`PidNamespace`)."""
        tied = lifeline.child_env()
        return self.sandbox_argv(INIT_COMMAND, {lifeline.TOKEN_ENV: tied[lifeline.TOKEN_ENV]},
                                 ["--unshare-pid", "--info-fd", str(info_fd)])

    def close(self) -> None:
        """End the board's pid namespace (every process still in it ends)."""
        self._pids.close()

