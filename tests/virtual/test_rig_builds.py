"""The test rig's builds (what `hil bisect` is tested with): firmware fault lines in a system
image, runner stand-ins carrying their own settings, a relative slowdown, a seeded jitter and a
miscompute that fires on a share of the execs. End to end on boards: tests/bisection."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.errors import UsageError
from hil.virtual.device import RUNNER_FRONT, Device
from hil.virtual.executor import WarmExecutor
from hil.virtual.faults import parse_fault
from hil.virtual.images import build_properties, firmware_faults
from hil.virtual.runner_build import build_faults, is_stand_in, settings_of, stand_in
from tests.board_files import aarch64_elf


def test_a_system_images_fault_lines_are_its_firmware_faults_and_change_its_build() -> None:
    head = b"ro.build.fingerprint=x/y/z:15/B1/1:user/release-keys\nhil.virtual.fault=miscompute,op=relu\n" \
           b"hil.virtual.fault=jitter,rel=0.1\nnot.a.fault=slow\n"
    assert firmware_faults(head) == ["miscompute,op=relu", "jitter,rel=0.1"]
    assert firmware_faults(b"\0" * (64 << 10) + b"\nhil.virtual.fault=slow\n") == []  # past the head
    props = build_properties({"system": head}, "n", "d")
    assert props["ro.build.fingerprint"] == "x/y/z:15/B1/1:user/release-keys"


def test_a_runner_stand_in_carries_its_settings_and_a_board_keeps_it_as_pushed(tmp_path: Path) -> None:
    data = stand_in(["slow,on=exec,factor=1.2", "jitter,rel=0.05,seed=7"])
    assert data.startswith(RUNNER_FRONT.read_bytes()) and is_stand_in(data)
    assert settings_of(data) == ["slow,on=exec,factor=1.2", "jitter,rel=0.05,seed=7"]
    assert [f.kind for f in build_faults(settings_of(data) + ["drop,on=push"])] == ["slow", "jitter"]
    assert not is_stand_in(data + b"print('more')\n") and settings_of(RUNNER_FRONT.read_bytes()) == []
    with pytest.raises(UsageError, match="only with on=exec"):
        stand_in(["slow,factor=1.2"])
    device = Device(tmp_path / "board", "E9955", "rig")
    device.prepare()
    runner = "/data/local/tmp/enn_executor_runner"
    pushed = device.resolve(runner)
    pushed.parent.mkdir(parents=True, exist_ok=True)
    pushed.write_bytes(data)
    pushed.chmod(0o755)
    assert device._on_exec(runner, pushed) == 0  # noqa: SLF001 - what the exec guard asks
    assert pushed.read_bytes() == data  # a stand-in is a script: it runs as itself
    pushed.write_bytes(aarch64_elf(b"an aarch64 runner"))
    assert device._on_exec(runner, pushed) == 0  # noqa: SLF001
    assert pushed.read_bytes() == RUNNER_FRONT.read_bytes()  # an Android runner runs as hil's front


def test_factor_jitter_and_p_parse_and_draw_the_same_on_every_board(tmp_path: Path) -> None:
    slow = parse_fault("slow,on=exec,factor=1.2")
    assert (slow.factor, slow.delay) == (1.2, 0.0)  # relative alone: no fixed delay
    for spec, error in (("slow,on=exec,factor=0.5", r"\[1, 100\]"), ("jitter,rel=-1", r"\[0, 10\]"),
                        ("miscompute,p=2", r"\[0, 1\]")):
        with pytest.raises(UsageError, match=error):
            parse_fault(spec)
    jitter, flaky = parse_fault("jitter,rel=0.05,seed=3"), parse_fault("miscompute,op=relu,p=0.3,seed=5")
    draws = []
    for board in ("a", "b"):
        executor = WarmExecutor(tmp_path / board, tmp_path / board / "executor.sock")
        draw = executor._jitter(jitter)  # noqa: SLF001 - what the board's runner execs draw
        draws.append(([draw() for _ in range(200)], [executor._fires(flaky) for _ in range(1000)]))  # noqa: SLF001
    assert draws[0] == draws[1]  # seeded: every board draws the same
    extra, fired = draws[0]
    assert all(value >= 0 for value in extra) and 0.02 < sum(extra) / len(extra) < 0.06  # E|z| x 0.05 = 0.04
    assert 0.25 < sum(fired) / len(fired) < 0.35
