"""Fault injection on the virtual board: what can go wrong with a real board, on demand.

A fault SPEC is `KIND[,key=value...]`, given with `hil virtual-board --fault SPEC`
(repeatable) or at run time as a line `fault SPEC` written to the board's control FIFO
`ROOT/run/control` (`fault clear` removes every fault, `fault clear KIND` those of one kind).
Kinds:

| kind | what happens | keys |
|---|---|---|
| `drop` | the adb connection is cut during a push, runner exec or pull | `on` (required) |
| `freeze` | adb stops answering (TCP stays up) until a reboot or power cycle | `on` (default exec) |
| `reboot` | the board reboots in the middle of the operation | `on` (default exec) |
| `panic` | a kernel panic line on the UART while the operation runs | `on` (default exec), `text` |
| `crash` | the runner dies by a signal | `signal` `SEGV` (139, default) or `ABRT` (134) |
| `hang` | the runner never finishes (until it is killed) | |
| `truncate-output` | the runner exits 0 but its output files are cut to half | |
| `missing-output` | the runner exits 0 but writes no output file | |
| `noise` | Gaussian noise of `rel` x each float output's std on the outputs (`noise.py`) | `rel`, `seed` |
| `storage-full` | a push (`on=push`) or the runner's output writes (`on=exec`) fail: ENOSPC | `on`, `path` |
| `readonly-data` | shells see `/data` read-only (an ext4 error remount); pushes still land (state) | |
| `wrong-chipset` | getprop reports the other chipset (state: until cleared) | |
| `auth-refused` | the board never accepts the host's adb key (state) | |
| `miscompute` | a program executing op `op` (any, without `op`): outputs + `rel` x RMS | `op`, `rel`, `p` |
| `slow` | every adb message the board sends (`on=exec`: every inference) is delayed (state) | `delay`, `on` |
| `jitter` | every inference takes longer by a seeded random share of its time (state) | `rel`, `seed` |
| `hot` | thermal zones at `temp` °C, clocks at their minimum, for `seconds` (state) | `temp`, `seconds` |
| `old-adbd` | adbd as before Android 7: no `shell_v2` feature, `shell,v2:` refused (state) | |
| `flash-fail` | fastboot's `flash:P` answers FAIL for the partitions `partition` matches | `partition` |
| `download-hang` | the bootloader stops reading halfway through a `download` (hung) | `after`, `times` |
| `no-bootloader` | a reboot into the bootloader ends off adb, with no fastboot (state) | |
| `wrong-product` | `fastboot getvar product` answers another product (state) | `product` |
| `broken-vendor` | no ENN library (the runner segfaults) until `partition` is flashed (state) | `partition` |
| `forge-command` | a hostile board: `uname` adds a `::warning` line (state; `hostile.py`) | |
| `list-escape` | a hostile board: LIST names `../../escaped.txt`, RECV serves it (state) | |
| `flood` | a hostile runner: `bytes` of output (default 1G) before it ends | `bytes` |
| `endless-line` | a hostile UART: a runner exec starts a `bytes`-long line with no newline | `bytes` |

`old-adbd` must hold before the host connects: the feature list goes out at CNXN.
`slow` takes `delay` seconds (default 0.05) and `on=adb` (the default) or `on=exec`; with
`on=exec`, `factor=F` makes every inference F times as long as it was instead (a relative
slowdown: `factor=1.2` is 20 % slower, whatever the program's own time; `delay` then defaults
to 0); `hot`
defaults to `temp=80,seconds=30` (`seconds=0`: hot until cleared).
`jitter` (`rel` default 0.05, `seed` default 0) adds to every inference `rel` x |z| x its
time, z drawn from a normal distribution by a generator seeded with `seed` once per board
(the draws go on across reboots): a half-normal noise whose interquartile range is about
0.83 x `rel` of the time, so a latency measurement meets noise even in the off-host mode,
where every execution otherwise takes exactly its modelled time (`offhost.py`).
Event faults fire on matching events: `push` (a sync SEND), `exec` (a runner exec), `pull`
(a sync RECV), `download` and `flash` (fastboot commands, `fastboot.py`); `on=now` (control
FIFO) applies a drop, freeze, reboot or panic at once.
`path=GLOB` limits push/pull faults to device paths matching the glob;
`after=N` lets N matching events pass first; `times=N` fires N times (default 1, 0 =
every time). State faults hold from when they are set until `fault clear`.

The bootloader's faults (`fastboot.py`, `bootloader.py`): `flash-fail` (`partition=GLOB`, default
`*`; `after`, `times` default 0: every flash, `times=1`: a failure a retry cures);
`download-hang` (once by default; the bootloader then answers nothing, new hosts included,
until a power cycle); `no-bootloader` (a power cycle brings the board back on adb, still with the
fault); `wrong-product` (default: the other chipset's product, `product=NAME` names one);
`broken-vendor` takes ENN's library off the board at once and disarms itself when its
partition is flashed (or at `fault clear`): the library is back then. These five are
`PROVISIONING_KINDS`, left out of `KINDS` (what the soak deals: it flashes no board).

`miscompute` is the virtual stand-in for an NPU kernel bug in one op: the op names a program
executes are read from the program itself (`program_ops.py`: its kernels and its XNNPACK
delegates' nodes), so prefixes of a model before the op's first use come out clean and those
after it do not. `rel` is the added error's RMS relative to each output's (default 0.5:
SQNR 6 dB); it fires on every runner exec (`times` 0) unless told otherwise; `p=P` (default 1)
makes it fire on a share P of the execs, drawn by a generator seeded with `seed` once per
board: a case that fails at random.

Builds of the test rig carry faults too (the rig's way to make two builds differ, not a real
firmware's or runner's): a firmware's `system` image may hold `hil.virtual.fault=SPEC` lines
(`images.py`), armed at every boot into Android until the next; a virtual runner stand-in
may carry `# hil-virtual-runner-build: SPEC` lines (`runner_build.py`), applied to every exec
of that runner.
"""

