"""Fault SPECs: what each one means, when it fires, and one clear line for a bad one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hil.errors import UsageError
from hil.virtual.faults import Fault, FaultPlan, parse_fault

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("spec", "fault"), [
    ("drop,on=push", Fault("drop", on="push")),
    ("drop,on=pull,path=*/output_0.bin", Fault("drop", on="pull", path="*/output_0.bin")),
    ("freeze", Fault("freeze", on="exec")),
    ("freeze,on=now", Fault("freeze", on="now")),
    ("crash", Fault("crash", on="exec", signal=11)),
    ("crash,signal=SIGABRT", Fault("crash", on="exec", signal=6)),
    ("hang,after=2,times=0", Fault("hang", on="exec", after=2, times=0)),
    ("storage-full,path=*.pte", Fault("storage-full", on="push", path="*.pte")),
    ("panic,text=SError Interrupt", Fault("panic", on="exec", text="SError Interrupt")),
    ("slow,delay=0.2", Fault("slow", delay=0.2)),
    ("wrong-chipset", Fault("wrong-chipset")),
])
def test_specs_parse(spec: str, fault: Fault) -> None:
    assert parse_fault(spec) == fault


@pytest.mark.parametrize(("spec", "message"), [
    ("melt", r"unknown kind 'melt'"),
    ("drop", r"on=\?: expected one of push, exec, pull, now"),
    ("crash,on=push", r"unknown option 'on=push' \(allowed: after, signal, times\)"),
    ("crash,signal=KILL", r"signal='KILL' \(SEGV or ABRT\)"),
    ("hang,after=-1", r"after='-1' is not a non-negative integer"),
    ("slow,delay=99", r"delay='99': seconds in \[0, 10\]"),
    ("wrong-chipset,on=exec", r"unknown option 'on=exec' \(allowed: none\)"),
])
def test_bad_specs_name_the_field(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_fault(spec)


def test_event_faults_fire_after_n_and_the_given_number_of_times() -> None:
    plan = FaultPlan([parse_fault("hang,after=1,times=2"), parse_fault("drop,on=push,path=*.pte")])
    assert [f.kind for f in plan.fire("exec")] == []
    assert [f.kind for f in plan.fire("exec")] == ["hang"]
    assert [f.kind for f in plan.fire("push", "/d/input_0.bin")] == []
    assert [f.kind for f in plan.fire("push", "/d/model.pte")] == ["drop"]
    assert [f.kind for f in plan.fire("exec")] == ["hang"]
    assert plan.fire("exec") == [] and plan.fire("push", "/d/model.pte") == []
    assert plan.describe() == []


def test_state_faults_hold_until_cleared() -> None:
    plan = FaultPlan([parse_fault("slow,delay=0.1")])
    assert plan.fire("exec") == []
    assert plan.state("slow") == Fault("slow", delay=0.1)
    plan.clear()
    assert plan.state("slow") is None


def test_clearing_one_kind_keeps_the_others_armed() -> None:
    plan = FaultPlan([parse_fault("slow"), parse_fault("readonly-data"), parse_fault("hang,after=1")])
    plan.fire("exec")  # the hang's first matching event passes
    plan.clear("slow")
    assert plan.state("slow") is None and plan.state("readonly-data") is not None
    assert [f.kind for f in plan.fire("exec")] == ["hang"]  # its count was kept


def test_virtual_board_rejects_a_bad_fault_with_exit_3(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "hil", "virtual-board", "--fault", "drop"],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 3
    assert done.stderr == "hil: error: --fault 'drop': on=?: expected one of push, exec, pull, now\n"
    assert list(tmp_path.iterdir()) == []  # no board folder made for a board that never ran


def test_a_board_without_root_removes_its_temporary_folder_when_it_exits(tmp_path: Path) -> None:
    board = subprocess.Popen([sys.executable, "-m", "hil", "virtual-board", "--port", "0"],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        assert board.stdout is not None
        ready = board.stdout.readline().decode()
        root = Path(re.search(r" root=(\S+) ", ready).group(1))  # type: ignore[union-attr]
        assert root.parent == tmp_path and (root / "fs").is_dir()
    finally:
        board.send_signal(signal.SIGTERM)
        assert board.wait(timeout=60) == 0
    assert not root.exists()
