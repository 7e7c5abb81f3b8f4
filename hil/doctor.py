"""`hil doctor`: what this machine (or image) has for hil, what is missing, how to fix it.

Each check is cheap and imports nothing heavy: package versions come from metadata, the
ENN wrapper from `importlib.util.find_spec`, adb and docker from short probes.
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
from hil.errors import UsageError
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
                     f"scripts/install-litecore.sh, then export {sdk.SDK_ENV}=ROOT; or use the "
                     "exynos image")
    if found.missing:
        return Check("sdk", False, f"{found.root}: missing {', '.join(found.missing)}",
                     "reinstall LITECORE 1.1.0 with scripts/install-litecore.sh")
    marker = found.root / ".litecore-version"
    label = marker.read_text().strip() if marker.is_file() else "version unknown"
    return Check("sdk", True, f"LITECORE {label} at {found.root}")


def check_enn_wrapper() -> Check:
    if sdk.enn_adaptor_available():
        return Check("enn-wrapper", True, sdk.ADAPTOR_MODULE)
    return Check("enn-wrapper", False, f"{sdk.ADAPTOR_MODULE} not built (flow enn unavailable)",
                 "scripts/build-enn.sh --sdk $EXYNOS_AI_LITECORE_ROOT --build x86_64")


def _adb_server_version(host: str, port: int) -> int | None:
    """The adb server's protocol version, or None when nothing answers (never starts one)."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as conn:
            conn.sendall(b"000chost:version")
            reply = conn.recv(12)
    except OSError:
        return None
    if not reply.startswith(b"OKAY") or len(reply) < 12:
        return None
    return int(reply[8:12], 16)


def check_adb() -> Check:
    from adbutils._utils import adb_path

    try:
        path = adb_path()
        first = subprocess.run([path, "version"], capture_output=True, text=True, timeout=10,
                               check=False).stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("adb", False, f"adb does not run: {exc}", "apt-get install adb")
    host = os.environ.get("ANDROID_ADB_SERVER_HOST", "127.0.0.1")
    port = int(os.environ.get("ANDROID_ADB_SERVER_PORT", "5037"))
    protocol = _adb_server_version(host, port)
    server = (f"server on {host}:{port} (protocol {protocol})" if protocol is not None
              else f"no server on {host}:{port} (hil run starts its own)")
    label = first[1] if len(first) > 1 else (first[0] if first else "version unknown")
    return Check("adb", True, f"{path} ({label.strip()}); {server}")


def check_runner(runner: str | None) -> Check:
    path = runner or os.environ.get("HIL_RUNNER")
    if not path:
        return Check("runner", False, "no enn_executor_runner (--runner or $HIL_RUNNER); "
                     "virtual boards do not need one",
                     "scripts/build-enn.sh --build android, or the exynos image")
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
    probe = subprocess.run([path, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"],
                           capture_output=True, text=True, timeout=20, check=False)
    if probe.returncode != 0:
        reason = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "failed"
        return Check("bwrap", False, f"{path} cannot create a sandbox: {reason}",
                     "in a container: --security-opt seccomp=unconfined (non-root user) or also "
                     "--cap-add SYS_ADMIN (root); hil replicate adds these for virtual boards")
    return Check("bwrap", True, f"{path} (sandbox works)")


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
        return Check("docker", False, f"no engine at {where}: {str(exc).splitlines()[0][:160]}",
                     "start dockerd (or set DOCKER_HOST); only needed for hil replicate")
    return Check("docker", True, f"engine {server.get('Version', '?')} at "
                 f"{os.environ.get('DOCKER_HOST', 'the default socket')}")


CHECKS: dict[str, Callable[[str | None], Check]] = {
    "executorch": lambda runner: check_executorch(),
    "sdk": lambda runner: check_sdk(),
    "enn-wrapper": lambda runner: check_enn_wrapper(),
    "adb": lambda runner: check_adb(),
    "runner": check_runner,
    "bwrap": lambda runner: check_bwrap(),
    "docker": lambda runner: check_docker(),
}
"""Every component, in report order."""

DEFAULT_REQUIRED = ("executorch", "adb", "bwrap")
"""What `hil run --board virtual` needs."""


def diagnose(runner: str | None = None) -> list[Check]:
    """Run every check."""
    return [check(runner) for check in CHECKS.values()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `hil doctor` options."""
    parser.add_argument("--runner", metavar="PATH",
                        help="enn_executor_runner to check (default: $HIL_RUNNER)")
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
    for check in diagnose(args.runner):
        state = "ok" if check.ok else ("MISSING" if check.name in needed else "missing")
        sys.stdout.write(f"{state:<8} {check.name:<12} {check.detail}\n")
        if not check.ok:
            sys.stdout.write(f"{'':<8} {'':<12} fix: {check.fix}\n")
            if check.name in needed:
                bad.append(check.name)
    if bad:
        sys.stderr.write(f"hil doctor: required but not ok: {', '.join(bad)}\n")
        return EXIT_USAGE
    return 0
