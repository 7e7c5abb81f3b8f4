"""Build the hil image and run hil inside it with board access.

`hil replicate` and, through it, `action.yml` use this module, so a CI run and a run on a
desk are the same `docker run`. Two halves:

- **build**: the build context is an allowlist (`.dockerignore`) plus optional extra CA
  certificates and a LITECORE tarball, packed into a normalised tar; its SHA-256, the target and the build
  arguments name the image (`exynos-hil:host-<12 hex>`), and a present tag is not rebuilt.
  The `host` target goes through the docker SDK (the engine's builder). Secrets (the
  LITECORE API key) need BuildKit, which the SDK cannot drive: those builds run the docker
  CLI with `DOCKER_BUILDKIT=1`, the secret passed as `--secret id=ID,env=NAME` so its value
  stays in the environment and never in an argument, a log or the image.
- **run**: `RunSpec` describes one containerised hil command; `run_argv` renders it as a
  `docker run` line and `run_container` performs it through the SDK with the same options
  (workspace mount, board access, environment passed by name, streamed logs).

Board access: `host-adb` (`--network host`: hil in the container is a client of the host's
adb server, 127.0.0.1:5037 unless adb's ADB_SERVER_SOCKET or ANDROID_ADB_SERVER_ADDRESS/PORT
say otherwise, and reaches network boards),
`usb` (`/dev/bus/usb` and the device-cgroup rule `c 189:* rmw`: the container's own adb
server owns the USB boards, so the host's must be stopped), `network` (network boards only:
docker's network, the container's own adb server), `none` (virtual boards only). Every
container runs with `no-new-privileges`.
With real-board access the host's lease folder (`hil.board.lease`) is mounted too, so runs
in containers and on the host share one owner per board. Virtual boards sandbox device
shells with bubblewrap, which needs user namespaces inside
the container: `--security-opt seccomp=unconfined` for a non-root user (plus
`apparmor=unconfined` on AppArmor hosts), and `--cap-add SYS_ADMIN --cap-add NET_ADMIN` as root.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import shlex
import subprocess
import tarfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil.board.lease import DEFAULT_LEASE_DIR, ensure_lease_dir, lease_dir
from hil.errors import InfraError, UsageError, cause_in_words

log = logging.getLogger(__name__)

IMAGE_NAME = "exynos-hil"
TARGETS = ("host", "exynos")
"""The images the Dockerfile is for; its other stages are steps towards `exynos`."""
ACCESS_MODES = ("host-adb", "usb", "network", "none")
WORKSPACE = "/workspace"
"""Where the workspace is mounted and hil runs."""
IMAGE_USER_UID = 1000
"""The image's own non-root user (`hil`)."""
CA_CERT_DIR = "docker/ca-certificates"
"""Build-context folder whose `*.crt` files the image trusts."""
LITECORE_DIR = "docker/litecore"
"""Build-context folder where the exynos target looks for a LITECORE tarball."""
USB_CGROUP_RULE = "c 189:* rmw"
"""USB character devices (major 189): survives re-enumeration, unlike `--device`."""
DEFAULT_ENV = (
    "CI", "GITHUB_ACTIONS", "GITHUB_SHA", "GITHUB_REF", "GITHUB_REPOSITORY", "GITHUB_RUN_ID",
    "GITHUB_RUN_ATTEMPT", "GITHUB_SERVER_URL", "GITHUB_JOB",
)
"""Variables passed by name into every run when they are set."""
LABGRID_ENV = ("LG_COORDINATOR", "LG_USERNAME")
"""labgrid's coordinator and user name, passed by name when set. Not LG_HOSTNAME: a holder is
judged dead by its PID on its host, and a container's PIDs are its own, so each container
keeps its own host name (docker's) and never takes over another container's place."""
ADB_ENV = (
    "ADB_SERVER_SOCKET", "ANDROID_ADB_SERVER_ADDRESS", "ANDROID_ADB_SERVER_PORT",
    "ANDROID_ADB_SERVER_HOST",
)
"""adb's variables naming the host's adb server and adbutils' alias (`hil.adbaddress.SERVER_ENV`),
passed by name."""
CACHE_DIR = "/var/cache/exynos-hil"
"""Where `hil replicate --cache-dir` binds the host's lowering cache in the container."""
HOST_ADB_SERVER_PORT = "5037"
"""The host's own adb server (adb's default port), used in `host-adb` mode unless the
host's ADB_SERVER_SOCKET or ANDROID_ADB_SERVER_ADDRESS/_HOST/_PORT name another."""
BOARD_ACCESS = ("host-adb", "usb", "network")
"""Modes that reach real boards (and so share the host's leases)."""