from __future__ import annotations

import fnmatch
import re
import threading
from dataclasses import dataclass

from hil.errors import UsageError
from hil.virtual.hostile import parse_size

EVENTS = ("push", "exec", "pull")
"""adb operations an event fault can fire on."""

BOARD_KINDS = ("drop", "freeze", "reboot", "panic")
"""Faults the board process itself performs, on any event."""
RUNNER_KINDS = ("crash", "hang", "truncate-output", "missing-output", "miscompute", "noise",
                "flood", "endless-line")
"""Faults of the runner: on runner execs only."""
STATE_KINDS = ("wrong-chipset", "auth-refused", "slow", "jitter", "readonly-data", "hot", "old-adbd",
               "no-bootloader", "wrong-product", "broken-vendor", "forge-command", "list-escape")
"""Faults that hold until cleared rather than fire on an event."""
PROVISIONING_KINDS = ("flash-fail", "download-hang", "no-bootloader", "wrong-product",
                      "broken-vendor")
"""Faults of the bootloader and the partitions (`bootloader.py`, `fastboot.py`): they act while
a board is in its bootloader or on its way there, or (`broken-vendor`) need a re-flash to cure."""
HOSTILE_KINDS = ("forge-command", "list-escape", "flood", "endless-line")
"""A hostile board's faults (`hostile.py`): tests of hil's bounds, not a board's mishaps."""
KINDS = (*BOARD_KINDS, *(kind for kind in RUNNER_KINDS if kind not in HOSTILE_KINDS), "storage-full",
         *(kind for kind in STATE_KINDS if kind not in PROVISIONING_KINDS + HOSTILE_KINDS))
"""What a board that is never flashed can suffer and get over: the kinds the soak's chaos deals
(scripts/soaklib/deck.py; it provisions no board)."""
ALL_KINDS = (*KINDS, *PROVISIONING_KINDS, *HOSTILE_KINDS)
"""Every kind a SPEC may name."""

SIGNALS = {"SEGV": 11, "ABRT": 6}
"""Signals a `crash` fault can kill the runner with."""

