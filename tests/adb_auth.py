"""A host's side of adb authentication, by hand, for tests that speak the transport raw: the
token signed as adb's `RSA_sign(NID_sha1, token)` does, by the `openssl` command (PKCS#1 v1.5,
the token standing as a SHA-1 digest), with a key `adb keygen` made."""

from __future__ import annotations

import subprocess
from pathlib import Path

from adbutils._utils import adb_path

from hil.adbkey import ensure_hil_key


def sign(token: bytes, private_key: Path) -> bytes:
    """`token` signed with `private_key` (a PEM key file) as adb's host signs it."""
    return subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", str(private_key), "-pkeyopt",
                           "digest:sha1"], input=token, capture_output=True, check=True, timeout=30).stdout


def hil_key() -> Path:
    """hil's own private adb key (made on first use), the key the virtual boards trust."""
    return ensure_hil_key(adb_path())


def new_key(path: Path) -> Path:
    """A fresh key pair at `path` and `path.pub` (`adb keygen`): a key no board trusts."""
    subprocess.run([adb_path(), "keygen", str(path)], capture_output=True, check=True, timeout=60)
    return path
