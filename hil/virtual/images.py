"""The virtual board's flash storage: its partitions, the images flashed there, and the build
they make the board report.

Images flashed with fastboot (`fastboot.py`) are kept as `ROOT/flash/PARTITION.img`; a
partition never flashed (or erased) has no file. At every boot into Android the board reads
its build from them (`build_properties`), the way a real board's `ro.build.*` come from
`/system/build.prop`:

1. `ro.build.*=VALUE` lines at the start of the `system` image (its first `BUILD_PROP_BYTES`
   bytes, a build.prop) are taken as they are: an image set "whose fingerprint is X" is a
   `system` image holding the line `ro.build.fingerprint=X`.
2. What they leave out is derived from every flashed image: `digest` is the sha256 of the
   lines `PARTITION SHA256(IMAGE)\\n` of all flashed images in partition-name order (of no
   line at all for a board never flashed), `ro.build.id` is `HIL.` + its first 8 hex digits,
   `ro.build.version.incremental` its first 12, and `ro.build.fingerprint` Android's
   `BRAND/NAME/DEVICE:RELEASE/ID/INCREMENTAL:TYPE/TAGS` (`fingerprint`), e.g.
   `samsung/hil_virtual/hil_virtual:15/HIL.e3b0c442/e3b0c44298fc:user/release-keys`.

`fastboot getvar product` answers `product(chipset)`: the SoC's platform name (`s5e9955`
for E9955), the board's `ro.hardware` / `ro.board.platform` too.

Sparse images (AOSP's libsparse format, `system/core/libsparse/sparse_format.h`: what the
fastboot client sends for an image bigger than `max-download-size`, or an image built sparse)
are expanded before they are stored.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Mapping
from pathlib import Path

from hil.virtual.device import soc_model

PARTITIONS: dict[str, int] = {
    "boot": 64 << 20,
    "init_boot": 8 << 20,
    "vendor_boot": 64 << 20,
    "dtbo": 8 << 20,
    "vbmeta": 64 << 10,
    "system": 1 << 30,
    "vendor": 512 << 20,
    "userdata": 4 << 30,
}
"""The board's partitions (no A/B slots, no logical partitions) and their sizes in bytes."""
BUILD_PROP_BYTES = 64 << 10
"""How much of the `system` image is read for `ro.build.*` lines."""
BUILD_RELEASE = "15"
BUILD_TYPE = "user"
BUILD_TAGS = "release-keys"
_BUILD_LINE = re.compile(rb"^(ro\.build\.[A-Za-z0-9_.\-]+)=([ -~]*)$", re.MULTILINE)

SPARSE_MAGIC = 0xED26FF3A
_SPARSE_HEADER = struct.Struct("<IHHHHIIII")
_CHUNK_HEADER = struct.Struct("<HHII")
_CHUNK_RAW, _CHUNK_FILL, _CHUNK_DONT_CARE, _CHUNK_CRC32 = 0xCAC1, 0xCAC2, 0xCAC3, 0xCAC4


class ImageError(Exception):
    """A flash or erase the storage refuses; its text is the FAIL message."""


def product(chipset: str) -> str:
    """What `fastboot getvar product` answers for a board of `chipset` (e.g. `s5e9955`)."""
    return soc_model(chipset).lower()


def build_digest(images: Mapping[str, bytes]) -> str:
    """The sha256 (hex) of an image set: of `PARTITION SHA256\\n` lines, partitions sorted."""
    lines = "".join(
        f"{name} {hashlib.sha256(images[name]).hexdigest()}\n" for name in sorted(images)
    )
    return hashlib.sha256(lines.encode()).hexdigest()


def build_properties(images: Mapping[str, bytes], name: str, device: str,
                     brand: str = "samsung") -> dict[str, str]:
    """The `ro.build.*` properties a board reports with `images` flashed (module docstring)."""
    digest = build_digest(images)
    props = {
        "ro.build.id": f"HIL.{digest[:8]}",
        "ro.build.version.incremental": digest[:12],
        "ro.build.version.release": BUILD_RELEASE,
        "ro.build.type": BUILD_TYPE,
        "ro.build.tags": BUILD_TAGS,
    }
    system = images.get("system", b"")[:BUILD_PROP_BYTES]
    given = {key.decode(): value.decode() for key, value in _BUILD_LINE.findall(system)}
    props.update(given)
    if "ro.build.fingerprint" not in given:
        props["ro.build.fingerprint"] = (
            f"{brand}/{name}/{device}:{props['ro.build.version.release']}/{props['ro.build.id']}/"
            f"{props['ro.build.version.incremental']}:{props['ro.build.type']}/{props['ro.build.tags']}"
        )
    return props


def unsparse(data: bytes) -> bytes:
    """The raw image of an Android sparse image (ImageError when it is malformed)."""
    try:
        (_, major, _, header_size, chunk_header_size, block_size, blocks, chunks,
         _) = _SPARSE_HEADER.unpack_from(data)
    except struct.error as exc:
        raise ImageError(f"sparse image: {exc}") from None
    if major != 1 or block_size % 4 or chunk_header_size < _CHUNK_HEADER.size:
        raise ImageError("sparse image: unsupported header")
    out = bytearray()
    offset = header_size
    for _ in range(chunks):
        if offset + chunk_header_size > len(data):
            raise ImageError("sparse image: truncated")
        kind, _, chunk_blocks, total = _CHUNK_HEADER.unpack_from(data, offset)
        body = data[offset + chunk_header_size:offset + total]
        offset += total
        size = chunk_blocks * block_size
        if kind == _CHUNK_RAW and len(body) == size:
            out += body
        elif kind == _CHUNK_FILL and len(body) == 4:
            out += body * (size // 4)
        elif kind == _CHUNK_DONT_CARE:
            out += bytes(size)
        elif kind != _CHUNK_CRC32:
            raise ImageError(f"sparse image: bad chunk {kind:#x}")
    if len(out) != blocks * block_size:
        raise ImageError("sparse image: its chunks do not add up to its blocks")
    return bytes(out)


def is_sparse(data: bytes) -> bool:
    """Whether `data` starts with the sparse image magic."""
    return len(data) >= 4 and struct.unpack_from("<I", data)[0] == SPARSE_MAGIC


class FlashStore:
    """The partitions of one board: `ROOT/flash/PARTITION.img` per flashed partition."""

    def __init__(self, root: Path) -> None:
        self.folder = root / "flash"

    def path(self, partition: str) -> Path:
        """Where `partition`'s image is kept."""
        return self.folder / f"{partition}.img"

    def check(self, partition: str) -> None:
        """ImageError unless `partition` exists on the board."""
        if partition not in PARTITIONS:
            raise ImageError(f"partition '{partition}' does not exist")

    def flash(self, partition: str, data: bytes) -> int:
        """Write `data` (raw or sparse) to `partition`; returns the bytes written."""
        self.check(partition)
        if is_sparse(data):
            data = unsparse(data)
        if len(data) > PARTITIONS[partition]:
            raise ImageError(f"image too large for partition '{partition}' "
                             f"({len(data)} > {PARTITIONS[partition]} bytes)")
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.path(partition).with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(self.path(partition))
        return len(data)

    def erase(self, partition: str) -> None:
        """Erase `partition` (its image is gone)."""
        self.check(partition)
        self.path(partition).unlink(missing_ok=True)

    def images(self) -> dict[str, bytes]:
        """Every flashed partition's image."""
        return {name: self.path(name).read_bytes() for name in PARTITIONS
                if self.path(name).is_file()}
