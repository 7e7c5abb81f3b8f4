"""The virtual runner's loaded programs: parsed once by ExecuTorch's host runtime, kept for
the execs that follow (a real board re-reads the file; the board process keeps it warm)."""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.runner.pte import ProgramInfo, PteError, read_program
from hil.virtual.offhost import digest
from hil.virtual.program_ops import operator_base, program_op_names

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedProgram:
    """A parsed program: the host runtime's handle and what the runner reads of it."""

    program: Any
    info: ProgramInfo
    ops: frozenset[str] = frozenset()
    """Every op name the program executes (`program_ops.program_op_names`)."""
    digest: bytes = b""
    """The program's content key (`offhost.digest`)."""


class ProgramCache:
    """Loaded programs keyed by (host path, size, mtime_ns), least recent evicted;
    `by_content`: keyed by the file's content (the off-host mode: every case pushes the same
    program to a new folder, and it is parsed once)."""

    def __init__(self, max_programs: int = 8, by_content: bool = False) -> None:
        self._max = max_programs
        self._by_content = by_content
        self._programs: collections.OrderedDict[Any, LoadedProgram] = collections.OrderedDict()

    def load(self, path: Path) -> tuple[LoadedProgram, bool]:
        """The program at `path` and whether it was cached. OSError when the file cannot
        be read; PteError or RuntimeError when it does not parse."""
        from executorch.runtime import Runtime

        data: bytes | None = None
        if self._by_content:
            data = path.read_bytes()
            key: Any = digest(data)
        else:
            stat = path.stat()
            key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key in self._programs:
            self._programs.move_to_end(key)
            return self._programs[key], True
        data = path.read_bytes() if data is None else data
        loaded = LoadedProgram(Runtime.get().load_program(data), read_program(data), _op_names(data),
                               digest(data))
        if not self._by_content:
            for stale in [k for k in self._programs if k[0] == key[0]]:
                del self._programs[stale]
        self._programs[key] = loaded
        while len(self._programs) > self._max:
            self._programs.popitem(last=False)
        return loaded, False


def _op_names(data: bytes) -> frozenset[str]:
    """The program's op names; its kernels' only when a delegate payload does not decode."""
    try:
        return program_op_names(data)
    except PteError as error:
        log.warning("virtual runner: delegate ops not readable (%s): kernels only", error)
        return frozenset(operator_base(op) for op in read_program(data).operators)
