"""What a board should run: its known-good images, where to flash them, and the build they give.
A plain validated record of an inventory entry (the flasher that uses it: hil/provision/).

```yaml
x-e9955-build: &e9955-build          # shared by a YAML anchor
  images:                            # partition -> image file (relative to the inventory file),
    boot: images/boot.img            #   or {file: F, sha256: HEX} to check its digest
    vendor: {file: images/vendor.img, sha256: 9f86d08...}
  flash_order: [boot, vendor]        # optional: these first, then the rest in `images` order
  expected_build: {ro.build.fingerprint: "samsung/e9955/e9955:14/UP1A/1:userdebug/test-keys"}
  product: e9955                     # what `fastboot getvar product` must say
boards:
  - {name: e9955-a, adb: R3CX40ABCDE, chipset: E9955, fastboot: R3CX40ABCDE, <<: *e9955-build}
  - {name: e9955-b, adb: 10.0.0.7:5555, chipset: E9955, fastboot: "tcp:10.0.0.7:5554", <<: *e9955-build}
```

`expected_build` alone (no images) only checks and records the build. `images` needs
`product`, `fastboot` and `expected_build`: a flash is refused on a board of another product,
and judged by the build the board reports after its reboot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.errors import Where

FIELDS = ("images", "flash_order", "expected_build", "product", "fastboot")
"""The inventory fields of this record."""
PARTITION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
"""A partition name as fastboot takes it: not starting with `-` (it would read an option)."""
PROPERTY = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
USB_SERIAL = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
NET_ENDPOINT = re.compile(r"^(tcp|udp):([A-Za-z0-9.-]{1,253}):(\d{1,5})$")
"""`fastboot -s tcp:HOST:PORT` (AOSP fastboot's network transports; labgrid's AndroidNetFastboot)."""


@dataclass(frozen=True)
class Image:
    """One image to flash."""

    partition: str
    path: Path
    """Absolute (resolved against the inventory file's folder)."""
    sha256: str | None = None
    """Checked before the board leaves adb, when given."""


@dataclass(frozen=True)
class Provisioning:
    """A board's known-good build: images in flash order, the product, the endpoint, the build."""

    images: tuple[Image, ...] = ()
    """In the order they are flashed; empty: the build is only checked."""
    expected_build: tuple[str, str] | None = None
    """(property, value) the board must report, e.g. ('ro.build.fingerprint', '...')."""
    product: str | None = None
    """What `fastboot getvar product` must answer before anything is written."""
    fastboot: str | None = None
    """The fastboot endpoint: a USB serial, or `tcp:HOST:PORT` / `udp:HOST:PORT`."""
    fastboot_via: str | None = None
    """The host fastboot runs on over ssh: a labgrid place's exporter (or its proxy), where
    labgrid runs it; None: this host."""

    @property
    def flashable(self) -> bool:
        """Images are configured (and with them product, endpoint and build)."""
        return bool(self.images)

    def with_endpoint(self, endpoint: str, via: str | None = None) -> Provisioning:
        """The same record with another fastboot endpoint (a labgrid place's resource), run
        on `via` over ssh when given."""
        return Provisioning(self.images, self.expected_build, self.product, endpoint, via)


def check_endpoint(value: str) -> str | None:
    """Why `value` is not a fastboot endpoint, or None."""
    match = NET_ENDPOINT.match(value)
    if match:
        return None if 1 <= int(match.group(3)) <= 65535 else "port out of range"
    if ":" in value or not USB_SERIAL.match(value):
        return "expected a USB serial or tcp:HOST:PORT (udp:HOST:PORT)"
    return None


def parse_provisioning(where: Where, item: dict[str, Any], base: Path,
                       endpoint_given: bool = False) -> Provisioning | None:
    """The record of an inventory entry's provisioning fields (None when it has none);
    UsageError naming the file, the entry and the field otherwise. `endpoint_given`: the
    endpoint comes from elsewhere (a labgrid place's fastboot resource)."""
    if not any(key in item for key in FIELDS):
        return None
    build = _expected_build(where, item.get("expected_build"))
    images = _images(where, item.get("images"), base)
    if not images:
        for field in ("flash_order", "product", "fastboot"):
            if field in item:
                raise where.error(field, "only with images")
    order = _order(where, item.get("flash_order"), images)
    product = _word(where, item, "product")
    fastboot = _word(where, item, "fastboot")
    if fastboot is not None and (problem := check_endpoint(fastboot)):
        raise where.error("fastboot", f"{fastboot!r}: {problem}")
    if images:
        for field, value in (("product", product), ("expected_build", build)):
            if value is None:
                raise where.error(field, "required with images (a flash is checked against it)")
        if fastboot is None and not endpoint_given:
            raise where.error("fastboot", "required with images: the USB serial or tcp:HOST:PORT")
    ordered = tuple(images[p] for p in order) + tuple(i for p, i in images.items() if p not in order)
    return Provisioning(ordered, build, product, fastboot)


def _word(where: Where, item: dict[str, Any], field: str) -> str | None:
    value = item.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or not value.strip().isprintable():
        raise where.error(field, "expected a non-empty string")
    return value.strip()


def _expected_build(where: Where, raw: Any) -> tuple[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or len(raw) != 1:
        raise where.error("expected_build", "expected one {PROPERTY: VALUE}, e.g. "
                                            "{ro.build.fingerprint: '...'}")
    (prop, value), = raw.items()
    if not isinstance(prop, str) or not PROPERTY.match(prop):
        raise where.error("expected_build", f"{prop!r} is not a property name")
    if not isinstance(value, (str, int)) or isinstance(value, bool) or not str(value).strip():
        raise where.error(f"expected_build.{prop}", "expected a non-empty string")
    return prop, str(value).strip()


def _images(where: Where, raw: Any, base: Path) -> dict[str, Image]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        raise where.error("images", "expected a mapping PARTITION: FILE (or {file, sha256})")
    images = {}
    for partition, spec in raw.items():
        field = f"images.{partition}"
        if not isinstance(partition, str) or not PARTITION.match(partition):
            raise where.error("images", f"{partition!r} is not a partition name")
        digest = None
        if isinstance(spec, dict):
            if set(spec) - {"file", "sha256"} or "file" not in spec:
                raise where.error(field, "expected FILE or {file: FILE, sha256: HEX}")
            digest = spec.get("sha256")
            if digest is not None and (not isinstance(digest, str) or not SHA256.match(digest.lower())):
                raise where.error(f"{field}.sha256", "expected 64 hexadecimal digits")
            digest = digest.lower() if digest else None
            spec = spec["file"]
        if not isinstance(spec, str) or not spec.strip():
            raise where.error(field, "expected an image file path")
        path = Path(spec.strip())
        images[partition] = Image(partition, path if path.is_absolute() else base / path, digest)
    return images


def _order(where: Where, raw: Any, images: dict[str, Image]) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw) or not raw:
        raise where.error("flash_order", "expected a list of partitions")
    for partition in raw:
        if partition not in images:
            raise where.error("flash_order", f"{partition!r} has no image (images: "
                                             f"{', '.join(images) or 'none'})")
    if len(set(raw)) != len(raw):
        raise where.error("flash_order", "a partition appears twice")
    return list(raw)
