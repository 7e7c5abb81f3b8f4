"""The virtual board's adb authentication: it behaves as a secure real board
(`ro.adb.secure=1`) does.

```
host CNXN ──► AUTH TOKEN (20 random bytes)
host AUTH SIGNATURE ──► a trusted key signed the token: CNXN, the host is online
                    └─► no key did: a new AUTH TOKEN (after 256 failures, 1 s later each)
host AUTH RSAPUBLICKEY ──► nothing: the "Allow USB debugging?" dialog nobody answers here;
                           the adb server shows the board `unauthorized`
```

As AOSP's adbd (`adb/adb.cpp`: `handle_new_connection`, `handle_packet` case A_AUTH;
`adb/daemon/auth.cpp`: `adbd_auth_verify`, `send_auth_request`): until then OPEN, WRTE, OKAY
and CLSE are ignored. The keys a board trusts are read again at every check, as adbd reads
`/adb_keys` and `/data/misc/adb/adb_keys`: hil's own key (`hil/adbkey.py`, which hil's private
adb servers present) and every key in the files given with `--trusted-key FILE` (a `.pub` or an
`adb_keys` file: one key a line). Accepting a key is adding it to such a file, as a user
accepts it on a phone; the host then connects again (`adb reconnect`, or disconnect and
connect). A key offered and not trusted is logged with the fingerprint a phone's dialog
shows, and how to trust it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from hil.adbkey import PublicKey, hil_key_path, parse_public_key, public_key_path, read_keys, verify

log = logging.getLogger(__name__)

FAILURES_BEFORE_DELAY = 256
"""adbd answers a failed signature at once this many times, then 1 s later each time."""


class Authority:
    """The keys a board trusts, and its checks of a host's answers."""

    def __init__(self, key_files: Sequence[Path] = (), hil_key: bool = True) -> None:
        self.key_files = [*([public_key_path(hil_key_path())] if hil_key else []), *key_files]
        """Files read at every check: hil's own public key first, then `--trusted-key`s."""

    def trusted(self) -> list[PublicKey]:
        """Every key the board trusts now."""
        return [key for path in self.key_files for key in read_keys(path)]

    def accepts(self, token: bytes, signature: bytes) -> PublicKey | None:
        """The trusted key that signed `token` with `signature`, or None."""
        return next((key for key in self.trusted() if verify(token, signature, key)), None)

    def describe(self) -> str:
        """One line: which keys the board trusts, and how to add one."""
        keys = self.trusted()
        files = ", ".join(str(path) for path in self.key_files)
        return (f"adb authentication required (ro.adb.secure=1): trusts {len(keys)} key(s) from {files}; "
                "to trust your adb client's key too: --trusted-key ~/.android/adbkey.pub")

    def offered(self, data: bytes, peer: object) -> None:
        """A host offered its public key (AUTH RSAPUBLICKEY): log it; it is not trusted."""
        text = data.rstrip(b"\0").decode("ascii", "replace")
        try:
            key = parse_public_key(text)
        except ValueError as exc:
            log.warning("host %s offered a malformed public key (%s)", peer, exc)
            return
        log.warning("host %s is unauthorized: its key %s is not trusted; to trust it, add its "
                    "public key to a --trusted-key file (e.g. --trusted-key ~/.android/adbkey.pub) "
                    "and connect again", peer, key.describe())
