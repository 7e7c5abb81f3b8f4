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

The test rig's firmware builds (not a real firmware's way): lines `hil.virtual.fault=SPEC` in
the same head of the `system` image each name a fault (`faults.py`) the board arms at every
boot into Android, until the next boot (`firmware_faults`): a build "that computes op X
wrong" is a `system` image holding `hil.virtual.fault=miscompute,op=X`.

`fastboot getvar product` answers `product(chipset)`: the SoC's platform name (`s5e9955`
for E9955), the board's `ro.hardware` / `ro.board.platform` too.

Sparse images (AOSP's libsparse format, `system/core/libsparse/sparse_format.h`: what the
fastboot client sends for an image bigger than `max-download-size`, in pieces, or an image
built sparse) are written chunk by chunk: their "don't care" blocks keep what the partition
held, as a bootloader's sparse write does.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable, Mapping
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
WRITE_BLOCK = 1 << 20
"""Bytes a flash writes between looks at the power (`FlashStore.flash`)."""
BUILD_PROP_BYTES = 64 << 10
"""How much of the `system` image is read for `ro.build.*` lines."""
BUILD_RELEASE = "15"
BUILD_TYPE = "user"
BUILD_TAGS = "release-keys"
_BUILD_LINE = re.compile(rb"^(ro\.build\.[A-Za-z0-9_.\-]+)=([ -~]*)$", re.MULTILINE)
_FAULT_LINE = re.compile(rb"^hil\.virtual\.fault=([ -~]+)$", re.MULTILINE)

SPARSE_MAGIC = 0xED26FF3A
_SPARSE_HEADER = struct.Struct("<IHHHHIIII")
_CHUNK_HEADER = struct.Struct("<HHII")
_CHUNK_RAW, _CHUNK_FILL, _CHUNK_DONT_CARE, _CHUNK_CRC32 = 0xCAC1, 0xCAC2, 0xCAC3, 0xCAC4


class ImageError(Exception):
    """A flash or erase the storage refuses; its text is the FAIL message."""


def product(chipset: str) -> str:
    """What `fastboot getvar product` answers for a board of `chipset` (e.g. `s5e9955`)."""
    return soc_model(chipset).lower()


def build_properties(images: Mapping[str, bytes], name: str, device: str,
                     brand: str = "samsung") -> dict[str, str]:
    """The `ro.build.*` properties a board reports with `images` (partition -> bytes) flashed,
    its `ro.product.name`, `.device` and `.brand` being `name`, `device` and `brand`."""
    digests = {partition: hashlib.sha256(data).hexdigest() for partition, data in images.items()}
    return _properties(digests, images.get("system", b""), name, device, brand)


def _properties(digests: Mapping[str, str], system_head: bytes, name: str, device: str,
                brand: str) -> dict[str, str]:
    """The build of an image set given by its images' sha256 and the start of its system
    image (module docstring)."""
    lines = "".join(f"{partition} {digests[partition]}\n" for partition in sorted(digests))
    digest = hashlib.sha256(lines.encode()).hexdigest()
    props = {
        "ro.build.id": f"HIL.{digest[:8]}",
        "ro.build.version.incremental": digest[:12],
        "ro.build.version.release": BUILD_RELEASE,
        "ro.build.type": BUILD_TYPE,
        "ro.build.tags": BUILD_TAGS,
    }
    system = system_head[:BUILD_PROP_BYTES]
    given = {key.decode(): value.decode() for key, value in _BUILD_LINE.findall(system)}
    props.update(given)
    if "ro.build.fingerprint" not in given:
        props["ro.build.fingerprint"] = (
            f"{brand}/{name}/{device}:{props['ro.build.version.release']}/{props['ro.build.id']}/"
            f"{props['ro.build.version.incremental']}:{props['ro.build.type']}/{props['ro.build.tags']}"
        )
    return props


def firmware_faults(system_head: bytes) -> list[str]:
    """The fault SPECs of the `hil.virtual.fault=` lines of a `system` image's head."""
    return [spec.decode().strip() for spec in _FAULT_LINE.findall(system_head[:BUILD_PROP_BYTES])]


