"""An Exynos board reached through adb (adbutils): real boards and virtual ones alike.

Device commands are argument lists quoted with `shlex.quote` and joined with `&&`; nothing a
case or a user supplies reaches a shell unquoted. Everything the board writes lives in the
run's workdir `/data/local/tmp/hil/<run-id>/`, removed by `cleanup()`.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import adbutils

from hil.errors import InfraError
from hil.lower.artifact import Artifact

log = logging.getLogger(__name__)

DEVICE_ROOT = "/data/local/tmp/hil"
RUNNER_NAME = "enn_executor_runner"
ADB_ERRORS = (adbutils.AdbError, EOFError, TimeoutError, ConnectionError, OSError)
"""What adbutils raises when a board or the link fails (see reference/adb-protocol.md)."""

CHIPSET_PROPS = ("ro.soc.model", "ro.hardware.chipname", "ro.board.platform")
"""Where the chipset is read from, in order of trust."""

_TIMING = re.compile(r"(\d+) inference took ([0-9.]+) ms, avg ([0-9.]+) ms")
_STAT_LINE = re.compile(r"^\s*(init|load|1st|avg)\s*:\s*([0-9.]+)", re.MULTILINE)


def chipset_from_props(props: dict[str, str]) -> str | None:
    """`S5E9955` / `s5e9955` → `E9955`; None when no property names an Exynos SoC."""
    for key in CHIPSET_PROPS:
        match = re.search(r"e(\d{4})", props.get(key, "").lower())
        if match:
            return f"E{match.group(1)}"
    return None


def device_command(*argvs: Sequence[str]) -> str:
    """Quote each argument list and chain them with `&&` (the only shell syntax used)."""
    return " && ".join(shlex.join(argv) for argv in argvs)


@dataclass(frozen=True)
class BoardInfo:
    """What a board says about itself once prepared."""

    name: str
    adb: str
    chipset: str | None
    virtual: bool
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Execution:
    """One runner execution of one artifact on one board."""

    exit_code: int
    """Shell exit status: 128+N when the runner died by signal N."""
    stdout: str
    stderr: str
    timed_out: bool
    """The runner ran past its deadline and was killed on the device."""
    outputs: tuple[Path | None, ...]
    """Pulled `output_<i>.bin` files; None where the board wrote none."""
    timings_s: dict[str, float]
    """Seconds spent in `push`, `exec`, `pull`."""
    latency_ms: dict[str, float] | None
    """`init`, `load`, `first`, `avg` from the runner's statistics and timing line."""


