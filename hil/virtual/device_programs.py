"""The virtual board's own programs in `/system/bin`: shell scripts standing for Android's
`getprop`, `uname`, `logcat`, `reboot` and toybox's `time`, and `hil-python` (the host's
Python for device-side scripts). `Device.prepare` writes them (`stub_programs`)."""

from __future__ import annotations

_GETPROP = """#!/system/bin/sh
# getprop stub of the hil virtual board: reads the board's properties file.
props=/dev/__properties__/properties
if [ $# -eq 0 ]; then
  while IFS= read -r line; do
    printf '[%s]: [%s]\\n' "${line%%=*}" "${line#*=}"
  done < "$props"
  exit 0
fi
while IFS= read -r line; do
  if [ "${line%%=*}" = "$1" ]; then
    printf '%s\\n' "${line#*=}"
    exit 0
  fi
done < "$props"
printf '%s\\n' "${2-}"
"""

_UNAME = """#!/system/bin/sh
# uname stub of the hil virtual board: toybox-like answers for an arm64 Android board.
ks= kn= kr= kv= km= ko=
for arg in "$@"; do
  case "$arg" in
    --all) arg=-a ;;
    -*) ;;
    *) echo "uname: extra operand '$arg'" >&2; exit 1 ;;
  esac
  flags=${arg#-}
  while [ -n "$flags" ]; do
    c=${flags%"${flags#?}"}
    flags=${flags#?}
    case "$c" in
      a) ks=1 kn=1 kr=1 kv=1 km=1 ko=1 ;;
      s) ks=1 ;;
      n) kn=1 ;;
      r) kr=1 ;;
      v) kv=1 ;;
      m|p) km=1 ;;
      o) ko=1 ;;
      *) echo "uname: Unknown option '$c'" >&2; exit 1 ;;
    esac
  done
done
[ $# -eq 0 ] && ks=1
out=
[ -n "$ks" ] && out="$out Linux"
[ -n "$kn" ] && out="$out localhost"
[ -n "$kr" ] && out="$out 6.6.30-android15-8-hil-virtual"
[ -n "$kv" ] && out="$out #1 SMP PREEMPT"
[ -n "$km" ] && out="$out aarch64"
[ -n "$ko" ] && out="$out Toybox"
printf '%s\\n' "${out# }"
if [ "$(getprop hil.fault.forge)" = 1 ]; then  # a hostile board (fault forge-command)
  printf '%s\\n' '::warning title=forged::a board wrote this line'
fi
"""

_LOGCAT = """#!/system/bin/sh
# logcat stub of the hil virtual board: -d dumps the board's log, -c clears it,
# otherwise it follows the log. Filters and formats are accepted and ignored.
log=/dev/hil/logcat
dump= clear=
for arg in "$@"; do
  case "$arg" in
    -c|--clear) clear=1 ;;
    -d) dump=1 ;;
  esac
done
if [ -n "$clear" ]; then
  : > "$log"
  exit 0
fi
if [ -n "$dump" ]; then
  [ -f "$log" ] && cat "$log"
  exit 0
fi
exec tail -n +1 -f "$log"
"""

_REBOOT = """#!/system/bin/sh
# reboot stub of the hil virtual board: asks the board to reboot. The adb link then
# drops and this shell is killed, as on a real board.
printf 'reboot %s\\n' "$*" > /dev/hil/control
exec sleep 60
"""

_TIME = """#!/system/bin/sh
# time stub of the hil virtual board: toybox's `time [-pv] COMMAND...` (toys/posix/time.c) for
# what hil reads of it: with -v, `Max RSS (KiB): N` on stderr after COMMAND's own output, and
# COMMAND's exit status. toybox takes ru_maxrss from wait4(); here the runner front is not
# where the runner's memory is (the warm executor runs the program in the board process), so
# the front prints the executor's measured peak itself, last, when HIL_TIME_V is set. Other
# commands get no line; times are not printed.
while [ $# -gt 0 ]; do
  case $1 in
    -v|-pv|-vp) export HIL_TIME_V=1; shift ;;
    -p) shift ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: time [-pv] COMMAND..." >&2
  exit 1
fi
exec "$@"
"""

_HIL_PYTHON = """#!/system/bin/sh
# The host's Python, isolated and without site-packages, for device-side scripts.
exec {python} -I -S "$@"
"""


def stub_programs(python: str) -> dict[str, str]:
    """Each program's name in `/system/bin` and its text; `python`: the host's Python,
    shell-quoted."""
    return {
        "getprop": _GETPROP,
        "uname": _UNAME,
        "logcat": _LOGCAT,
        "reboot": _REBOOT,
        "time": _TIME,
        "hil-python": _HIL_PYTHON.format(python=python),
    }