LogSink = Callable[[str], None]


def repo_root() -> Path | None:
    """The checkout hil runs from, when it holds the Dockerfile (None for a wheel install)."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "Dockerfile").is_file() else None


# -- build ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildSpec:
    """One image build."""

    context: Path
    """The folder holding the Dockerfile and `.dockerignore`."""
    target: str = "host"
    """`host` or `exynos`."""
    build_args: tuple[tuple[str, str], ...] = ()
    """`--build-arg` pairs; part of the tag (never put credentials here)."""
    ca_certs: tuple[Path, ...] = ()
    """Extra CA certificates (`.crt`, PEM) added to the context's CA folder."""
    litecore_tarball: Path | None = None
    """A LITECORE tarball added to the context's `docker/litecore/` (target exynos)."""
    secrets: tuple[tuple[str, str], ...] = ()
    """BuildKit secrets as (id, environment variable holding the value); not in the tag."""
    network_host: bool = False
    """Build with `--network host` (a wheelhouse or index served on 127.0.0.1)."""

    def __post_init__(self) -> None:
        dockerfile = self.context / "Dockerfile"
        if not dockerfile.is_file():
            raise UsageError(f"--context: no Dockerfile in {self.context}")
        if self.target not in dockerfile_stages(dockerfile.read_text()):
            raise UsageError(f"--target: {dockerfile} has no stage {self.target!r} "
                             f"(images: {', '.join(TARGETS)})")
        for cert in self.ca_certs:
            if not cert.is_file() or cert.suffix != ".crt":
                raise UsageError(f"--ca-cert: not a .crt file: {cert}")
        tarball = self.litecore_tarball
        if tarball is not None and (not tarball.is_file() or not tarball.name.endswith((".tar.gz", ".tgz"))):
            raise UsageError(f"--litecore-sdk: not a .tar.gz file: {tarball}")


def dockerfile_stages(text: str) -> list[str]:
    """The stage names (`FROM ... AS NAME`) of a Dockerfile."""
    return re.findall(r"(?im)^FROM\s+\S+\s+AS\s+([\w.-]+)\s*$", text)


def _context_entries(spec: BuildSpec) -> list[tuple[str, Path]]:
    """(name in the context, file on disk) for every file the build may read, sorted."""
    from docker.utils.build import exclude_paths

    ignore = spec.context / ".dockerignore"
    patterns = ignore.read_text().splitlines() if ignore.is_file() else []
    entries = {
        name: spec.context / name
        for name in exclude_paths(str(spec.context), patterns)
        if (spec.context / name).is_file() and not (spec.context / name).is_symlink()
    }
    for cert in spec.ca_certs:
        entries[f"{CA_CERT_DIR}/{cert.name}"] = cert
    if spec.litecore_tarball is not None:
        entries[f"{LITECORE_DIR}/{spec.litecore_tarball.name}"] = spec.litecore_tarball
    return sorted(entries.items())


