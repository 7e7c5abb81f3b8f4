"""Board states that no recovery step can fix: someone has to act on the board or the host.

adb reports them as a device state (`unauthorized`: the board has not accepted this host's
RSA key) or as an error (`no permissions` / `insufficient permissions`: the adb server's user
cannot open the USB device; udev). Rebooting or power-cycling such a board only spends the
boot timeout: it is quarantined at once, with the hint a lab engineer needs.
"""

from __future__ import annotations

from hil.errors import InfraError

UNAUTHORIZED_HINT = (
    "the board has not accepted this host's adb key: accept the 'Allow USB debugging?' prompt "
    "on the board, or add the adb server's ~/.android/adbkey.pub to the board's "
    "/data/misc/adb/adb_keys (a virtual board: hil virtual-board --trusted-key FILE)"
)
PERMISSIONS_HINT = (
    "the adb server's user cannot open the USB device: add a udev rule for the board "
    "(SUBSYSTEM==\"usb\", ATTR{idVendor}==\"04e8\", MODE=\"0660\", GROUP=\"plugdev\"), put that "
    "user in plugdev, replug the board and restart the adb server"
)


class NeedsPerson(InfraError):
    """A board state only a person can fix (see the module docstring)."""


def needs_person(state: str) -> str | None:
    """The hint for an adb state or error text that needs a person, or None."""
    text = state.lower()
    if "unauthorized" in text or "failed to authenticate" in text:
        return UNAUTHORIZED_HINT
    if "no permissions" in text or "insufficient permissions" in text:
        return PERMISSIONS_HINT
    return None


def check_state(address: str, state: str) -> None:
    """Raise NeedsPerson when `state` is one that no recovery can fix."""
    hint = needs_person(state)
    if hint is not None:
        raise NeedsPerson(f"{address}: state {state.strip()!r}: {hint}")
