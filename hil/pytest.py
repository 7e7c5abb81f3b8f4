"""pytest plugin for lab users' own tests: `pytest -p hil.pytest [--hil-board SPEC] ...`.

```
session: hil_board ─► HeldBoard (hil/pool/held.py): lease, bring-up, recovery (the pool's)
each test using it: board identity ─► record_property-style user_properties (pytest's JUnit)
hil_board.run(program, inputs) ─► .pte + raw inputs pushed, the board's runner, outputs
                                ─► tensors (dtype and shape read from the program); the runner's
                                   log attached to the test (`hil_runner_log`)
```

Options (each defaults to the environment variable hil already reads): `--hil-board SPEC`
(`HIL_BOARD`, else `virtual`: a virtual board started and stopped for the session),
`--hil-inventory FILE` (`HIL_INVENTORY`), `--hil-adb-server HOST:PORT|own` (`HIL_ADB_SERVER`,
`ANDROID_ADB_SERVER_*`), `--hil-chipset` (`HIL_CHIPSET`, E9955), `--hil-runner PATH`
(`HIL_RUNNER`: a real board's enn_executor_runner), `--hil-runner-profile`, `--hil-board-wait S`,
`--hil-timeout S`. No labgrid option: hil has no labgrid source yet.

Not registered as an entry point on purpose: a plugin that loads into every pytest session of
every environment hil is installed in (labgrid's does) is a surprise; `-p hil.pytest`, or
`pytest_plugins = ["hil.pytest"]` in a conftest.py, is one explicit line.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

_BOARD = pytest.StashKey["HilBoard"]()
_ITEM = pytest.StashKey["pytest.Item"]()
_SCALAR_TYPES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
    7: "float64", 11: "bool",
}
"""ExecuTorch ScalarType codes of the outputs `run` can read back (numpy-known dtypes)."""


class RunFailed(AssertionError):
    """The runner failed on the board (not an infrastructure error): its exit and log."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hil", "exynos-hil board (the hil_board fixture)")
    group.addoption("--hil-board", metavar="SPEC",
                    help="virtual, a serial, HOST:PORT, SERIAL@HOST:PORT, an inventory name or a "
                         "labgrid place (labgrid:TAG=V,... or labgrid:place=NAME) "
                         "(default: $HIL_BOARD, else virtual)")
    group.addoption("--hil-inventory", metavar="FILE", help="board inventory (default: $HIL_INVENTORY)")
    group.addoption("--hil-labgrid", metavar="HOST:PORT",
                    help="the labgrid coordinator of labgrid: boards (default: $HIL_LABGRID, "
                         "else $LG_COORDINATOR)")
    group.addoption("--hil-adb-server", metavar="HOST:PORT|own",
                    help="the lab's adb server (default: $HIL_ADB_SERVER, ANDROID_ADB_SERVER_*)")
    group.addoption("--hil-chipset", metavar="E9955|E9965", help="default: $HIL_CHIPSET, else E9955")
    group.addoption("--hil-runner", metavar="PATH",
                    help="a real board's enn_executor_runner (default: $HIL_RUNNER)")
    group.addoption("--hil-runner-profile", metavar="upstream|hil", help="what the runner executes")
    group.addoption("--hil-board-wait", type=float, default=600.0, metavar="S",
                    help="how long to wait for a board another process holds (default: 600)")
    group.addoption("--hil-timeout", type=float, default=120.0, metavar="S",
                    help="longest runner execution (default: 120)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.config.stash[_ITEM] = item
    yield
    board = item.config.stash.get(_BOARD, None)
    if board is not None and "hil_board" in getattr(item, "fixturenames", ()):
        item.user_properties.extend(board.identity())


@pytest.fixture(scope="session")
def hil_board(request: pytest.FixtureRequest) -> Iterator[HilBoard]:
    """The session's board, leased until the session ends."""
    board = HilBoard.open(request.config)
    request.config.stash[_BOARD] = board
    try:
        yield board
    finally:
        request.config.stash[_BOARD] = None  # type: ignore[assignment]
        board.close()


class HilBoard:
    """One board for a pytest session: `run(program, inputs)`, `shell(*argv)`, `name`."""

    def __init__(self, config: pytest.Config, held: Any, folder: Path) -> None:
        self.config = config
        self.held = held
        self.folder = folder
        self._count = itertools.count()
        self.name = held.state()[1]
        record = next((r for r in held.pool.records if r.get("name") == self.name), {})
        self.record: dict[str, Any] = record
        """The board's record (as in results.json `run.boards`)."""

    @classmethod
    def open(cls, config: pytest.Config) -> HilBoard:
        from hil.adbaddress import server_choice
        from hil.errors import InfraError, UsageError
        from hil.pool.bringup import PoolOptions
        from hil.pool.held import ASSIGNED, HeldBoard, held_sources

        option = config.getoption
        spec = option("--hil-board") or os.environ.get("HIL_BOARD") or "virtual"
        runner = option("--hil-runner") or os.environ.get("HIL_RUNNER")
        folder = Path(tempfile.mkdtemp(prefix="hil-pytest-"))
        try:
            inventory = option("--hil-inventory") or os.environ.get("HIL_INVENTORY")
            labgrid = option("--hil-labgrid") or os.environ.get("HIL_LABGRID")
            held = HeldBoard(held_sources(inventory, spec, labgrid), PoolOptions(
                chipset=option("--hil-chipset") or os.environ.get("HIL_CHIPSET") or "E9955",
                run_id=f"pytest-{os.getpid()}", out_dir=folder, runner=Path(runner) if runner else None,
                timeout_s=option("--hil-timeout"), runner_profile=option("--hil-runner-profile"),
                adb_server=server_choice(option("--hil-adb-server")),
                board_wait_s=option("--hil-board-wait"),
            ))
        except UsageError as exc:
            raise pytest.UsageError(f"hil_board: {exc}") from None
        held.__enter__()
        kind, why = held.wait_settled()
        if kind != ASSIGNED:
            held.__exit__(None, None, None)
            raise InfraError(f"hil_board: no board ({spec}): {why}")
        return cls(config, held, folder)

    def close(self) -> None:
        self.held.__exit__(None, None, None)

    def identity(self) -> list[tuple[str, object]]:
        """The properties every test using the board carries in pytest's JUnit XML."""
        profile = (self.record.get("runner_profile") or {}).get("name")
        return [("hil_board", self.name), ("hil_board_adb", self.record.get("adb")),
                ("hil_board_virtual", self.record.get("virtual")),
                ("hil_chipset", self.record.get("chipset")), ("hil_runner_profile", profile)]

    def shell(self, *argvs: Sequence[str]) -> Any:
        """Argument lists chained with `&&` on the board (quoted): adbutils' ShellReturn."""
        return self.held.call(lambda board: board.shell(*argvs))

    def run(self, program: Any, inputs: Sequence[Any]) -> tuple[Any, ...]:
        """Run `program` (an ExecuTorch program manager, `.pte` bytes or a path) on `inputs`
        (tensors) with the board's runner; its outputs as tensors. RunFailed when the runner
        fails (its log is attached to the test either way); InfraError when the board does."""
        import torch

        from hil.lower.artifact import Artifact, TensorMeta
        data = _program_bytes(program)
        outputs = _output_meta(data)
        index = next(self._count)
        folder = self.folder / f"run-{index}"
        folder.mkdir()
        (folder / "model.pte").write_bytes(data)
        metas = []
        for i, tensor in enumerate(inputs):
            array = tensor.detach().contiguous().cpu().numpy()
            (folder / f"input_{i}.bin").write_bytes(array.tobytes())
            metas.append(TensorMeta(str(array.dtype), tuple(array.shape)))
        artifact = Artifact(folder=folder, flow="given", inputs=tuple(metas), outputs=outputs,
                            pte_bytes=len(data), delegated_calls=0)
        execution = self.held.call(lambda board: board.run(artifact, f"pytest-{index}", 1, 0))
        self._attach("hil_runner_log", execution.stdout + execution.stderr)
        if execution.exit_code != 0 or execution.timed_out or None in execution.outputs:
            logs = execution.logs
            reason = (logs[-1].reason if logs else "") or ("no output file" if execution.exit_code == 0
                                                            else "see hil_runner_log")
            raise RunFailed(f"{self.name}: the runner failed (exit {execution.exit_code}"
                            f"{', timed out' if execution.timed_out else ''}): {reason}")
        pairs = zip(execution.outputs, outputs, strict=True)
        return tuple(torch.from_numpy(_array(data, meta)) for data, meta in pairs)

    def _attach(self, name: str, value: object) -> None:
        item = self.config.stash.get(_ITEM, None)
        if item is not None:
            item.user_properties.append((name, value))


def _program_bytes(program: Any) -> bytes:
    if isinstance(program, bytes | bytearray):
        return bytes(program)
    if isinstance(program, str | os.PathLike):
        return Path(program).read_bytes()
    buffer = getattr(program, "buffer", None)  # ExecutorchProgramManager
    if buffer is None:
        raise TypeError("hil_board.run: expected a program manager, .pte bytes or a path, "
                        f"not {type(program).__name__}")
    return bytes(buffer)


def _output_meta(data: bytes) -> tuple[Any, ...]:
    """dtype and shape of method 0's outputs (the method the runner executes), from the
    program itself through the host runtime."""
    from executorch.runtime import Runtime

    from hil.lower.artifact import TensorMeta
    from hil.runner.pte import read_program

    meta = Runtime.get().load_program(data).metadata(read_program(data).method)
    outputs = []
    for i in range(meta.num_outputs()):
        info = meta.output_tensor_meta(i)
        name = _SCALAR_TYPES.get(int(info.dtype()))
        if name is None:
            raise TypeError(f"hil_board.run: output {i} has ScalarType {info.dtype()}, not readable here")
        outputs.append(TensorMeta(name, tuple(info.sizes())))
    return tuple(outputs)


def _array(data: bytes | None, meta: Any) -> Any:
    import numpy as np

    assert data is not None
    return np.frombuffer(data, dtype=meta.dtype).reshape(meta.shape).copy()