def context_tar(spec: BuildSpec) -> bytes:
    """The build context as a tar with normalised owners, times and modes (so the same
    files always give the same bytes, whatever the checkout's timestamps)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in _context_entries(spec):
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def image_tag(spec: BuildSpec, context: bytes | None = None) -> str:
    """`exynos-hil:TARGET-HASH`: a hash of the context, the target and the build arguments."""
    digest = hashlib.sha256(context if context is not None else context_tar(spec))
    digest.update(f"\0target={spec.target}".encode())
    for key, value in sorted(spec.build_args):
        digest.update(f"\0{key}={value}".encode())
    return f"{IMAGE_NAME}:{spec.target}-{digest.hexdigest()[:12]}"


def _client() -> Any:
    from docker.errors import DockerException

    import docker

    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise InfraError(f"docker engine not reachable ({os.environ.get('DOCKER_HOST', 'default socket')}): "
                         f"{cause_in_words(exc)}") from exc
    return client


def image_present(tag: str, client: Any | None = None) -> bool:
    """True when the engine has the image `tag`."""
    from docker.errors import ImageNotFound

    try:
        (client or _client()).images.get(tag)
    except ImageNotFound:
        return False
    return True


def build_image(
    spec: BuildSpec, on_log: LogSink, client: Any | None = None, docker_cli: str = "docker"
) -> str:
    """Build `spec` unless its tag exists; return the tag. Log lines go to `on_log`.
    InfraError when the build fails (with its last lines)."""
    client = client or _client()
    context = context_tar(spec)
    tag = image_tag(spec, context)
    if image_present(tag, client):
        log.info("image %s present: not rebuilt", tag)
        on_log(f"image {tag} present: not rebuilt")
        return tag
    if spec.secrets or spec.target != "host":
        _build_buildkit(spec, context, tag, on_log, docker_cli)
    else:
        _build_sdk(spec, context, tag, on_log, client)
    return tag


def _build_sdk(spec: BuildSpec, context: bytes, tag: str, on_log: LogSink, client: Any) -> None:
    from docker.errors import APIError

    tail: list[str] = []
    try:
        stream = client.api.build(
            fileobj=io.BytesIO(context), custom_context=True, tag=tag, target=spec.target,
            buildargs=dict(spec.build_args), network_mode="host" if spec.network_host else None,
            rm=True, forcerm=True, decode=True,
        )
        for chunk in stream:
            if "error" in chunk:
                raise InfraError(f"image build failed: {chunk['error'].strip()} | {' | '.join(tail)}")
            text = chunk.get("stream", "")
            for line in text.splitlines():
                if line.strip():
                    on_log(line)
                    tail = (tail + [line.strip()])[-5:]
    except APIError as exc:
        raise InfraError(f"image build failed: {exc}") from exc


def buildkit_argv(spec: BuildSpec, tag: str, docker_cli: str = "docker") -> list[str]:
    """The `docker build` command (context on stdin) for a BuildKit build."""
    argv = [docker_cli, "build", "--progress", "plain", "--target", spec.target, "--tag", tag]
    if spec.network_host:
        argv += ["--network", "host"]
    for key, value in spec.build_args:
        argv += ["--build-arg", f"{key}={value}"]
    for secret_id, env_name in spec.secrets:
        argv += ["--secret", f"id={secret_id},env={env_name}"]
    return [*argv, "-"]


def _build_buildkit(spec: BuildSpec, context: bytes, tag: str, on_log: LogSink, docker_cli: str) -> None:
    for secret_id, env_name in spec.secrets:
        if not os.environ.get(env_name):
            raise UsageError(f"--secret {secret_id}={env_name}: ${env_name} is not set")
    argv = buildkit_argv(spec, tag, docker_cli)
    env = dict(os.environ, DOCKER_BUILDKIT="1")
    tail: list[str] = []
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
    except OSError as exc:
        raise InfraError(f"cannot run {docker_cli}: {cause_in_words(exc)}") from exc
    assert process.stdin is not None and process.stdout is not None
    stdin = process.stdin

    def feed() -> None:  # in a thread: the CLI may print while it still reads the context
        with contextlib.suppress(BrokenPipeError):
            stdin.write(context)
        with contextlib.suppress(BrokenPipeError):
            stdin.close()

    feeder = threading.Thread(target=feed, name="docker-build-context", daemon=True)
    feeder.start()
    for raw in process.stdout:
        line = raw.decode(errors="replace").rstrip()
        if line:
            on_log(line)
            tail = (tail + [line])[-12:]
    feeder.join()
    if process.wait() != 0:
        raise InfraError(f"image build failed (exit {process.returncode}): {' | '.join(tail)}")


# -- run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    """A host path bound into the container."""

    source: Path
    target: str
    read_only: bool = True

    @classmethod
    def parse(cls, text: str) -> Mount:
        """`SRC:DST[:ro|rw]` (default ro); UsageError otherwise."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not parts[0] or not parts[1].startswith("/") or (
            len(parts) == 3 and parts[2] not in ("ro", "rw")
        ):
            raise UsageError(f"--mount: expected SRC:/ABS/DST[:ro|rw], got {text!r}")
        source = Path(parts[0]).resolve()
        if not source.exists():
            raise UsageError(f"--mount: {source} does not exist")
        return cls(source, parts[1], len(parts) == 2 or parts[2] == "ro")


