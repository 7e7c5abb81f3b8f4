"""A FAKE LITECORE SDK tarball: the real SDK cannot be downloaded here (it needs Samsung's
API key). It has the layout ExecuTorch's build expects (top folder, headers, x86-64 library
files) so the installer's checks can be exercised; the libraries are ELF headers only and
link nothing."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

HEADERS = ("graphgen_c.h", "graphgen_common.h", "graph_wrapper_api.h")
LIBRARIES = ("libgraphgen_api.so", "libgraph_wrapper.so")
MARKER = b"hil-fake-litecore-header-7d41"
"""Written into every fake header: proves a scan of the image can see the SDK's files."""
X86_64 = 0x3E
AARCH64 = 0xB7


def elf_header(machine: int = X86_64) -> bytes:
    """The first 20 bytes of a 64-bit little-endian ELF shared object for `machine`."""
    return b"\x7fELF\x02\x01\x01" + bytes(9) + (3).to_bytes(2, "little") + machine.to_bytes(2, "little")


def make_tarball(
    folder: Path,
    version: str = "1.1.0",
    *,
    drop: str | None = None,
    machine: int = X86_64,
    name: str | None = None,
) -> Path:
    """Write a fake `ai-litecore-ubuntu2204-v<version>.tar.gz` into `folder` and return it.
    `drop` leaves out one file (e.g. "lib/x86_64-linux/libgraph_wrapper.so")."""
    top = f"exynos-ai-litecore-v{version}"
    files = {f"include/{h}": b"/* " + MARKER + b" */\n" for h in HEADERS}
    files.update({f"lib/x86_64-linux/{lib}": elf_header(machine) for lib in LIBRARIES})
    files["README.txt"] = b"FAKE LITECORE SDK made by hil's tests\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"ai-litecore-ubuntu2204-v{version}.tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for relative, data in sorted(files.items()):
            if relative == drop:
                continue
            info = tarfile.TarInfo(f"{top}/{relative}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
