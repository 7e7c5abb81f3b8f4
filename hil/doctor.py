"""`hil doctor`: what this machine (or image) has for hil, what is missing, how to fix it.

Each check is cheap and imports nothing heavy in this process: package versions come from
metadata, the ENN wrapper is imported for real in a child Python with the SDK's library path
(`hil.sdk.check_wrapper`), adb and docker answer short probes.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from hil import sdk
from hil.errors import UsageError, cause_in_words
from hil.verdict import EXIT_USAGE

ELF_MACHINE_AARCH64 = 0xB7


@dataclass(frozen=True)
class Check:
    """One component's state."""

    name: str
    ok: bool
    detail: str
    """What was found (version, path) or what is missing."""
    fix: str = ""
    """How to get it, when not ok."""
    more: tuple[str, ...] = ()
    """Further fixes, tried in order after `fix`."""


@dataclass(frozen=True)
class Options:
    """What the checks are asked about."""

    runner: str | None = None
    adb_server: str | None = None
    """`--adb-server`: the lab server to look at (default: adb's ADB_SERVER_SOCKET /
    ANDROID_ADB_SERVER_*, 127.0.0.1:5037)."""


def _package(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def check_executorch() -> Check:
    found = _package("executorch")
    torch = _package("torch")
    if found is None:
        return Check("executorch", False, "not installed", "pip install executorch==1.5.1")
    if importlib.util.find_spec("executorch.runtime") is None:
        return Check("executorch", False, f"{found}, but executorch.runtime is missing",
                     "reinstall: pip install --force-reinstall executorch==1.5.1")
    return Check("executorch", True, f"executorch {found}, torch {torch or 'missing'}")


def check_sdk() -> Check:
    found = sdk.find_litecore()
    if found is None:
        return Check("sdk", False, f"{sdk.SDK_ENV} not set (flow enn unavailable)",
                     "scripts/install-litecore.sh --dest ROOT --sha256 HEX --tarball "
                     f"ai-litecore-ubuntu2204-v1.1.0.tar.gz, then export {sdk.SDK_ENV}=ROOT; "
                     "or use the exynos image")
    if found.missing:
        return Check("sdk", False, f"{found.root}: missing {', '.join(found.missing)}",
                     "reinstall LITECORE 1.1.0 with scripts/install-litecore.sh")
    marker = found.root / ".litecore-version"
    label = marker.read_text().strip() if marker.is_file() else "version unknown"
    return Check("sdk", True, f"LITECORE {label} at {found.root}")


def check_enn_wrapper() -> Check:
    result = sdk.check_wrapper()
    names = " and ".join(m.rsplit(".", 1)[1] for m in sdk.WRAPPER_MODULES)
    if result.ok:
        return Check("enn-wrapper", True, f"{names} import with LD_LIBRARY_PATH="
                     f"{result.library_path} (flow enn available)")
    where = f" (LD_LIBRARY_PATH={result.library_path})" if result.library_path else ""
    return Check("enn-wrapper", False, f"{names} do not import{where}: {result.error} "
                 "(flow enn unavailable)", result.fixes[0] if result.fixes else "",
                 result.fixes[1:])


def _adb_connection(address: str) -> socket.socket:
    """A connection to the adb server at `HOST:PORT` or `localfilesystem:PATH`."""
    if address.startswith("localfilesystem:"):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(2.0)
        try:
            conn.connect(address.removeprefix("localfilesystem:"))
        except OSError:
            conn.close()
            raise
        return conn
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=2.0)


def _adb_request(address: str, request: bytes) -> bytes | None:
    """One adb host request (`host:version`, `host:devices`); its payload, or None when no
    server answers (never starts one)."""
    try:
        with _adb_connection(address) as conn:
            conn.settimeout(2.0)
            conn.sendall(b"%04x" % len(request) + request)
            reply = b""
            while chunk := conn.recv(65536):
                reply += chunk
                if len(reply) >= 8 and len(reply) >= 8 + int(reply[4:8], 16):
                    break
    except (OSError, ValueError):
        return None
    if not reply.startswith(b"OKAY") or len(reply) < 8:
        return None
    return reply[8:8 + int(reply[4:8], 16)]


