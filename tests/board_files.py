"""Files as an Android board gets them, for the tests."""

from __future__ import annotations


def aarch64_elf(note: bytes) -> bytes:
    """The start of an aarch64 ELF executable (ELF64, little-endian, ET_DYN, EM_AARCH64), then
    `note`: what upstream's Android build of `enn_executor_runner` is, as far as a kernel (and
    the virtual board's exec guard) looks before loading it. A stand-in: no code."""
    ident = b"\x7fELF\x02\x01\x01\x00" + bytes(8)
    return ident + (3).to_bytes(2, "little") + (183).to_bytes(2, "little") + (1).to_bytes(4, "little") \
        + bytes(44) + note
