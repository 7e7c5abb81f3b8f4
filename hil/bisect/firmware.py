"""Firmware candidates: `--firmware-builds DIR`, one folder per build, flashed with hil's
fastboot provisioning (hil/provision).

```
DIR/
  001-nightly-2026-11-01/      the folders' names order the builds (9 before 10)
    system.img                 the images an inventory's `images` names (by file name), or
    vendor.img                 for boards without `images` (--board virtual:N) PARTITION.img
    expected_build             optional: PROPERTY=VALUE, the build a board reports after
  002-nightly-2026-11-02/      the flash (checked, as an inventory's expected_build is)
  ...
```

The good and bad ends are the folders whose `expected_build` is the build GOOD's and BAD's
boards reported; without such folders, the first and the last.
"""

from __future__ import annotations

import re
from pathlib import Path

from hil.bisect.candidates import Candidate, ends, natural_key
from hil.board.images import PARTITION, PROPERTY, Image, Provisioning
from hil.board.inventory import InventoryEntry
from hil.errors import UsageError

EXPECTED_BUILD_FILE = "expected_build"
"""A build folder's file naming the build it makes a board report: one line PROPERTY=VALUE."""
_LINE = re.compile(r"([A-Za-z0-9_.-]{1,128})=(.+)")


def expected_build(folder: Path) -> tuple[str, str] | None:
    """The (property, value) a folder's `expected_build` file names; None without the file;
    UsageError naming the file when it is not one PROPERTY=VALUE line."""
    path = folder / EXPECTED_BUILD_FILE
    if not path.is_file():
        return None
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    match = _LINE.fullmatch(lines[0]) if len(lines) == 1 else None
    if match is None or not PROPERTY.match(match.group(1)):
        raise UsageError(f"{path}: expected one line PROPERTY=VALUE (e.g. ro.build.fingerprint=...)")
    return match.group(1), match.group(2).strip()


class FirmwareBuilds:
    """The build folders between GOOD's build and BAD's, in order."""

    name = "firmware"
    source = "--firmware-builds"

    def __init__(self, root: Path, good: str | None, bad: str | None) -> None:
        if not root.is_dir():
            raise UsageError(f"--firmware-builds {root}: not a folder")
        folders = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: natural_key(p.name))
        named = [(folder, expected_build(folder)) for folder in folders]
        values = [build[1] if build else None for _, build in named]
        found = [values.index(b) if b is not None and b in values else None for b in (good, bad)]
        try:
            first, last = ends(len(folders), *found, "--firmware-builds")
        except ValueError as exc:
            raise UsageError(f"--firmware-builds {root}: {exc}") from None
        self.root = root
        self.matched = tuple(index is not None for index in found)
        """Whether the good and the bad end were found by their build (else first, last)."""
        self.candidates = [
            Candidate("firmware", index - first, folder.name, folder.name, folder,
                      {"expected_build": f"{build[0]}={build[1]}" if build else None})
            for index, (folder, build) in enumerate(named) if first <= index <= last
        ]

    def prepare(self, candidate: Candidate) -> str | None:
        """A folder without an image cannot be flashed (skipped)."""
        assert candidate.path is not None
        if not any(candidate.path.glob("*.img")) and not any(
                p.is_file() and p.name != EXPECTED_BUILD_FILE for p in candidate.path.iterdir()):
            return f"{candidate.path}: no image"
        return None

    def provisioning(self, candidate: Candidate, entry: InventoryEntry) -> Provisioning:
        """The flash of `candidate` on `entry`'s board: the images its inventory names (by file
        name) from the candidate's folder, else every PARTITION.img there; its endpoint and
        product; the folder's expected build. InfraError-free: a missing image is the
        provisioner's `check images` step to fail."""
        assert candidate.path is not None and entry.provisioning is not None
        layout = entry.provisioning.images
        if layout:
            images = tuple(Image(image.partition, candidate.path / image.path.name) for image in layout)
        else:
            images = tuple(Image(path.stem, path) for path in sorted(candidate.path.glob("*.img"))
                           if PARTITION.match(path.stem))
        return Provisioning(images, expected_build(candidate.path), entry.provisioning.product,
                            entry.provisioning.fastboot)


def check_boards(entries: list[InventoryEntry]) -> None:
    """UsageError naming the first board that cannot be flashed (no fastboot endpoint or
    product in its inventory entry)."""
    for entry in entries:
        provisioning = entry.provisioning
        if provisioning is None or not provisioning.fastboot or not provisioning.product:
            raise UsageError(f"--firmware-builds: board {entry.name} cannot be flashed: its inventory "
                             "entry needs fastboot, product and images (or use --board virtual:N)")