class AdbBoard:
    """A board behind an adbutils device: `prepare()`, `run(artifact)`, `cleanup()`."""

    def __init__(
        self,
        name: str,
        address: str,
        device: adbutils.AdbDevice,
        run_id: str,
        runner: Path,
        timeout_s: float,
    ) -> None:
        self.name = name
        self.address = address
        self.device = device
        self.workdir = posixpath.join(DEVICE_ROOT, run_id)
        self.runner = runner
        self.timeout_s = timeout_s
        self._cases_run = 0

    def _shell(self, argv_chain: Sequence[Sequence[str]], timeout: float) -> adbutils.ShellReturn:
        command = device_command(*argv_chain)
        try:
            return self.device.shell2(command, timeout=timeout, v2=True)
        except ADB_ERRORS as exc:
            raise InfraError(f"{self.name}: shell failed: {type(exc).__name__}: {exc}") from exc

    def properties(self) -> dict[str, str]:
        """All `getprop` properties."""
        result = self._shell([["getprop"]], timeout=30)
        props = dict(re.findall(r"^\[([^\]]+)\]: \[([^\]]*)\]", result.stdout, re.MULTILINE))
        if result.returncode != 0 or not props:
            raise InfraError(f"{self.name}: getprop failed (exit {result.returncode})")
        return props

    def prepare(self) -> BoardInfo:
        """Read the board's identity, create the run's workdir and install the runner."""
        props = self.properties()
        info = BoardInfo(
            name=self.name,
            adb=self.address,
            chipset=chipset_from_props(props),
            virtual=props.get("ro.hil.virtual") == "1",
            properties={k: v for k, v in props.items() if k.startswith(("ro.", "sys.boot"))},
        )
        result = self._shell([["mkdir", "-p", self.workdir]], timeout=30)
        if result.returncode != 0:
            raise InfraError(f"{self.name}: cannot create {self.workdir}: {result.stderr.strip()}")
        self._install_runner()
        return info

    def _install_runner(self) -> None:
        target = posixpath.join(self.workdir, RUNNER_NAME)
        local_sha = hashlib.sha256(self.runner.read_bytes()).hexdigest()
        result = self._shell([["sha256sum", target]], timeout=30)
        if result.returncode == 0 and result.stdout.split()[:1] == [local_sha]:
            return
        try:
            self.device.sync.push(self.runner, target, mode=0o755)
        except ADB_ERRORS as exc:
            raise InfraError(f"{self.name}: runner push failed: {exc}") from exc
        log.info("%s: runner installed at %s (sha256 %s)", self.name, target, local_sha[:12])

    def run(self, artifact: Artifact, slot: str, host_out: Path, iterations: int, warmup: int) -> Execution:
        """Push the artifact into `<workdir>/<slot>`, run it, pull outputs into `host_out`."""
        case_dir = posixpath.join(self.workdir, slot)
        files = [artifact.pte] + [artifact.input_file(i) for i in range(len(artifact.inputs))]
        start = time.perf_counter()
        try:
            for path in files:
                self.device.sync.push(path, posixpath.join(case_dir, path.name), mode=0o644)
        except ADB_ERRORS as exc:
            raise InfraError(f"{self.name}: push failed: {type(exc).__name__}: {exc}") from exc
        push_s = time.perf_counter() - start

        runner = [
            "timeout", "-s", "KILL", str(int(self.timeout_s)),
            posixpath.join(self.workdir, RUNNER_NAME),
            "--model", "model.pte",
            "--input", " ".join(p.name for p in files[1:]),
            "--output_path", "out",
            "--num_executions", str(iterations),
            "--warm_up", str(warmup),
            "--dump_statistics",
        ]  # fmt: skip
        start = time.perf_counter()
        result = self._shell(
            [["cd", case_dir], ["rm", "-rf", "out", "statistics.txt"], ["mkdir", "out"], runner],
            timeout=self.timeout_s + 30,
        )
        exec_s = time.perf_counter() - start
        timed_out = result.returncode == 128 + 9 and self.timeout_s > 0

        start = time.perf_counter()
        host_out.mkdir(parents=True, exist_ok=True)
        outputs: list[Path | None] = []
        if result.returncode == 0:
            for i in range(len(artifact.outputs)):
                outputs.append(self._pull(posixpath.join(case_dir, "out", f"output_{i}.bin"), host_out))
        statistics = self._pull(posixpath.join(case_dir, "statistics.txt"), host_out)
        pull_s = time.perf_counter() - start
        return Execution(
            exit_code=result.returncode,
            stdout=result.stdout,
            stderr=result.stderr,
            timed_out=timed_out,
            outputs=tuple(outputs),
            timings_s={"push": round(push_s, 4), "exec": round(exec_s, 4), "pull": round(pull_s, 4)},
            latency_ms=_latency(result.stderr, statistics),
        )

    def _pull(self, device_path: str, host_out: Path) -> Path | None:
        """Pull one file; None when the board has no such file."""
        try:
            data = self.device.sync.read_bytes(device_path)
        except adbutils.AdbError as exc:
            if "No such file" in str(exc) or "not found" in str(exc).lower():
                return None
            raise InfraError(f"{self.name}: pull of {device_path} failed: {exc}") from exc
        except ADB_ERRORS as exc:
            raise InfraError(f"{self.name}: pull of {device_path} failed: {exc}") from exc
        local = host_out / posixpath.basename(device_path)
        local.write_bytes(data)
        return local

    def cleanup(self) -> None:
        """Remove the run's workdir from the board (best effort: the board may be gone)."""
        try:
            self._shell([["rm", "-rf", self.workdir]], timeout=30)
        except InfraError as exc:
            log.warning("%s: cleanup of %s failed: %s", self.name, self.workdir, exc)


def _latency(stderr: str, statistics: Path | None) -> dict[str, float] | None:
    latency: dict[str, float] = {}
    if statistics is not None:
        text = statistics.read_text(encoding="utf-8", errors="replace")
        for key, value in _STAT_LINE.findall(text):
            latency["first" if key == "1st" else key] = float(value)
    match = _TIMING.search(stderr)
    if match and "avg" not in latency:
        latency["avg"] = float(match.group(3))
    return latency or None