DEFAULT_PANIC = "Kernel panic - not syncing: hil fault injection (VIRTUAL board)"
_KEYS = {
    "drop": {"on", "path", "after", "times"},
    "freeze": {"on", "path", "after", "times"},
    "reboot": {"on", "path", "after", "times"},
    "panic": {"on", "path", "after", "times", "text"},
    "crash": {"signal", "after", "times"},
    "hang": {"after", "times"},
    "truncate-output": {"after", "times"},
    "missing-output": {"after", "times"},
    "noise": {"rel", "seed", "after", "times"},
    "miscompute": {"op", "rel", "p", "seed", "after", "times"},
    "storage-full": {"on", "path", "after", "times"},
    "wrong-chipset": set(),
    "auth-refused": set(),
    "slow": {"delay", "on", "factor"},
    "jitter": {"rel", "seed"},
    "readonly-data": set(),
    "hot": {"temp", "seconds"},
    "old-adbd": set(),
    "flash-fail": {"partition", "after", "times"},
    "download-hang": {"after", "times"},
    "no-bootloader": set(),
    "wrong-product": {"product"},
    "broken-vendor": {"partition"},
    "forge-command": set(),
    "list-escape": set(),
    "flood": {"bytes", "after", "times"},
    "endless-line": {"bytes", "after", "times"},
}
_DEFAULT_EVENT = {"crash": "exec", "hang": "exec", "truncate-output": "exec",
                  "missing-output": "exec", "miscompute": "exec", "noise": "exec", "storage-full": "push",
                  "freeze": "exec",
                  "reboot": "exec", "panic": "exec", "flash-fail": "flash",
                  "download-hang": "download", "flood": "exec", "endless-line": "exec"}
_EVENTS_OF = {"storage-full": ("push", "exec")}
"""Events a runner or storage fault may fire on, where there is a choice."""


@dataclass(frozen=True)
class Fault:
    """One parsed fault SPEC."""

    kind: str
    """One of KINDS."""
    on: str = ""
    """The event it fires on (`push`, `exec`, `pull`, `now`); empty for state faults."""
    path: str = "*"
    """Glob on the device path (push and pull events); on the partition name (`flash-fail`,
    `broken-vendor`: given as `partition=`)."""
    after: int = 0
    """Matching events to let pass before it fires."""
    times: int = 1
    """How many times it fires; 0 = every matching event."""
    signal: int = SIGNALS["SEGV"]
    """`crash`: the signal number."""
    text: str = DEFAULT_PANIC
    """`panic`: the UART line."""
    delay: float = 0.05
    """`slow`: seconds added before every adb message the board sends."""
    op: str = ""
    """`miscompute`: the op whose presence in a program perturbs its outputs (an aten name:
    `hardswish`, `add`, `convolution`...); empty: every program."""
    rel: float = 0.5
    """`miscompute`: the added error's RMS relative to each output's RMS; `noise`: the
    noise's standard deviation as a multiple of each output's; `jitter`: the scale of the
    half-normal extra time, relative to each inference's own."""
    seed: int = 0
    """`noise`, `jitter`, `miscompute` with `p`: seed of the generator."""
    temp: float = 80.0
    """`hot`: the temperature of every thermal zone (°C)."""
    seconds: float = 30.0
    """`hot`: how long the board stays hot once the fault is set; 0: until cleared."""
    product: str = ""
    """`wrong-product`: what `getvar product` answers (empty: the other chipset's)."""
    factor: float = 1.0
    """`slow,on=exec`: every inference takes this many times its own time."""
    p: float = 1.0
    """`miscompute`: the share of runner execs it fires on (seeded by `seed`)."""
    size: int = 1 << 30
    """`flood`, `endless-line` (given as `bytes=`): how much the hostile board writes."""

    @property
    def is_state(self) -> bool:
        """Holds until cleared instead of firing on events."""
        return self.kind in STATE_KINDS


def _integer(spec: str, key: str, value: str) -> int:
    if not value.isdigit():
        raise UsageError(f"--fault {spec!r}: {key}={value!r} is not a non-negative integer")
    return int(value)