@dataclass(frozen=True)
class RunSpec:
    """One containerised hil command."""

    image: str
    args: tuple[str, ...]
    """hil's arguments (after the `hil` entry point), e.g. ("run", "--suite", "smoke")."""
    workspace: Path
    """Mounted read-write at /workspace, hil's working folder."""
    access: str = "host-adb"
    env: tuple[str, ...] = ()
    """Variables passed by name: their values never appear in the command line."""
    mounts: tuple[Mount, ...] = ()
    cache_dir: Path | None = None
    """The host's lowering cache, bound read-write at CACHE_DIR with HIL_CACHE_DIR set to it
    (hil replicate --cache-dir; default: the host's $HIL_CACHE_DIR): lowered artifacts
    survive the container and the CI job."""
    user: tuple[int, int] = field(default_factory=lambda: (os.getuid(), os.getgid()))
    apparmor: bool = field(default_factory=lambda: _apparmor_enabled())

    def __post_init__(self) -> None:
        if self.access not in ACCESS_MODES:
            raise UsageError(f"--access: unknown mode {self.access!r} (one of {', '.join(ACCESS_MODES)})")
        for name in self.env:
            if not name.isidentifier():
                raise UsageError(f"--env: {name!r} is not a variable name")

    @property
    def sandbox(self) -> bool:
        """True when the command starts virtual boards (bubblewrap needs namespaces)."""
        return uses_virtual_boards(self.args)

    @property
    def env_names(self) -> tuple[str, ...]:
        """Every variable passed by name, in order, without duplicates."""
        fixed = self.fixed_env
        adb = ADB_ENV if self.access == "host-adb" and "ANDROID_ADB_SERVER_PORT" not in fixed else ()
        names = [*DEFAULT_ENV, *LABGRID_ENV, *adb, *self.env]
        return tuple(n for n in dict.fromkeys(names) if n not in fixed)

    @property
    def fixed_env(self) -> dict[str, str]:
        """Literal variables: HOME for a user the image does not know; in `host-adb` mode
        the host's adb server when the host's environment names none; in `usb` mode hil's
        own server for every board (`hil.adbaddress.OWN_SERVER`)."""
        env = {} if self.user[0] == IMAGE_USER_UID else {"HOME": "/tmp"}  # noqa: S108 - in the container
        if self.access == "host-adb" and not any(os.environ.get(name) for name in ADB_ENV):
            env["ANDROID_ADB_SERVER_PORT"] = HOST_ADB_SERVER_PORT
        if self.access == "usb":
            env["HIL_ADB_SERVER"] = "own"  # the container's server owns the USB bus
        if self.cache_dir is not None:
            env["HIL_CACHE_DIR"] = CACHE_DIR
        return env

    @property
    def security_opt(self) -> list[str]:
        """no-new-privileges; with virtual boards also what bubblewrap needs (module docstring)."""
        sandbox = ["seccomp=unconfined", *(["apparmor=unconfined"] if self.apparmor else [])]
        return ["no-new-privileges", *(sandbox if self.sandbox else [])]

    @property
    def cap_add(self) -> list[str]:
        """Root's bubblewrap: mounts and namespaces (SYS_ADMIN), a shell's loopback (NET_ADMIN)."""
        return ["SYS_ADMIN", "NET_ADMIN"] if self.sandbox and self.user[0] == 0 else []

    @property
    def volumes(self) -> list[tuple[str, str, str]]:
        """(host, container, mode) binds: workspace, USB bus, extra mounts."""
        binds = [(str(self.workspace.resolve()), WORKSPACE, "rw")]
        if self.access == "usb":
            binds.append(("/dev/bus/usb", "/dev/bus/usb", "rw"))
        if self.access in BOARD_ACCESS:
            binds.append((str(lease_dir()), str(DEFAULT_LEASE_DIR), "rw"))
        binds += [(str(m.source), m.target, "ro" if m.read_only else "rw") for m in self.mounts]
        if self.cache_dir is not None:
            binds.append((str(self.cache_dir.resolve()), CACHE_DIR, "rw"))
        return binds


