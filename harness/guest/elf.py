"""ELF reading for the guest build: sections, the dynamic loader, DT_NEEDED, kernel modules.

Only what the build needs of 64-bit little-endian ELF (x86-64): section
headers (a module's ``.modinfo``), PT_INTERP and the DT_NEEDED sonames of an
executable, and the ELF ``vmlinux`` inside an XZ bzImage.
"""

from __future__ import annotations

import functools
import lzma
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import ParamSpec, TypeVar

from harness.errors import GuestBuildError


class ElfError(ValueError):
    """The bytes are not a 64-bit little-endian ELF file we can read."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _readable(parse: Callable[_P, _R]) -> Callable[_P, _R]:
    """``parse`` raising :class:`ElfError`, never struct's or the codec's error, on bytes that
    are not the ELF their header says (a truncated file, an offset past its end)."""

    @functools.wraps(parse)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return parse(*args, **kwargs)
        except ElfError:
            raise
        except (struct.error, ValueError, OverflowError, IndexError) as exc:
            raise ElfError(f"malformed ELF ({exc})") from None

    return checked


@dataclass(frozen=True)
class ElfSection:
    name: str
    type: int
    offset: int
    size: int
    link: int


_PT_DYNAMIC = 2
_PT_INTERP = 3
_PT_LOAD = 1
_DT_NEEDED = 1
_DT_STRTAB = 5
_DT_RPATH = 15
_DT_RUNPATH = 29
_DT_NULL = 0


def _elf_header(data: bytes) -> tuple[int, int, int, int, int, int, int]:
    """(phoff, shoff, phentsize, phnum, shentsize, shnum, shstrndx) of an ELF64 LE file."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("only 64-bit little-endian ELF is supported")
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
    return phoff, shoff, phentsize, phnum, shentsize, shnum, shstrndx


@_readable
def elf_sections(data: bytes) -> list[ElfSection]:
    """The section headers, with names resolved."""
    _, shoff, _, _, shentsize, shnum, shstrndx = _elf_header(data)
    raw: list[tuple[int, int, int, int, int]] = []
    for i in range(shnum):
        off = shoff + i * shentsize
        name, typ, _flags, _addr, offset, size, link = struct.unpack_from("<IIQQQQI", data, off)
        raw.append((name, typ, offset, size, link))
    if not raw:
        return []
    str_off, str_size = raw[shstrndx][2], raw[shstrndx][3]
    strtab = data[str_off : str_off + str_size]

    def name_at(i: int) -> str:
        end = strtab.find(b"\0", i)
        return strtab[i : end if end >= 0 else None].decode("ascii", "replace")

    return [ElfSection(name_at(n), t, o, s, lk) for n, t, o, s, lk in raw]


def elf_section_data(data: bytes, name: str) -> bytes | None:
    """The bytes of the first section called ``name``, or None."""
    for sec in elf_sections(data):
        if sec.name == name:
            return data[sec.offset : sec.offset + sec.size]
    return None


def _program_headers(data: bytes) -> list[tuple[int, int, int, int]]:
    """(type, offset, vaddr, filesz) of each program header."""
    phoff, _, phentsize, phnum, _, _, _ = _elf_header(data)
    out = []
    for i in range(phnum):
        off = phoff + i * phentsize
        typ, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, off)
        out.append((typ, offset, vaddr, filesz))
    return out


@_readable
def elf_interpreter(data: bytes) -> str | None:
    """The PT_INTERP path (the dynamic loader) of an executable, or None."""
    for typ, offset, _vaddr, filesz in _program_headers(data):
        if typ == _PT_INTERP:
            return data[offset : offset + filesz].rstrip(b"\0").decode()
    return None


def _dynamic_strings(data: bytes, wanted: int) -> list[str]:
    """The strings of the dynamic table's entries tagged ``wanted``, in order; [] if static.

    The dynamic table gives the string table as a virtual address, so it is
    mapped back to a file offset through the PT_LOAD segments.
    """
    phdrs = _program_headers(data)
    dyn = [(o, s) for t, o, _v, s in phdrs if t == _PT_DYNAMIC]
    if not dyn:
        return []
    dyn_off, dyn_size = dyn[0]
    entries: list[tuple[int, int]] = []
    for pos in range(dyn_off, dyn_off + dyn_size, 16):
        tag, val = struct.unpack_from("<qQ", data, pos)
        if tag == _DT_NULL:
            break
        entries.append((tag, val))
    strtab_vaddr = next((v for t, v in entries if t == _DT_STRTAB), None)
    if strtab_vaddr is None:
        raise ElfError("dynamic section without DT_STRTAB")
    strtab_off = None
    for typ, offset, vaddr, filesz in phdrs:
        if typ == _PT_LOAD and vaddr <= strtab_vaddr < vaddr + filesz:
            strtab_off = strtab_vaddr - vaddr + offset
            break
    if strtab_off is None:
        raise ElfError("DT_STRTAB is outside every PT_LOAD segment")
    found = []
    for tag, val in entries:
        if tag == wanted:
            start = strtab_off + val
            found.append(data[start : data.index(b"\0", start)].decode())
    return found