def parse_fault(spec: str) -> Fault:
    """Parse `KIND[,key=value...]`; UsageError naming the spec and the field at fault."""
    kind, *options = [part.strip() for part in spec.strip().split(",")]
    if kind not in ALL_KINDS:
        raise UsageError(f"--fault {spec!r}: unknown kind {kind!r} (one of {', '.join(ALL_KINDS)})")
    values: dict[str, str] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in _KEYS[kind]:
            allowed = ", ".join(sorted(_KEYS[kind])) or "none"
            raise UsageError(f"--fault {spec!r}: unknown option {option!r} (allowed: {allowed})")
        values[key] = value
    fields: dict[str, object] = {"kind": kind}
    if kind not in STATE_KINDS:
        on = values.get("on", _DEFAULT_EVENT.get(kind, ""))
        default_events = (*EVENTS, "now") if kind in BOARD_KINDS else (_DEFAULT_EVENT[kind],)
        allowed_events = _EVENTS_OF.get(kind, default_events)
        if on not in allowed_events:
            raise UsageError(
                f"--fault {spec!r}: on={on or '?'}: expected one of {', '.join(allowed_events)}"
            )
        fields["on"] = on
    if "path" in values:
        fields["path"] = values["path"]
    fields.update(_bootloader_fault_fields(spec, kind, values))
    for key in ("after", "times", "seed"):
        if key in values:
            fields[key] = _integer(spec, key, values[key])
    if "signal" in values:
        name = values["signal"].upper().removeprefix("SIG")
        if name not in SIGNALS:
            raise UsageError(f"--fault {spec!r}: signal={values['signal']!r} (SEGV or ABRT)")
        fields["signal"] = SIGNALS[name]
    if "text" in values:
        if not values["text"].isprintable():
            raise UsageError(f"--fault {spec!r}: text must be printable")
        fields["text"] = values["text"]
    if "delay" in values:
        try:
            delay = float(values["delay"])
        except ValueError:
            delay = -1.0
        if not 0 <= delay <= 10:
            raise UsageError(f"--fault {spec!r}: delay={values['delay']!r}: seconds in [0, 10]")
        fields["delay"] = delay
    if kind == "miscompute":
        _miscompute_fields(spec, values, fields)
    if kind == "noise":
        fields["rel"] = _noise_rel(spec, values)
    if "bytes" in values:
        try:
            fields["size"] = parse_size(values["bytes"])
        except ValueError as exc:
            raise UsageError(f"--fault {spec!r}: bytes={values['bytes']!r}: {exc}") from None
    fields.update(_latency_fault_fields(spec, kind, values))
    fields.update(_rig_fields(spec, kind, values))
    return Fault(**fields)  # type: ignore[arg-type]


def _miscompute_fields(spec: str, values: dict[str, str], fields: dict[str, object]) -> None:
    """`op`, `rel`, and `times` 0 (every exec) unless given."""
    fields["times"] = _integer(spec, "times", values["times"]) if "times" in values else 0
    op = values.get("op", "")
    if "op" in values and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", op):
        raise UsageError(f"--fault {spec!r}: op={op!r} is not an op name (e.g. hardswish)")
    fields["op"] = op
    if "rel" in values:
        try:
            rel = float(values["rel"])
        except ValueError:
            rel = -1.0
        if not 0 < rel <= 100:
            raise UsageError(f"--fault {spec!r}: rel={values['rel']!r}: a number in (0, 100]")
        fields["rel"] = rel


def _noise_rel(spec: str, values: dict[str, str]) -> float:
    """`noise`'s required `rel`: a multiple of the output's standard deviation."""
    try:
        rel = float(values.get("rel", "nan"))
    except ValueError:
        rel = float("nan")
    if not 0 < rel <= 100:
        raise UsageError(f"--fault {spec!r}: rel={values.get('rel', '?')}: a multiple of the "
                         "output's standard deviation in (0, 100] is required")
    return rel


def _bootloader_fault_fields(spec: str, kind: str, values: dict[str, str]) -> dict[str, object]:
    """`partition` (into `path`), `product`, and `flash-fail`'s `times` 0 unless given."""
    fields: dict[str, object] = {}
    for key in ("partition", "product"):
        if key in values and not re.fullmatch(r"[A-Za-z0-9_.*?\-]+", values[key]):
            raise UsageError(f"--fault {spec!r}: {key}={values[key]!r} is not a name")
    if kind == "broken-vendor":
        fields["path"] = values.get("partition", "vendor")
    elif "partition" in values:
        fields["path"] = values["partition"]
    if "product" in values:
        fields["product"] = values["product"]
    if kind == "flash-fail" and "times" not in values:
        fields["times"] = 0
    return fields


# -- latency faults (hil/board/thermal.py, `hil compare`): a hot board, a slow runner -------
SLOW_ON = ("adb", "exec")
"""`slow,on=adb` (the default) delays the board's adb messages; `slow,on=exec` every timed
inference of the runner, so its latency samples grow by `delay`."""