def _adb_server_version(address: str) -> int | None:
    """The adb server's protocol version, or None when nothing answers (never starts one)."""
    payload = _adb_request(address, b"host:version")
    return int(payload, 16) if payload else None


def _adb_devices(address: str) -> list[str] | None:
    """`SERIAL STATE` of each device the server sees; None when it does not answer."""
    payload = _adb_request(address, b"host:devices")
    if payload is None:
        return None
    return [" ".join(line.split()) for line in payload.decode(errors="replace").splitlines()
            if line.strip()]


def check_adb(lab_server: str | None = None) -> Check:
    from adbutils._utils import adb_path

    from hil.adbaddress import DEFAULT_SERVER, OWN_SERVER, server_choice

    try:
        path = adb_path()
        first = subprocess.run([path, "version"], capture_output=True, text=True, timeout=10,
                               check=False).stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("adb", False, f"adb does not run: {cause_in_words(exc)}", "apt-get install adb")
    label = first[1] if len(first) > 1 else (first[0] if first else "version unknown")
    client = f"{path} ({label.strip()})"
    lab = server_choice(lab_server)
    if lab == OWN_SERVER:
        return Check("adb", True, f"{client}; --adb-server own: hil starts its own server for "
                     "every board, USB boards included (right only where no other adb server "
                     "runs, e.g. a container with the USB bus)")
    address = lab or DEFAULT_SERVER
    port = address.rpartition(":")[2]
    protocol = _adb_server_version(address)
    devices = _adb_devices(address) if protocol is not None else None
    seen = (f"protocol {protocol}, sees {len(devices or [])}"
            + (": " + ", ".join(devices) if devices else "")) if protocol is not None else ""
    if lab:
        if protocol is None:
            return Check("adb", False, f"{client}; the lab's adb server {lab} (--adb-server or "
                         "adb's ADB_SERVER_SOCKET / ANDROID_ADB_SERVER_ADDRESS/PORT) does not answer",
                         "start it on its host (adb start-server); for another machine's "
                         f"server use an SSH tunnel: ssh -N -L {port}:127.0.0.1:5037 HOST, then "
                         f"--adb-server 127.0.0.1:{port}")
        return Check("adb", True, f"{client}; hil uses the lab's adb server {lab} as a client "
                     f"for every board it does not start ({seen}); virtual boards: a private "
                     "server per run")
    host_server = (f"the host's adb server {address} ({seen})" if protocol is not None
                   else f"no adb server at {address} (USB boards need it: adb start-server)")
    return Check("adb", True, f"{client}; USB boards: {host_server}; virtual and HOST:PORT "
                 "boards: a private server per run")


def check_runner(runner: str | None) -> Check:
    path = runner or os.environ.get("HIL_RUNNER")
    if not path:
        return Check("runner", False, "no enn_executor_runner (--runner or $HIL_RUNNER); "
                     "virtual boards do not need one",
                     "scripts/build-enn.sh --sdk ROOT --build android --ndk NDK_R28C_DIR (or "
                     "--ndk-url URL) --out OUT, then --runner OUT/runner/enn_executor_runner; "
                     "or the exynos image")
    file = Path(path)
    if not file.is_file():
        return Check("runner", False, f"{file}: not found", "check --runner / $HIL_RUNNER")
    header = file.read_bytes()[:20]
    if header[:4] != b"\x7fELF" or int.from_bytes(header[18:20], "little") != ELF_MACHINE_AARCH64:
        return Check("runner", False, f"{file}: not an aarch64 ELF executable",
                     "build it for Android arm64-v8a (build.sh --build android)")
    return Check("runner", True, f"{file} (aarch64 ELF, {file.stat().st_size} B)")


def check_bwrap() -> Check:
    path = shutil.which("bwrap")
    if path is None:
        return Check("bwrap", False, "bubblewrap not installed (virtual boards need it)",
                     "apt-get install bubblewrap")
    probe = _bwrap_probe(path, "--unshare-ipc", "--unshare-net")  # a board shell's namespaces
    if probe:
        return Check("bwrap", False, f"{path} cannot create a sandbox: {probe}",
                     "in a container: --security-opt seccomp=unconfined (non-root user) or also "
                     "--cap-add SYS_ADMIN --cap-add NET_ADMIN (root); hil replicate adds these for "
                     "virtual boards")
    pids = _bwrap_probe(path, "--unshare-pid", "--unshare-ipc", "--unshare-net")
    if pids:  # a container run as a non-root user: its masked /proc (PidNamespace)
        return Check("bwrap", True, f"{path} (sandbox works; no pid namespace of the board's own: "
                                    f"{pids}: its shells share this one)")
    return Check("bwrap", True, f"{path} (sandbox works)")  # a pid namespace of the board's own too


