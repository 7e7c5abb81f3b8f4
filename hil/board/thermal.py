"""A board's thermal and clock state before a case, and the bounded wait for it to cool.

Latency measured on a hot board (thermal throttling) or under a power-saving governor says
more about the board than about the program. So the first step of every case's run shell is
`thermal_script(LIMIT_MILLI_C, MAX_WAIT_S)` (a constant script after a first line setting
those two integers, run by the run shell itself with `eval`: no process of its own): it reads
every thermal zone (`/sys/class/thermal/thermal_zone*/{type,temp}`, milli-degrees Celsius)
and, while the hottest zone is at or above the limit, sleeps a second and reads again, up to
the maximum wait (announcing the wait on stderr as it begins); then it prints every zone and
every cpufreq policy (`/sys/devices/system/cpu/cpufreq/policy*`: governor, current, minimum
and maximum frequency in kHz) as `hil: ...` lines on stderr, before the first runner
invocation. Reading costs no extra round trip and no process (shell built-ins only; `sleep`
while it waits).

The same files exist on the virtual board (`hil/virtual/device.py`), whose `hot` fault
raises every zone for a while (`hil/virtual/faults.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

THERMAL_SCRIPT = r"""waited=0
hottest() {
  h=
  for f in /sys/class/thermal/thermal_zone*/temp; do
    t=
    read -r t 2>/dev/null < "$f"
    case $t in ''|-|*[!0-9-]*) continue ;; esac
    if [ -z "$h" ] || [ "$t" -gt "$h" ]; then h=$t; fi
  done
}
hottest
start=$h
if [ -n "$h" ] && [ "$h" -ge "$limit" ] && [ "$max" -gt 0 ]; then
  echo "hil: cooldown waiting: hottest zone $h >= $limit, up to $max s" >&2
  while [ -n "$h" ] && [ "$h" -ge "$limit" ] && [ "$waited" -lt "$max" ]; do
    sleep 1
    waited=$((waited + 1))
    hottest
  done
fi
for z in /sys/class/thermal/thermal_zone*; do
  t= y=
  read -r t 2>/dev/null < "$z/temp"
  read -r y 2>/dev/null < "$z/type"
  [ -n "$t" ] && echo "hil: thermal ${z##*/} $t $y" >&2
done
for p in /sys/devices/system/cpu/cpufreq/policy*; do
  [ -d "$p" ] || continue
  g= c= lo= hi=
  read -r g 2>/dev/null < "$p/scaling_governor"
  read -r c 2>/dev/null < "$p/scaling_cur_freq"
  read -r lo 2>/dev/null < "$p/scaling_min_freq"
  read -r hi 2>/dev/null < "$p/scaling_max_freq"
  echo "hil: cpufreq ${p##*/} ${g:--} ${c:--} ${lo:--} ${hi:--}" >&2
done
echo "hil: cooldown ${start:--} ${h:--} $waited $limit $max" >&2
"""
"""POSIX sh (Android's mksh, the virtual board's dash): built-ins only but `sleep`. It
expects `limit` (milli-°C) and `max` (seconds) to be set."""


def thermal_script(limit_milli_c: int, max_wait_s: int) -> str:
    """THERMAL_SCRIPT with its two numbers, for `eval` in the run shell."""
    return f"limit={int(limit_milli_c)} max={int(max_wait_s)}\n{THERMAL_SCRIPT}"

WAITING_MARK = b"hil: cooldown waiting: "
"""What every line `waiting_line` reads starts with (a packet without it has none)."""
_WAITING = re.compile(r"^hil: cooldown waiting: hottest zone (-?\d+) >= (-?\d+), up to (\d+) s$")

_THERMAL = re.compile(r"^hil: thermal (\S+) (-?\d+) ?(.*)$", re.MULTILINE)
_CPUFREQ = re.compile(r"^hil: cpufreq (\S+) (\S+) (\S+) (\S+) (\S+)$", re.MULTILINE)
_COOLDOWN = re.compile(r"^hil: cooldown (-?\d+|-) (-?\d+|-) (\d+) (-?\d+) (\d+)$", re.MULTILINE)


def _khz(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _celsius(milli: str) -> float | None:
    return round(int(milli) / 1000.0, 3) if milli != "-" else None


@dataclass(frozen=True)
class BoardState:
    """What the script read before a case."""

    zones: dict[str, float] = field(default_factory=dict)
    """Zone type (or the zone's name when it has none) → °C; the hottest of zones that
    share a type."""
    cpufreq: dict[str, dict[str, Any]] = field(default_factory=dict)
    """cpufreq policy → governor and current / minimum / maximum frequency (kHz)."""
    cooldown: dict[str, Any] | None = None
    """The wait: `threshold_c`, `max_wait_s`, `waited_s`, `start_c` and `end_c` (the
    hottest zone before and after), `cooled` (False: still at or above the threshold)."""

    @property
    def hottest_c(self) -> float | None:
        """The hottest zone's temperature, None when the board has no readable zone."""
        return max(self.zones.values()) if self.zones else None

    @property
    def still_hot(self) -> str | None:
        """Why the case ran on a hot board (it did not cool within the wait), or None."""
        cooldown = self.cooldown or {}
        if cooldown.get("cooled") is not False:
            return None
        return (f"board still at {cooldown['end_c']:g} °C after waiting {cooldown['waited_s']} s "
                f"(cool-down threshold {cooldown['threshold_c']:g} °C)")

    def record(self) -> dict[str, Any] | None:
        """The `board_state` of a case record (hil/report/results.schema.json); None when nothing
        was read (a board without the files, or a run shell that failed before)."""
        if not self.zones and not self.cpufreq and self.cooldown is None:
            return None
        hottest = max(self.zones, key=self.zones.__getitem__) if self.zones else None
        return {
            "thermal_c": dict(self.zones),
            "hottest_c": self.hottest_c,
            "hottest_zone": hottest,
            "cpufreq": {name: dict(policy) for name, policy in self.cpufreq.items()},
            "cooldown": dict(self.cooldown) if self.cooldown is not None else None,
        }


def waiting_line(line: str) -> str | None:
    """The script's line announcing a wait, in degrees, for the host's log; None for any
    other line."""
    found = _WAITING.match(line.strip())
    if found is None:
        return None
    hottest, limit, max_wait = (int(value) for value in found.groups())
    return (f"hottest thermal zone at {hottest / 1000:g} °C >= the cool-down threshold "
            f"{limit / 1000:g} °C: waiting for the board to cool, up to {max_wait} s")


def parse_state(text: str) -> BoardState:
    """The script's lines in `text` (the run shell's stderr before the first invocation)."""
    zones: dict[str, float] = {}
    for name, milli, kind in _THERMAL.findall(text):
        key = kind.strip() or name
        celsius = int(milli) / 1000.0
        zones[key] = round(max(zones.get(key, celsius), celsius), 3)
    cpufreq = {
        policy: {"governor": None if governor == "-" else governor,
                 "cur_khz": _khz(cur), "min_khz": _khz(low), "max_khz": _khz(high)}
        for policy, governor, cur, low, high in _CPUFREQ.findall(text)
    }
    cooldown = None
    found = _COOLDOWN.search(text)
    if found:
        start, end, waited, limit, max_wait = found.groups()
        end_c = _celsius(end)
        threshold = int(limit) / 1000.0
        cooldown = {
            "threshold_c": threshold,
            "max_wait_s": int(max_wait),
            "waited_s": int(waited),
            "start_c": _celsius(start),
            "end_c": end_c,
            "cooled": None if end_c is None else end_c < threshold,
        }
    return BoardState(zones, cpufreq, cooldown)
