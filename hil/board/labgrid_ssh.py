"""labgrid's ssh side as hil uses it: a program run on an exporter's host, a file staged there,
and an isolated exporter's addresses reached through its proxy. Each is labgrid's own helper
(`sshmanager`, `ManagedFile`, `proxymanager`), so hil reaches a lab as labgrid's client and
drivers do.

```
run on host H    [ssh -x -o LogLevel=ERROR -o PasswordAuthentication=no -o ControlMaster=no
                  -o ControlPath=SOCKET H --] + each argument shlex-quoted
                 labgrid resource/common.py NetworkResource.command_prefix / wrap_command;
                 util/ssh.py: one ControlMaster per host, started on first use
                 (StrictHostKeyChecking=yes: H's key must be known), kept until close()
stage a file     labgrid util/managedfile.py ManagedFile: /var/cache/labgrid/USER/SHA256/NAME on H
                 (rsync over the same connection), or the file's own path when H sees the same
                 file there (NFS: same inode, size and mtime)
reach HOST:PORT  labgrid util/proxy.py proxymanager.get_host_and_port: when the exporter is
                 isolated (extra.proxy_required) or LG_PROXY is set, a local forward through the
                 proxy host (`ssh -O forward -L L:HOST:PORT`): localhost:L; else HOST:PORT as is
```

What labgrid itself needs, hil needs: `ssh` on PATH with key access to the exporter hosts (no
password prompt), their host keys known, and rsync on both ends for a file the exporter does not
share. labgrid's connection manager is not thread-safe: connections are opened and forwards
requested under one lock (`serialized`).
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hil.errors import InfraError

log = logging.getLogger(__name__)

_LOCK = threading.RLock()
_OPENED: set[str] = set()
"""Hosts this process opened a connection to (closed by close())."""


@contextmanager
def serialized() -> Iterator[None]:
    """Hold the lock every use of labgrid's ssh helpers takes (they are not thread-safe)."""
    with _LOCK:
        yield


def connect(host: str) -> None:
    """Open labgrid's connection to `host` now (InfraError saying why it cannot be)."""
    with _LOCK:
        _connection(host)


def ssh_host(host: str, extra: dict[str, Any] | None) -> str:
    """The host a remote resource's programs run on: its exporter's, or the exporter's proxy
    when the exporter is isolated (labgrid resource/common.py NetworkResource.command_prefix)."""
    if extra and extra.get("proxy_required") and extra.get("proxy"):
        return str(extra["proxy"])
    return host


def remote_argv(host: str, argv: Sequence[str]) -> list[str]:
    """`argv` as labgrid runs a program on `host`: its ssh prefix, `--`, each argument quoted
    for the remote shell (NetworkResource.wrap_command)."""
    with _LOCK:
        prefix = _connection(host).get_prefix()
    return [*prefix, "--", *(shlex.quote(arg) for arg in argv)]


def stage(host: str, path: Path) -> str:
    """The path on `host` of the local file `path`, copied there first unless the host sees the
    same file (labgrid's ManagedFile, as its AndroidFastbootDriver.flash stages an image)."""
    from labgrid.resource.common import NetworkResource
    from labgrid.util.managedfile import ManagedFile

    with _LOCK:
        _connection(host)  # opened here: the copy below only looks it up, in parallel with others
    try:
        managed = ManagedFile(str(path), NetworkResource(target=None, name=None, host=host))
        managed.sync_to_resource()
        return str(managed.get_remote_path())
    except Exception as exc:  # noqa: BLE001 - labgrid raises ExecutionError, OSError, ...
        raise InfraError(f"ssh {host}: staging {path.name} there failed: {_why(exc)}") from exc


def reach(host: str, port: int, extra: dict[str, Any] | None) -> tuple[str, int]:
    """Where this host connects to reach `host:port` of a resource: through the exporter's
    proxy when it is isolated (or LG_PROXY is set), else `host:port` itself."""
    if not ((extra and extra.get("proxy_required")) or os.environ.get("LG_PROXY")):
        return host, port
    from labgrid.resource.common import NetworkResource
    from labgrid.util.proxy import proxymanager

    resource = NetworkResource(target=None, name=None, host=host)
    resource.extra = dict(extra or {})
    via = ssh_host(host, extra) if extra and extra.get("proxy_required") else os.environ["LG_PROXY"]
    with _LOCK:
        _connection(via)
        try:
            local_host, local_port = proxymanager.get_host_and_port(resource, force_port=port)
        except Exception as exc:  # noqa: BLE001 - labgrid raises ExecutionError, CalledProcessError
            raise InfraError(f"ssh {via}: forwarding to {host}:{port} failed: {_why(exc)}") from exc
    log.info("labgrid: %s:%d through the proxy %s: %s:%d", host, port, via, local_host, local_port)
    return str(local_host), int(local_port)


def close() -> None:
    """Close the connections this process opened (their forwards end with them)."""
    from labgrid.util.ssh import sshmanager

    with _LOCK:
        hosts = sorted(_OPENED)
        _OPENED.clear()
        for host in hosts:
            try:
                sshmanager.close(host)
            except Exception as exc:  # noqa: BLE001 - closing: nothing left to do about it
                log.debug("ssh %s: close: %s", host, exc)


def _connection(host: str) -> Any:
    """labgrid's connection to `host`, opened on first use; InfraError when ssh cannot connect."""
    from labgrid.util.ssh import sshmanager

    try:
        connection = sshmanager.get(host)
        if not connection.isconnected():  # its master ended (the host rebooted, sshd restarted)
            sshmanager.remove_by_name(host)
            connection = sshmanager.get(host)
    except Exception as exc:  # noqa: BLE001 - labgrid raises ExecutionError, OSError, ...
        raise InfraError(f"ssh {host}: cannot connect (labgrid runs programs on an exporter's "
                         f"host over ssh, with a key and a known host key): {_why(exc)}") from exc
    _OPENED.add(host)
    return connection


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