def uses_virtual_boards(args: Sequence[str]) -> bool:
    """True for `hil run`/`boards` with a virtual board (the default when neither --board
    nor --inventory is given), for `hil virtual-board`, and for `hil doctor` (it probes the
    sandbox a virtual board would get)."""
    if not args:
        return False
    if args[0] in ("virtual-board", "doctor"):
        return True
    if args[0] not in ("run", "boards"):
        return False
    boards: list[str] = []
    inventory = False
    for index, arg in enumerate(args):
        if arg == "--board" and index + 1 < len(args):
            boards.append(args[index + 1])
        elif arg.startswith("--board="):
            boards.append(arg.partition("=")[2])
        elif arg == "--inventory" or arg.startswith("--inventory="):
            inventory = True
    if not boards:
        return not inventory and args[0] == "run"
    return any(b == "virtual" or b.startswith("virtual:") for b in boards)


def _apparmor_enabled() -> bool:
    try:
        return Path("/sys/module/apparmor/parameters/enabled").read_text().strip() == "Y"
    except OSError:
        return False


def run_argv(spec: RunSpec, docker_cli: str = "docker") -> list[str]:
    """`spec` as one `docker run` command (what `hil replicate --print` prints)."""
    argv = [docker_cli, "run", "--rm", "--init", "--user", f"{spec.user[0]}:{spec.user[1]}"]
    if spec.access == "host-adb":
        argv += ["--network", "host"]
    elif spec.access == "usb":
        argv += ["--device-cgroup-rule", USB_CGROUP_RULE]
    for option in spec.security_opt:
        argv += ["--security-opt", option]
    for cap in spec.cap_add:
        argv += ["--cap-add", cap]
    for host, container, mode in spec.volumes:
        argv += ["-v", f"{host}:{container}:{mode}"]
    argv += ["-w", WORKSPACE]
    for key, value in spec.fixed_env.items():
        argv += ["-e", f"{key}={value}"]
    for name in spec.env_names:
        argv += ["-e", name]
    return [*argv, spec.image, *spec.args]


def format_command(argv: Iterable[str]) -> str:
    """A shell-safe, copy-pasteable command line."""
    return shlex.join(list(argv))


def run_container(spec: RunSpec, on_output: LogSink, client: Any | None = None) -> int:
    """Run `spec` through the docker SDK with the options `run_argv` prints; stream its
    output line by line to `on_output`; return the container's exit code (130 after
    Ctrl-C, once hil inside has flushed its results)."""
    from docker.errors import APIError, ImageNotFound

    client = client or _client()
    if spec.access in BOARD_ACCESS:
        ensure_lease_dir()  # else docker creates it root-owned and the container cannot lock
    environment = {name: os.environ[name] for name in spec.env_names if name in os.environ}
    environment.update(spec.fixed_env)
    try:
        container = client.containers.run(
            spec.image, list(spec.args), detach=True, init=True,
            user=f"{spec.user[0]}:{spec.user[1]}", working_dir=WORKSPACE,
            environment=environment,
            volumes={host: {"bind": target, "mode": mode} for host, target, mode in spec.volumes},
            network_mode="host" if spec.access == "host-adb" else None,
            device_cgroup_rules=[USB_CGROUP_RULE] if spec.access == "usb" else None,
            security_opt=spec.security_opt or None, cap_add=spec.cap_add or None,
        )
    except ImageNotFound as exc:
        raise UsageError(
            f"--image: {spec.image} not found (build it: hil replicate without --print)"
        ) from exc
    except APIError as exc:
        raise InfraError(f"docker run {spec.image}: {exc.explanation or exc}") from exc
    try:
        try:
            pending = ""
            for chunk in container.logs(stream=True, follow=True):
                pending += chunk.decode(errors="replace")
                *lines, pending = pending.split("\n")
                for line in lines:
                    on_output(line)
            if pending:
                on_output(pending)
            return int(container.wait()["StatusCode"])
        except KeyboardInterrupt:
            container.stop(timeout=30)
            container.wait()
            return 130
    finally:
        container.remove(force=True)