def _bwrap_probe(path: str, *namespaces: str) -> str:
    """Why bwrap cannot run a sandbox with these namespaces ("" when it can)."""
    probe = subprocess.run([path, *namespaces, "--ro-bind", "/", "/", "--proc", "/proc",
                            "--dev", "/dev", "true"],
                           capture_output=True, text=True, timeout=20, check=False)
    if probe.returncode == 0:
        return ""
    return probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "failed"


def check_docker() -> Check:
    try:
        from docker.errors import DockerException

        import docker
    except ImportError:
        return Check("docker", False, "docker SDK not installed", "pip install 'docker>=7,<8'")
    try:
        client = docker.from_env(timeout=5)
        server = client.version()
    except DockerException as exc:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        return Check("docker", False, f"no engine at {where}: {cause_in_words(exc)[:160]}",
                     "start dockerd (or set DOCKER_HOST); only needed for hil replicate")
    return Check("docker", True, f"engine {server.get('Version', '?')} at "
                 f"{os.environ.get('DOCKER_HOST', 'the default socket')}")


CHECKS: dict[str, Callable[[Options], Check]] = {
    "executorch": lambda options: check_executorch(),
    "sdk": lambda options: check_sdk(),
    "enn-wrapper": lambda options: check_enn_wrapper(),
    "adb": lambda options: check_adb(options.adb_server),
    "runner": lambda options: check_runner(options.runner),
    "bwrap": lambda options: check_bwrap(),
    "docker": lambda options: check_docker(),
}
"""Every component, in report order."""

DEFAULT_REQUIRED = ("executorch", "adb", "bwrap")
"""What `hil run --board virtual` needs."""


def diagnose(options: Options | None = None) -> list[Check]:
    """Run every check."""
    options = options or Options()
    return [check(options) for check in CHECKS.values()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `hil doctor` options."""
    parser.add_argument("--runner", metavar="PATH",
                        help="enn_executor_runner to check (default: $HIL_RUNNER)")
    parser.add_argument("--adb-server", metavar="HOST:PORT",
                        help="the lab's adb server to look at (default: $HIL_ADB_SERVER, "
                             "ADB_SERVER_SOCKET or ANDROID_ADB_SERVER_ADDRESS/PORT, else 127.0.0.1:5037)")
    parser.add_argument("--require", action="append", default=[], metavar="NAME[,NAME]",
                        help=f"components that must be ok (default: {','.join(DEFAULT_REQUIRED)}); "
                             f"one of {', '.join(CHECKS)}, or all")


def required(values: Sequence[str]) -> tuple[str, ...]:
    """The `--require` values, validated; the default set when none is given."""
    names = [n.strip() for value in values for n in value.split(",") if n.strip()]
    if "all" in names:
        return tuple(CHECKS)
    for name in names:
        if name not in CHECKS:
            raise UsageError(f"--require: unknown component {name!r} (one of {', '.join(CHECKS)}, all)")
    return tuple(dict.fromkeys(names)) or DEFAULT_REQUIRED


def command(args: argparse.Namespace) -> int:
    """`hil doctor`: one line per component; exit 3 when a required one is not ok."""
    needed = required(args.require)
    bad = []
    for check in diagnose(Options(args.runner, args.adb_server)):
        state = "ok" if check.ok else ("MISSING" if check.name in needed else "missing")
        sys.stdout.write(f"{state:<8} {check.name:<12} {check.detail}\n")
        if not check.ok:
            sys.stdout.write(f"{'':<8} {'':<12} fix: {check.fix}\n")
            for more in check.more:
                sys.stdout.write(f"{'':<8} {'':<12} then: {more}\n")
            if check.name in needed:
                bad.append(check.name)
    if bad:
        sys.stderr.write(f"hil doctor: required but not ok: {', '.join(bad)}\n")
        return EXIT_USAGE
    return 0