@_readable
def elf_needed(data: bytes) -> list[str]:
    """The DT_NEEDED entries (sonames) of a dynamic ELF file, in order; [] if static."""
    return _dynamic_strings(data, _DT_NEEDED)


@_readable
def elf_runpath(data: bytes) -> list[str]:
    """The directories of DT_RUNPATH (else DT_RPATH), in order; [] if neither.

    ``$ORIGIN`` is left as it is: it is the directory of the file, which the caller knows.
    """
    paths = _dynamic_strings(data, _DT_RUNPATH) or _dynamic_strings(data, _DT_RPATH)
    return [d for entry in paths for d in entry.split(":") if d]


def vmlinux_from_bzimage(bzimage: bytes) -> bytes:
    """Decompress the ELF ``vmlinux`` inside an XZ-compressed x86 bzImage.

    The setup header gives the protected-mode code's start (after
    ``setup_sects``) and, within it, the compressed payload's offset and length.
    """
    if len(bzimage) < 0x250 or bzimage[0x202:0x206] != b"HdrS":
        raise GuestBuildError("kernel image is not an x86 bzImage (no HdrS header)")
    setup_sects = bzimage[0x1F1] or 4
    payload_offset, payload_length = struct.unpack_from("<II", bzimage, 0x248)
    start = (setup_sects + 1) * 512 + payload_offset
    payload = bzimage[start : start + payload_length]
    if not payload.startswith(b"\xfd7zXZ\0"):
        raise GuestBuildError("bzImage payload is not XZ-compressed; this build expects Debian's XZ kernel")
    vmlinux = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(payload)
    if not vmlinux.startswith(b"\x7fELF"):
        raise GuestBuildError("decompressed bzImage payload is not an ELF vmlinux")
    return vmlinux


# --------------------------------------------------------------------------- modules


def parse_modinfo(section: bytes) -> dict[str, list[str]]:
    """Parse a ``.modinfo`` section: NUL-separated ``key=value`` strings, keys may repeat."""
    info: dict[str, list[str]] = {}
    for item in section.split(b"\0"):
        if b"=" not in item:
            continue
        key, _, value = item.decode("utf-8", "replace").partition("=")
        info.setdefault(key, []).append(value)
    return info


def module_name(path_or_name: str) -> str:
    """The kernel's name of a module: file stem with ``-`` as ``_`` (``crc32c-intel`` -> ``crc32c_intel``)."""
    name = PurePosixPath(path_or_name).name
    if name.endswith(".ko"):
        name = name[:-3]
    return name.replace("-", "_")


def module_depends(modinfo: Mapping[str, list[str]]) -> list[str]:
    """The hard dependencies listed in a module's ``depends=`` field."""
    deps: list[str] = []
    for value in modinfo.get("depends", []):
        deps += [module_name(d) for d in value.split(",") if d]
    return deps


def module_load_order(
    wanted: Sequence[str],
    depends: Callable[[str], Sequence[str]],
    builtin: Iterable[str] = (),
) -> list[str]:
    """Modules to insmod, dependencies before dependents, each once.

    ``depends(name)`` returns a module's hard dependencies (it raises
    ``KeyError`` for a module that does not exist). Built-in modules need no
    loading and are left out. The order is deterministic: a depth-first walk in
    the order of ``wanted``.
    """
    skip = {module_name(b) for b in builtin}
    order: list[str] = []
    done: set[str] = set()
    active: list[str] = []

    def visit(name: str) -> None:
        name = module_name(name)
        if name in done or name in skip:
            return
        if name in active:
            raise GuestBuildError(f"module dependency cycle: {' -> '.join([*active, name])}")
        active.append(name)
        for dep in depends(name):
            visit(dep)
        active.pop()
        done.add(name)
        order.append(name)

    for want in wanted:
        visit(want)
    return order
