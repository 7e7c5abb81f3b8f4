"""adb's RSA keys: hil's own key pair, Android's public key format, and adbd's check.

hil's private adb servers (`hil/adbserver.py`) present hil's own key as a vendor key
(`ADB_VENDOR_KEYS`, AOSP `adb/client/auth.cpp`: `get_vendor_keys`), besides the user's
`~/.android/adbkey`; the virtual boards trust it (`hil/virtual/auth.py`). The key lives in
a folder private to the user (`HIL_ADB_KEY`, else `$XDG_CONFIG_HOME/exynos-hil/adbkey`, else
`~/.config/exynos-hil/adbkey`), made by `adb keygen` on first use; `adbkey.pub` beside it is
what a board is told to trust.

Mirrored from AOSP:
- a public key line: base64 of the binary key, a space, `user@host`
  (`adb/client/auth.cpp`: `calculate_public_key`);
- the binary key (`libcrypto_utils/android_pubkey.c`): little-endian u32 words
  `modulus_size_words` (64 for 2048 bits), `n0inv`, the modulus (little-endian), `rr`
  (little-endian), the exponent;
- the check (`adb/daemon/auth.cpp`: `adbd_auth_verify`): every key of the keys files in turn,
  `RSA_verify(NID_sha1, token, signature, key)`. The host signs the 20-byte token with
  `RSA_sign(NID_sha1, ...)`: PKCS#1 v1.5, the token standing as a SHA-1 digest (not hashed
  again). Checked here with Python integers.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import hmac
import logging
import os
import stat
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hil.errors import InfraError, UsageError

log = logging.getLogger(__name__)

KEY_ENV = "HIL_ADB_KEY"
"""The path of hil's private adb key (its public key is PATH.pub)."""
TOKEN_SIZE = 20
"""The AUTH token's length (AOSP `adb.h`: TOKEN_SIZE)."""
MODULUS_BYTES = 2048 // 8
"""adb keys are 2048-bit RSA (ANDROID_PUBKEY_MODULUS_SIZE)."""
_KEY_STRUCT = struct.Struct(f"<II{MODULUS_BYTES}s{MODULUS_BYTES}sI")
ENCODED_SIZE = _KEY_STRUCT.size
"""524 bytes: ANDROID_PUBKEY_ENCODED_SIZE."""
SHA1_DIGEST_INFO = bytes.fromhex("3021300906052b0e03021a05000414")
"""The DER DigestInfo prefix of a SHA-1 digest (RFC 8017, 9.2 note 1)."""


@dataclass(frozen=True)
class PublicKey:
    """An adb public key."""

    modulus: int
    exponent: int
    comment: str
    """What follows the key on its line (`user@host`)."""
    encoded: bytes
    """The binary key (what Android's dialog fingerprints)."""

    @property
    def fingerprint(self) -> str:
        """MD5 of the binary key, as Android's "Allow USB debugging?" dialog shows it."""
        digest = hashlib.md5(self.encoded, usedforsecurity=False).hexdigest().upper()
        return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))

    def describe(self) -> str:
        """`fingerprint (comment)`."""
        return f"{self.fingerprint} ({self.comment or 'no name'})"


def parse_public_key(line: str) -> PublicKey:
    """The key on one line of a `.pub` or `adb_keys` file; ValueError when it is not one."""
    text = line.strip().replace("\t", " ")
    blob, _, comment = text.partition(" ")
    try:
        encoded = base64.b64decode(blob, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not base64: {exc}") from None
    if len(encoded) != ENCODED_SIZE:
        raise ValueError(f"{len(encoded)} bytes, not an adb key's {ENCODED_SIZE}")
    words, _n0inv, modulus, _rr, exponent = _KEY_STRUCT.unpack(encoded)
    if words * 4 != MODULUS_BYTES:
        raise ValueError(f"a {words * 32}-bit modulus, not 2048")
    return PublicKey(int.from_bytes(modulus, "little"), exponent, comment.strip(), encoded)


def read_keys(path: Path) -> list[PublicKey]:
    """The keys of a keys file (one a line, as adbd's `adb_keys` and a `.pub`); lines that
    are not keys are logged and left out, as adbd does. [] when the file cannot be read."""
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            keys.append(parse_public_key(line))
        except ValueError as exc:
            log.warning("%s:%d: not an adb public key (%s): left out", path, number, exc)
    return keys


def verify(token: bytes, signature: bytes, key: PublicKey) -> bool:
    """True when `signature` is `RSA_sign(NID_sha1, token)` by `key`'s private key."""
    if len(signature) != MODULUS_BYTES or len(token) != TOKEN_SIZE:
        return False
    value = int.from_bytes(signature, "big")
    if value >= key.modulus:
        return False
    padded = pow(value, key.exponent, key.modulus).to_bytes(MODULUS_BYTES, "big")
    filler = MODULUS_BYTES - 3 - len(SHA1_DIGEST_INFO) - TOKEN_SIZE
    expected = b"\x00\x01" + b"\xff" * filler + b"\x00" + SHA1_DIGEST_INFO + token
    return hmac.compare_digest(padded, expected)


def hil_key_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where hil's private adb key is (or will be made)."""
    environ = os.environ if environ is None else environ
    if environ.get(KEY_ENV):
        return Path(environ[KEY_ENV])
    config = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".config")
    return Path(config) / "exynos-hil" / "adbkey"


def public_key_path(private: Path) -> Path:
    """`PATH.pub`, the public half of a key made by `adb keygen PATH`."""
    return private.with_name(private.name + ".pub")


def ensure_hil_key(adb: str, environ: Mapping[str, str] | None = None) -> Path:
    """hil's private adb key, made with `adb keygen` (2048-bit RSA, mode 0600) when missing,
    in a folder private to the user; UsageError naming the folder when it is not private,
    InfraError when adb cannot make the key."""
    path = hil_key_path(environ)
    folder = path.parent
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise UsageError(f"{folder}: the folder of hil's adb key must be yours and private "
                         f"(mode 0700): refused (set {KEY_ENV} to a key in such a folder)")
    if path.exists() and public_key_path(path).exists():
        return path
    fd = os.open(folder / ".adbkey.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another hil making it at the same time: made once
        if not (path.exists() and public_key_path(path).exists()):
            done = subprocess.run([adb, "keygen", str(path)], capture_output=True, text=True,
                                  timeout=60, check=False)
            if done.returncode != 0 or not public_key_path(path).exists():
                raise InfraError(f"adb keygen {path} failed: {(done.stderr or done.stdout).strip()[-300:]}")
            log.info("made hil's adb key %s (public: %s)", path, public_key_path(path))
    finally:
        os.close(fd)
    return path
