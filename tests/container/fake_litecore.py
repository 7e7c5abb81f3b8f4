"""A FAKE LITECORE SDK and a FAKE ENN wrapper: the real SDK cannot be downloaded here (it
needs Samsung's API key) and the real wrapper is built against it.

The fake SDK has the layout ExecuTorch's build expects (headers, x86-64 libraries). Its
libraries are real, minimal ELF shared objects (written byte by byte below: no compiler
needed) that the dynamic loader loads, so the fake wrapper behaves like the real one in the
way that matters: `make_wrapper` writes an `executorch/backends/samsung/python/` tree whose
`PyEnnWrapperAdaptor` and `PyGraphWrapperAdaptor` load the SDK's libraries by bare name
(`ctypes.CDLL("libgraph_wrapper.so")`), which only works in a process started with the
SDK's library folder on LD_LIBRARY_PATH: exactly how the pybind modules fail without it."""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path

HEADERS = ("graphgen_c.h", "graphgen_common.h", "graph_wrapper_api.h", "common-types.h")
LIBRARIES = ("libgraphgen_api.so", "libgraph_wrapper.so")
MARKER = b"hil-fake-litecore-header-7d41"
"""Written into every fake header: proves a scan of the image can see the SDK's files."""
X86_64 = 0x3E
AARCH64 = 0xB7
WRAPPER_LIBRARIES = {"PyEnnWrapperAdaptor": "libgraph_wrapper.so",
                     "PyGraphWrapperAdaptor": "libgraphgen_api.so"}
"""FAKE wrapper module -> the SDK library it loads."""


def elf_header(machine: int = X86_64) -> bytes:
    """The first 20 bytes of a 64-bit little-endian ELF shared object for `machine`."""
    return b"\x7fELF\x02\x01\x01" + bytes(9) + (3).to_bytes(2, "little") + machine.to_bytes(2, "little")


def shared_object(soname: str, machine: int = X86_64) -> bytes:
    """A minimal ELF64 shared object that glibc's loader maps: one PT_LOAD, PT_DYNAMIC
    (STRTAB, SYMTAB with the null symbol, SONAME), PT_GNU_STACK; no code, no symbols."""
    phnum = 3
    strtab = 64 + 56 * phnum
    dynstr = b"\0" + soname.encode() + b"\0"
    symtab = (strtab + len(dynstr) + 7) // 8 * 8
    dynamic = symtab + 24
    entries = [(5, strtab), (6, symtab), (10, len(dynstr)), (11, 24), (14, 1), (0, 0)]
    dyn = b"".join(struct.pack("<qQ", tag, value) for tag, value in entries)
    size = dynamic + len(dyn)
    header = elf_header(machine)[:16] + struct.pack(
        "<HHIQQQIHHHHHH", 3, machine, 1, 0, 64, 0, 0, 64, 56, phnum, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 6, 0, 0, 0, size, size, 0x1000)
    dynamic_header = struct.pack("<IIQQQQQQ", 2, 6, dynamic, dynamic, dynamic, len(dyn), len(dyn), 8)
    stack = struct.pack("<IIQQQQQQ", 0x6474E551, 6, 0, 0, 0, 0, 0, 16)
    body = header + load + dynamic_header + stack + dynstr
    return body + bytes(symtab - len(body)) + bytes(24) + dyn


def sdk_files(machine: int = X86_64) -> dict[str, bytes]:
    """Relative path -> content of the fake SDK."""
    files = {f"include/{h}": b"/* " + MARKER + b" */\n" for h in HEADERS}
    files.update({f"lib/x86_64-linux/{lib}": shared_object(lib, machine) for lib in LIBRARIES})
    files["README.txt"] = b"FAKE LITECORE SDK made by hil's tests\n"
    return files


def make_sdk(root: Path, *, drop: str | None = None) -> Path:
    """The fake SDK unpacked at `root` (as `tar --strip-components=1` leaves it)."""
    for relative, data in sdk_files().items():
        if relative != drop:
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_bytes(data)
    return root


def make_tarball(
    folder: Path,
    version: str = "1.1.0",
    *,
    drop: str | None = None,
    machine: int = X86_64,
    name: str | None = None,
    top: str | None = "",
) -> Path:
    """Write a fake `ai-litecore-ubuntu2204-v<version>.tar.gz` into `folder` and return it.
    `drop` leaves out one file (e.g. "lib/x86_64-linux/libgraph_wrapper.so"); `top` is the
    archive's top folder ("": `exynos-ai-litecore-v<version>`, None: no top folder)."""
    top = f"exynos-ai-litecore-v{version}" if top == "" else top
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"ai-litecore-ubuntu2204-v{version}.tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for relative, data in sorted(sdk_files(machine).items()):
            if relative == drop:
                continue
            info = tarfile.TarInfo(f"{top}/{relative}" if top else relative)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def make_wrapper(folder: Path, *, modules: tuple[str, ...] = tuple(WRAPPER_LIBRARIES),
                 libraries: dict[str, str] | None = None) -> Path:
    """A FAKE ExecuTorch tree holding the built wrapper, as an ExecuTorch checkout built with
    `backends/samsung/build.sh` does; put `folder` first on PYTHONPATH (upstream CI's
    `PYTHONPATH=CHECKOUT/..`). Each module in `modules` loads its SDK library (`libraries`
    overrides which) by bare name."""
    libraries = {**WRAPPER_LIBRARIES, **(libraries or {})}
    package = folder / "executorch" / "backends"
    (package / "samsung" / "python").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    for module in modules:
        (package / "samsung" / "python" / f"{module}.py").write_text(
            f'"""FAKE {module}: loads {libraries[module]} like the pybind module does."""\n'
            "import ctypes\n\n"
            "try:\n"
            f"    _sdk = ctypes.CDLL({libraries[module]!r})\n"
            "except OSError as exc:  # the loader's message, as an extension module raises it\n"
            "    raise ImportError(str(exc)) from None\n"
        )
    return folder