def unsparse(data: bytes, previous: bytes = b"", limit: int | None = None) -> bytes:
    """The partition's contents after writing the Android sparse image `data` over `previous`
    (its "don't care" blocks keep `previous`, zeros past its end); ImageError when `data` is
    malformed, or when its header says more than `limit` bytes (refused before anything is
    expanded, as a bootloader checks a sparse image's size against the partition first)."""
    try:
        (_, major, _, header_size, chunk_header_size, block_size, blocks, chunks,
         _) = _SPARSE_HEADER.unpack_from(data)
    except struct.error as exc:
        raise ImageError(f"sparse image: {exc}") from None
    if major != 1 or block_size % 4 or chunk_header_size < _CHUNK_HEADER.size:
        raise ImageError("sparse image: unsupported header")
    if limit is not None and blocks * block_size > limit:
        raise ImageError(f"image too large for the partition ({blocks * block_size} > {limit} bytes)")
    out = bytearray()
    offset = header_size
    for _ in range(chunks):
        if offset + chunk_header_size > len(data):
            raise ImageError("sparse image: truncated")
        kind, _, chunk_blocks, total = _CHUNK_HEADER.unpack_from(data, offset)
        if total < chunk_header_size or offset + total > len(data):
            raise ImageError("sparse image: truncated")
        body = data[offset + chunk_header_size:offset + total]
        offset += total
        size = chunk_blocks * block_size
        if len(out) + size > blocks * block_size:  # before a FILL of gigabytes is built
            raise ImageError("sparse image: its chunks exceed its blocks")
        if kind == _CHUNK_RAW and len(body) == size:
            out += body
        elif kind == _CHUNK_FILL and len(body) == 4:
            out += body * (size // 4)
        elif kind == _CHUNK_DONT_CARE:
            out += previous[len(out):len(out) + size].ljust(size, b"\0")
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

    def flash(self, partition: str, data: bytes, cut: Callable[[], bool] = lambda: False) -> int:
        """Write `data` (raw or sparse) to `partition` in place, WRITE_BLOCK bytes at a time;
        returns the bytes written. `cut` is asked before each block: once it says the power
        is gone, the write stops where it is (ImageError) and the partition keeps the new
        image's head over the old one's tail, as a block device does: the board then boots
        a build that is neither, and only a new flash mends it."""
        self.check(partition)
        path = self.path(partition)
        if is_sparse(data):
            data = unsparse(data, path.read_bytes() if path.is_file() else b"", PARTITIONS[partition])
        if len(data) > PARTITIONS[partition]:
            raise ImageError(f"image too large for partition '{partition}' "
                             f"({len(data)} > {PARTITIONS[partition]} bytes)")

        def power_lost(offset: int) -> ImageError:
            return ImageError(f"power cut while writing '{partition}' "
                              f"({offset} of {len(data)} bytes written)")

        if cut():
            raise power_lost(0)
        self.folder.mkdir(parents=True, exist_ok=True)
        with path.open("r+b" if path.is_file() else "wb") as image:
            for offset in range(0, len(data), WRITE_BLOCK):
                if offset and cut():
                    raise power_lost(offset)
                image.write(data[offset : offset + WRITE_BLOCK])
            image.truncate(len(data))
        return len(data)

    def erase(self, partition: str) -> None:
        """Erase `partition` (its image is gone)."""
        self.check(partition)
        self.path(partition).unlink(missing_ok=True)

    def build(self, name: str, device: str, brand: str) -> dict[str, str]:
        """The `ro.build.*` properties of the images flashed here (`build_properties`),
        reading each image once, in pieces."""
        digests: dict[str, str] = {}
        for partition in PARTITIONS:
            if self.path(partition).is_file():
                with self.path(partition).open("rb") as image:
                    digests[partition] = hashlib.file_digest(image, "sha256").hexdigest()
        return _properties(digests, self.system_head(), name, device, brand)

    def system_head(self) -> bytes:
        """The first BUILD_PROP_BYTES of the flashed `system` image (none: empty)."""
        if not self.path("system").is_file():
            return b""
        with self.path("system").open("rb") as image:
            return image.read(BUILD_PROP_BYTES)
