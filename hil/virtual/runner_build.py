"""Runner builds of the test rig: virtual runner stand-ins that make two runner builds differ.

A real `enn_executor_runner` is an aarch64 binary a virtual board cannot execute. What the
test rig builds instead, where a real build writes the binary, is a *stand-in*: the virtual
runner front (`runner_front.py`) whole, followed by lines

    # hil-virtual-runner-build: SPEC

each naming one fault SPEC (`faults.py`) that every exec of this very file suffers, e.g.
`slow,on=exec,factor=1.2` (every inference 20 % slower) or `miscompute,op=linear`. The setting
travels in the runner file's own bytes, not in how it reached the board: the front reads its
own lines when it runs (`runner_front.build_settings`) and sends them with its request; the
board's executor applies them (`executor.py`). This is the test rig's way to give runner
builds different behaviour (what `hil bisect` is tested with), not a real runner's.

A stand-in is pushed to a virtual board like any runner (`hil run --runner STAND_IN`): a
virtual board runs hil's own front unless its runner is a stand-in (`is_stand_in`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from hil.errors import UsageError
from hil.virtual.faults import RUNNER_KINDS, Fault, parse_fault
from hil.virtual.runner_front import BUILD_MARKER

log = logging.getLogger(__name__)

FRONT = Path(__file__).with_name("runner_front.py")
"""The virtual runner front: hil's own runner of every virtual board."""
BUILD_KINDS = (*RUNNER_KINDS, "slow", "jitter")
"""Fault kinds a runner build may carry: what a runner exec can suffer (a `slow` one only
`on=exec`)."""


def check_setting(spec: str) -> Fault:
    """The fault of one build SPEC; UsageError unless it is one a runner exec can suffer."""
    fault = parse_fault(spec)
    if fault.kind not in BUILD_KINDS or (fault.kind == "slow" and fault.on != "exec"):
        raise UsageError(f"runner build setting {spec!r}: a runner build carries one of "
                         f"{', '.join(BUILD_KINDS)} (slow with on=exec)")
    return fault


def stand_in(settings: list[str] | tuple[str, ...] = ()) -> bytes:
    """The bytes of a runner stand-in with these build settings (checked)."""
    for spec in settings:
        check_setting(spec)
    lines = b"".join(BUILD_MARKER + spec.encode("ascii") + b"\n" for spec in settings)
    front = FRONT.read_bytes()
    return front + (b"" if front.endswith(b"\n") else b"\n") + lines


def settings_of(data: bytes) -> list[str]:
    """The build settings a runner file's bytes carry (none for hil's own front)."""
    return [line[len(BUILD_MARKER):].strip().decode("ascii", "replace")
            for line in data.split(b"\n") if line.startswith(BUILD_MARKER)]


def is_stand_in(data: bytes) -> bool:
    """Whether `data` is hil's front followed by build setting lines only."""
    front = FRONT.read_bytes()
    if not data.startswith(front):
        return False
    rest = data[len(front):].split(b"\n")
    return all(not line or line.startswith(BUILD_MARKER) for line in rest)


def build_faults(settings: list[str]) -> list[Fault]:
    """The faults of a runner exec's build settings; a setting that is not one is logged and
    left out (a stand-in written by hand)."""
    faults = []
    for spec in settings:
        try:
            faults.append(check_setting(spec))
        except UsageError as exc:
            log.warning("runner build: %s: ignored", exc)
    return faults
