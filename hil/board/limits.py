"""How much hil takes from a board: what a broken or hostile board sends is bounded, so it
costs a case (ERROR_INFRA, this module's `BoardOverflow`), never hil's memory or a hang.

| what | cap | where |
|---|---|---|
| one command's output (stdout + stderr) | 16 MiB | `kept_shell.py`, `connection.shell_v2` |
| one shell protocol packet | 1 MiB (adb's MAX_PAYLOAD) | the same |
| one sync DATA chunk, a FAIL message | 64 KiB (adbd's SYNC_DATA_MAX) | `sync.py` |
| one pulled file | its size + 64 KiB (statistics 1 MiB; unknown 256 MiB) | `sync.py`, its callers |
| one console line | 64 KiB (the rest up to its newline dropped) | `console.py` |

A size the board announces is checked before a byte of it is read (a sync header or a shell
packet header can announce up to 4 GiB). The connection is dropped after an overflow: it is
out of step, and the board keeps writing into it.
"""

from __future__ import annotations

from hil.errors import InfraError

MiB = 1024 * 1024
SHELL_OUTPUT_MAX = 16 * MiB
"""The most one command's stdout and stderr together may hold (a runner's log is kilobytes)."""
SHELL_PACKET_MAX = 1 * MiB
"""The largest shell protocol packet (adbd sends at most MAX_PAYLOAD, 1 MiB)."""
SYNC_DATA_MAX = 64 * 1024
"""The largest sync DATA payload (AOSP `file_sync_protocol.h`: SYNC_DATA_MAX)."""
PULL_SLACK = 64 * 1024
"""What a pulled file may hold beyond its expected size before it is refused."""
PULL_MAX = 256 * MiB
"""The most a pulled file whose size hil does not know may hold."""
STATISTICS_MAX = 1 * MiB
"""The size a runner's statistics file is taken to have at most (it holds a few numbers)."""
CONSOLE_LINE_MAX = 64 * 1024
"""The longest console line kept; the rest of it, up to its newline, is dropped."""


class BoardOverflow(InfraError):
    """A board sent more than hil takes (verdict ERROR_INFRA)."""


def pull_limit(expected: int | None) -> int:
    """The most a pulled file may hold: its expected size plus PULL_SLACK, else PULL_MAX."""
    return PULL_MAX if expected is None else min(expected + PULL_SLACK, PULL_MAX)


def shell_packet(length: int) -> int:
    """`length`, a shell packet's announced size; BoardOverflow when it is more than adbd sends."""
    if length > SHELL_PACKET_MAX:
        raise BoardOverflow(f"the board announced a shell packet of {length} bytes "
                            f"(adbd sends at most {SHELL_PACKET_MAX}): not read")
    return length


def shell_output(total: int) -> None:
    """BoardOverflow when one command's output has grown past SHELL_OUTPUT_MAX."""
    if total > SHELL_OUTPUT_MAX:
        raise BoardOverflow(f"the board sent more than {SHELL_OUTPUT_MAX // MiB} MiB of output "
                            "for one command: stopped reading (a flooding board or runner)")