def _latency_fault_fields(spec: str, kind: str, values: dict[str, str]) -> dict[str, object]:
    """The `on` of a `slow` fault and the `temp` / `seconds` of a `hot` one."""
    fields: dict[str, object] = {}
    if kind == "slow":
        on = values.get("on", "adb")
        if on not in SLOW_ON:
            raise UsageError(f"--fault {spec!r}: on={on!r}: expected one of {', '.join(SLOW_ON)}")
        fields["on"] = "exec" if on == "exec" else ""
    for key, low, high in (("temp", -40.0, 150.0), ("seconds", 0.0, 86400.0)):
        if kind == "hot" and key in values:
            try:
                number = float(values[key])
            except ValueError:
                number = low - 1
            if not low <= number <= high:
                raise UsageError(f"--fault {spec!r}: {key}={values[key]!r}: a number in [{low:g}, {high:g}]")
            fields[key] = number
    return fields


def _number(spec: str, key: str, text: str, low: float, high: float) -> float:
    """`text` as a number in [low, high]; UsageError naming the spec and key otherwise."""
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not low <= number <= high:
        raise UsageError(f"--fault {spec!r}: {key}={text!r}: a number in [{low:g}, {high:g}]")
    return number


def _rig_fields(spec: str, kind: str, values: dict[str, str]) -> dict[str, object]:
    """`slow`'s `factor` (with `on=exec` only), `jitter`'s `rel` and `miscompute`'s `p`: what
    the test rig's builds set (module docstring)."""
    fields: dict[str, object] = {}
    if "factor" in values:
        if values.get("on") != "exec":
            raise UsageError(f"--fault {spec!r}: factor= slows inferences: only with on=exec")
        fields["factor"] = _number(spec, "factor", values["factor"], 1.0, 100.0)
        if "delay" not in values:
            fields["delay"] = 0.0  # a relative slowdown alone, no fixed delay
    if kind == "jitter":
        fields["rel"] = _number(spec, "rel", values.get("rel", "0.05"), 0.0, 10.0)
    if "p" in values:
        fields["p"] = _number(spec, "p", values["p"], 0.0, 1.0)
    return fields


class FaultPlan:
    """The faults set on one board and how often each has matched; thread-safe (the warm
    executor asks from its own threads)."""

    def __init__(self, faults: list[Fault] | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._seen: list[int] = []
        for fault in faults or []:
            self.add(fault)

    def add(self, fault: Fault) -> None:
        """Arm one more fault."""
        with self._lock:
            self._faults.append(fault)
            self._seen.append(0)

    def clear(self, kind: str | None = None) -> None:
        """Disarm every fault, or every fault of `kind`."""
        with self._lock:
            keep = [i for i, fault in enumerate(self._faults) if kind is not None and fault.kind != kind]
            self._faults = [self._faults[i] for i in keep]
            self._seen = [self._seen[i] for i in keep]

    def state(self, kind: str, on: str = "") -> Fault | None:
        """The armed state fault of `kind` (and `on`: `slow` has two), if any."""
        with self._lock:
            return next((f for f in self._faults if f.kind == kind and f.on == on), None)

    def remove(self, fault: Fault) -> None:
        """Disarm one fault (a `hot` fault whose time is up); no-op when it is gone."""
        with self._lock:
            for index, armed in enumerate(self._faults):
                if armed is fault:
                    del self._faults[index]
                    del self._seen[index]
                    return

    def fire(self, event: str, path: str = "") -> list[Fault]:
        """The faults that fire on this event (counting it for every matching fault); a
        fault that has fired `times` times is removed."""
        fired: list[Fault] = []
        with self._lock:
            for index, fault in enumerate(self._faults):
                if fault.is_state or fault.on != event or (
                    path and not fnmatch.fnmatchcase(path, fault.path)
                ):
                    continue
                self._seen[index] += 1
                shots = self._seen[index] - fault.after
                if shots >= 1 and (fault.times == 0 or shots <= fault.times):
                    fired.append(fault)
            spent = [
                i for i, fault in enumerate(self._faults)
                if fault.times and self._seen[i] - fault.after >= fault.times
            ]
            for index in reversed(spent):
                del self._faults[index]
                del self._seen[index]
        return fired

    def describe(self) -> list[str]:
        """One short description per armed fault, for logs."""
        with self._lock:
            return [f"{f.kind}{',on=' + f.on if f.on else ''}" for f in self._faults]
