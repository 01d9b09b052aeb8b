"""Build the benchmark guest from pinned Debian packages, and the pure helpers it needs.

The guest is a kernel plus an initramfs, booted with QEMU's direct kernel boot:

* ``vmlinux``: the ELF kernel taken out of Debian's bzImage. Under TCG the XZ
  decompression of a bzImage costs seconds on every boot; QEMU boots the ELF
  directly through PVH.
* ``initramfs.cpio``: busybox, the real tools the workloads call (mke2fs,
  e2fsck, sfdisk, dpkg-deb, tar, bonnie++), exactly the shared libraries they
  need, the kernel modules for every disk bus in their load order, and
  ``images/init``.
* ``payload-<name>.img``: ext2 images holding the install workload's input,
  Debian's minbase package set repacked with uncompressed members so that the
  guest measures disk IO rather than decompression.

Everything comes from ``apt-get download`` of pinned versions; nothing is
downloaded as a prebuilt image. The build goes to ``cache/guest/<recipe_hash>/``
and is reused until a file under ``images/`` (or :data:`BUILD_CODE_VERSION`)
changes.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import stat
import struct
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import CommandError, GuestBuildError
from harness.paths import IMAGES_DIR, cache_dir
from harness.proc import run

#: Bump when the build code changes what it produces; part of the recipe hash.
BUILD_CODE_VERSION = "1"

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1
PIN_COMMAND = "diskbench guest pin"

#: Where the dynamic loader looks in the guest (no ld.so.cache is built).
LIBRARY_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/lib",
    "/usr/lib",
)

Log = Callable[[str], None]


# --------------------------------------------------------------------------- recipe


@dataclass(frozen=True)
class PayloadPackage:
    """One package of the install payload, from ``images/payload.lock``."""

    name: str
    version: str
    essential: bool  # extracted first (debootstrap's "required" set)


@dataclass(frozen=True)
class Recipe:
    """The parsed guest recipe: ``images/recipe.toml`` plus ``images/payload.lock``."""

    kernel_package: str
    kernel_version: str
    modules: tuple[str, ...]
    initramfs_packages: Mapping[str, str]
    initramfs_files: tuple[str, ...]
    payload: tuple[PayloadPackage, ...]
    payload_small: tuple[str, ...]
    suite: str
    variant: str

    def payload_sets(self) -> dict[str, tuple[PayloadPackage, ...]]:
        """The named payloads: ``full`` is every locked package, ``small`` the listed subset."""
        small = set(self.payload_small)
        return {
            "full": self.payload,
            "small": tuple(p for p in self.payload if p.name in small),
        }

    def all_pins(self) -> dict[str, str]:
        """Every pinned package of guest and payload, name -> version."""
        pins = {self.kernel_package: self.kernel_version}
        pins.update(self.initramfs_packages)
        for p in self.payload:
            pins.setdefault(p.name, p.version)
        return pins


def parse_payload_lock(text: str) -> tuple[PayloadPackage, ...]:
    """Parse ``payload.lock``: ``name version essential|base`` per line, ``#`` comments."""
    out: list[PayloadPackage] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or parts[2] not in ("essential", "base"):
            raise GuestBuildError(
                f"payload.lock line {lineno}: expected 'name version essential|base', "
                f"got {raw!r}; regenerate it with `{PIN_COMMAND}`"
            )
        out.append(PayloadPackage(parts[0], parts[1], parts[2] == "essential"))
    return tuple(out)


def format_payload_lock(packages: Iterable[PayloadPackage], *, header: str = "") -> str:
    """The text of ``payload.lock``; essential packages first, each group sorted by name."""
    pkgs = sorted(packages, key=lambda p: (not p.essential, p.name))
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines += [f"{p.name} {p.version} {'essential' if p.essential else 'base'}" for p in pkgs]
    return "\n".join(lines) + "\n"


def _table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise GuestBuildError(f"{where}: missing table [{key}]")
    return value


def _str_list(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GuestBuildError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _str(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise GuestBuildError(f"{where}: {key} must be a non-empty string")
    return value


def parse_recipe(recipe_toml: str, payload_lock: str, *, require_lock: bool = True) -> Recipe:
    """Parse the recipe texts (pure); errors name the file and the key.

    ``require_lock=False`` accepts a missing or stale payload lock (what
    re-pinning starts from).
    """
    where = "images/recipe.toml"
    try:
        data = tomllib.loads(recipe_toml)
    except tomllib.TOMLDecodeError as exc:
        raise GuestBuildError(f"{where}: {exc}") from exc
    kernel = _table(data, "kernel", where)
    initramfs = _table(data, "initramfs", where)
    pkgs = _table(initramfs, "packages", where)
    if not all(isinstance(v, str) for v in pkgs.values()):
        raise GuestBuildError(f"{where}: [initramfs.packages] values must be version strings")
    payload_cfg = _table(data, "payload", where)
    payload = parse_payload_lock(payload_lock) if require_lock else ()
    names = {p.name for p in payload}
    small = _str_list(payload_cfg, "small", where)
    unknown = sorted(set(small) - names)
    if require_lock and not payload:
        raise GuestBuildError(f"images/payload.lock is empty; generate it with `{PIN_COMMAND}`")
    if require_lock and unknown:
        raise GuestBuildError(
            f"{where}: payload.small names packages not in payload.lock: {', '.join(unknown)}"
        )
    return Recipe(
        kernel_package=_str(kernel, "package", where),
        kernel_version=_str(kernel, "version", where),
        modules=_str_list(kernel, "modules", where),
        initramfs_packages=dict(pkgs),
        initramfs_files=_str_list(initramfs, "files", where),
        payload=payload,
        payload_small=small,
        suite=_str(payload_cfg, "suite", where),
        variant=_str(payload_cfg, "variant", where),
    )


def load_recipe(recipe_dir: Path = IMAGES_DIR, *, require_lock: bool = True) -> Recipe:
    """Read and parse the recipe in ``recipe_dir``."""
    try:
        toml_text = (recipe_dir / "recipe.toml").read_text()
        lock_path = recipe_dir / "payload.lock"
        lock_text = lock_path.read_text() if require_lock or lock_path.exists() else ""
    except OSError as exc:
        raise GuestBuildError(f"cannot read the guest recipe in {recipe_dir}: {exc}") from exc
    return parse_recipe(toml_text, lock_text, require_lock=require_lock)


def recipe_hash(recipe_dir: Path = IMAGES_DIR) -> str:
    """A short hash over every file under ``recipe_dir`` and the build code version.

    Any change to the recipe, the init script or the workloads gives a new
    build directory, so a stale guest is never reused.
    """
    files = sorted(p for p in recipe_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return hash_files((p.relative_to(recipe_dir).as_posix(), p.read_bytes()) for p in files)


def hash_files(files: Iterable[tuple[str, bytes]]) -> str:
    """Pure part of :func:`recipe_hash`: names and contents, order-independent."""
    h = hashlib.sha256(f"diskbench-guest-build {BUILD_CODE_VERSION}\n".encode())
    for name, data in sorted(files):
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- ELF


class ElfError(ValueError):
    """The bytes are not a 64-bit little-endian ELF file we can read."""


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


def elf_interpreter(data: bytes) -> str | None:
    """The PT_INTERP path (the dynamic loader) of an executable, or None."""
    for typ, offset, _vaddr, filesz in _program_headers(data):
        if typ == _PT_INTERP:
            return data[offset : offset + filesz].rstrip(b"\0").decode()
    return None


def elf_needed(data: bytes) -> list[str]:
    """The DT_NEEDED entries (sonames) of a dynamic ELF file, in order; [] if static.

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
    needed = []
    for tag, val in entries:
        if tag == _DT_NEEDED:
            start = strtab_off + val
            needed.append(data[start : data.index(b"\0", start)].decode())
    return needed


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


# --------------------------------------------------------------------------- cpio


class CpioWriter:
    """Writes a cpio ``newc`` archive, the format the kernel unpacks as initramfs.

    Headers and file data are padded to 4 bytes; the archive ends with the
    ``TRAILER!!!`` entry. Owners are root and mtimes fixed, so the same inputs
    give the same bytes.
    """

    def __init__(self, out: Any, *, mtime: int = 0) -> None:
        self._out = out
        self._ino = 0
        self._mtime = mtime
        self._pos = 0
        self._seen: set[str] = set()

    def _write(self, data: bytes) -> None:
        self._out.write(data)
        self._pos += len(data)

    def _pad(self) -> None:
        self._write(b"\0" * (-self._pos % 4))

    def _entry(self, name: str, mode: int, data: bytes = b"", *, rdev: tuple[int, int] = (0, 0)) -> None:
        name = name.lstrip("/") or "."
        if name in self._seen and name != "TRAILER!!!":
            return
        self._seen.add(name)
        self._ino += 1
        encoded = name.encode() + b"\0"
        fields = (
            self._ino,
            mode,
            0,
            0,
            2 if stat.S_ISDIR(mode) else 1,
            self._mtime,
            len(data),
            0,
            0,
            rdev[0],
            rdev[1],
            len(encoded),
            0,
        )
        self._write(b"070701" + b"".join(f"{f:08x}".encode() for f in fields))
        self._write(encoded)
        self._pad()
        self._write(data)
        self._pad()

    def add_dir(self, name: str, mode: int = 0o755) -> None:
        """Add a directory and, first, its missing parents."""
        parts = PurePosixPath(name.lstrip("/")).parts
        for i in range(1, len(parts) + 1):
            self._entry("/".join(parts[:i]), stat.S_IFDIR | mode)

    def _parents(self, name: str) -> None:
        parent = str(PurePosixPath(name.lstrip("/")).parent)
        if parent != ".":
            self.add_dir(parent)

    def add_file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._parents(name)
        self._entry(name, stat.S_IFREG | mode, data)

    def add_symlink(self, name: str, target: str) -> None:
        self._parents(name)
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def add_chardev(self, name: str, major: int, minor: int, mode: int = 0o600) -> None:
        self._parents(name)
        self._entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def close(self) -> None:
        """Write the trailer; the archive is complete after this."""
        self._entry("TRAILER!!!", 0)


@dataclass(frozen=True)
class CpioEntry:
    name: str
    mode: int
    data: bytes
    rdev: tuple[int, int]


def read_cpio(data: bytes) -> list[CpioEntry]:
    """Parse a ``newc`` archive (up to its trailer), for checks of a built initramfs."""
    entries: list[CpioEntry] = []
    pos = 0
    while True:
        if data[pos : pos + 6] != b"070701":
            raise ValueError(f"bad cpio magic at offset {pos}")
        fields = [int(data[pos + 6 + 8 * i : pos + 14 + 8 * i], 16) for i in range(13)]
        mode, filesize, rmajor, rminor, namesize = (
            fields[1], fields[6], fields[9], fields[10], fields[11]
        )  # fmt: skip
        name_start = pos + 110
        name = data[name_start : name_start + namesize - 1].decode()
        data_start = name_start + namesize + (-(110 + namesize) % 4)
        body = data[data_start : data_start + filesize]
        pos = data_start + filesize + (-filesize % 4)
        if name == "TRAILER!!!":
            return entries
        entries.append(CpioEntry(name, mode, body, (rmajor, rminor)))


# --------------------------------------------------------------------------- kernel


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


# --------------------------------------------------------------------------- packages


def deb_filename(name: str, version: str, arch: str) -> str:
    """The file name ``apt-get download`` gives a package (epoch colon as ``%3a``)."""
    return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


def _cached_deb(debs: Path, name: str, version: str) -> Path | None:
    for arch in ("amd64", "all"):
        path = debs / deb_filename(name, version, arch)
        if path.is_file():
            return path
    return None


def fetch_debs(pins: Mapping[str, str], debs: Path, log: Log) -> dict[str, Path]:
    """Download each ``name=version`` into ``debs`` unless already there; name -> path.

    Missing packages are fetched with one ``apt-get download`` call; a pin the
    mirror no longer has fails with the package named and the re-pin command.
    """
    debs.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    missing: dict[str, str] = {}
    for name, version in pins.items():
        path = _cached_deb(debs, name, version)
        if path is None:
            missing[name] = version
        else:
            found[name] = path
    if missing:
        log(f"guest: downloading {len(missing)} packages into {debs}")
        with tempfile.TemporaryDirectory(dir=debs, prefix=".dl-") as tmp:
            for name, version in sorted(missing.items()):
                # One call per package so the error names the pin that failed.
                try:
                    run(["apt-get", "download", f"{name}={version}"], cwd=tmp, timeout_s=600)
                except CommandError as exc:
                    raise GuestBuildError(
                        f"cannot fetch pinned package {name}={version} "
                        f"({exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else exc}); "
                        f"the mirror has moved on: re-pin with `{PIN_COMMAND}`",
                        argv=exc.argv,
                        returncode=exc.returncode,
                        stderr=exc.stderr,
                    ) from exc
                for got in Path(tmp).glob("*.deb"):
                    os.replace(got, debs / got.name)
                path = _cached_deb(debs, name, version)
                if path is None:
                    raise GuestBuildError(
                        f"apt-get download {name}={version} gave no file named like "
                        f"{deb_filename(name, version, 'amd64')}; re-pin with `{PIN_COMMAND}`"
                    )
                found[name] = path
    return found


def extract_deb(deb: Path, dest: Path) -> None:
    """Unpack a package's files (not its scripts) into ``dest``."""
    run(["dpkg-deb", "-x", deb, dest], timeout_s=600, error_cls=GuestBuildError)


def repack_uncompressed(deb: Path, out: Path, tmp_root: Path) -> None:
    """Rebuild ``deb`` at ``out`` with uncompressed members (``dpkg-deb -Znone``).

    The guest's unpack then costs IO, not XZ decompression under emulation.
    """
    with tempfile.TemporaryDirectory(dir=tmp_root, prefix="repack-") as tmp:
        tree = Path(tmp) / "tree"
        run(["dpkg-deb", "-R", deb, tree], timeout_s=600, error_cls=GuestBuildError)
        part = out.with_name(out.name + ".part")
        run(
            ["dpkg-deb", "-Znone", "--nocheck", "-b", tree, part],
            timeout_s=600,
            error_cls=GuestBuildError,
        )
        os.replace(part, out)


# --------------------------------------------------------------------------- rootfs


class Tree:
    """A directory of extracted packages, seen with guest paths (``/sbin/mke2fs``).

    Symlinks are resolved inside the tree, never against the host.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def host(self, guest_path: str) -> Path:
        return self.root / guest_path.lstrip("/")

    def resolve(self, guest_path: str, *, depth: int = 0) -> str | None:
        """The guest path after following symlinks in every component, or None if missing."""
        if depth > 40:
            return None
        parts = PurePosixPath("/" + guest_path.lstrip("/")).parts[1:]
        current = PurePosixPath("/")
        for i, part in enumerate(parts):
            candidate = current / part
            host = self.host(str(candidate))
            if host.is_symlink():
                target = os.readlink(host)
                base = PurePosixPath("/") if target.startswith("/") else current
                rest = "/".join(parts[i + 1 :])
                joined = os.path.normpath(str(base / target / rest) if rest else str(base / target))
                return self.resolve(joined, depth=depth + 1)
            if not host.exists() and not host.is_symlink():
                return None
            current = candidate
        return str(current)

    def find_library(self, soname: str) -> str | None:
        for d in LIBRARY_DIRS:
            if self.resolve(f"{d}/{soname}") is not None:
                return f"{d}/{soname}"
        return None


@dataclass
class _Collected:
    files: dict[str, Path] = field(default_factory=dict)  # guest path -> host file
    symlinks: dict[str, str] = field(default_factory=dict)  # guest path -> target


def collect_with_libraries(tree: Tree, paths: Sequence[str]) -> _Collected:
    """The files at ``paths``, their symlink chains, and every shared library they need.

    DT_NEEDED is followed recursively, and each executable's PT_INTERP (the
    dynamic loader) is included; a library that no pinned package provides
    fails the build with its soname.
    """
    got = _Collected()
    queue: list[tuple[str, str]] = [(p, "recipe") for p in paths]
    while queue:
        path, wanted_by = queue.pop(0)
        if path in got.files or path in got.symlinks:
            continue
        # Record every symlink on the way so the guest sees the same names.
        current = path
        for _ in range(40):
            host = tree.host(current)
            if not host.is_symlink():
                break
            target = os.readlink(host)
            got.symlinks[current] = target
            base = PurePosixPath("/") if target.startswith("/") else PurePosixPath(current).parent
            current = os.path.normpath(str(base / target))
        real = tree.resolve(current)
        if real is None:
            raise GuestBuildError(
                f"{path} (needed by {wanted_by}) is in no pinned initramfs package; "
                f"add its package to [initramfs.packages] in images/recipe.toml"
            )
        if real != current:
            got.symlinks.setdefault(current, real)
        host = tree.host(real)
        got.files[real] = host
        data = host.read_bytes()
        if not data.startswith(b"\x7fELF"):
            continue
        interp = elf_interpreter(data)
        if interp:
            queue.append((interp, real))
        for soname in elf_needed(data):
            lib = tree.find_library(soname)
            if lib is None:
                raise GuestBuildError(
                    f"shared library {soname} (needed by {real}) is in no pinned initramfs "
                    f"package; add the library's package to [initramfs.packages]"
                )
            queue.append((lib, real))
    return got


# --------------------------------------------------------------------------- artifacts


@dataclass(frozen=True)
class GuestArtifacts:
    """A built guest: what the VM runner boots and what a record says it booted."""

    build_dir: Path
    kernel: Path  # ELF vmlinux, booted through PVH
    initrd: Path  # uncompressed cpio newc
    payloads: Mapping[str, Path]  # "small", "full" -> ext2 image
    recipe_hash: str
    kernel_version: str  # uname -r of the guest, e.g. "6.1.0-50-amd64"
    packages: Mapping[str, str]  # every pinned package, name -> version
    payload_packages: Mapping[str, int] = field(default_factory=dict)  # payload -> count
    modules: tuple[str, ...] = ()  # insmod order

    def as_dict(self) -> dict[str, Any]:
        """The manifest: paths relative to the build directory."""
        return {
            "format": MANIFEST_FORMAT,
            "recipe_hash": self.recipe_hash,
            "kernel_version": self.kernel_version,
            "kernel": self.kernel.name,
            "initrd": self.initrd.name,
            "payloads": {k: v.name for k, v in self.payloads.items()},
            "payload_packages": dict(self.payload_packages),
            "modules": list(self.modules),
            "packages": dict(sorted(self.packages.items())),
        }

    @classmethod
    def load(cls, build_dir: Path) -> GuestArtifacts:
        """Read ``manifest.json`` of a finished build; a bad one says to rebuild."""
        path = build_dir / MANIFEST_NAME
        try:
            data = json.loads(path.read_text())
            if data.get("format") != MANIFEST_FORMAT:
                raise ValueError(f"manifest format {data.get('format')!r}")
            art = cls(
                build_dir=build_dir,
                kernel=build_dir / data["kernel"],
                initrd=build_dir / data["initrd"],
                payloads={k: build_dir / v for k, v in data["payloads"].items()},
                recipe_hash=str(data["recipe_hash"]),
                kernel_version=str(data["kernel_version"]),
                packages={str(k): str(v) for k, v in data["packages"].items()},
                payload_packages={str(k): int(v) for k, v in data["payload_packages"].items()},
                modules=tuple(str(m) for m in data["modules"]),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise GuestBuildError(
                f"guest build {build_dir} is unreadable ({exc}); rebuild it with "
                f"`diskbench guest build --force`"
            ) from exc
        for p in (art.kernel, art.initrd, *art.payloads.values()):
            if not p.is_file():
                raise GuestBuildError(
                    f"guest build {build_dir} lacks {p.name}; rebuild it with `diskbench guest build --force`"
                )
        return art


# --------------------------------------------------------------------------- build


KEEP_BUILDS = 4


def build_guest(
    *,
    recipe_dir: Path = IMAGES_DIR,
    cache: Path | None = None,
    log: Log = print,
    force: bool = False,
) -> GuestArtifacts:
    """Build (or reuse) the guest for the recipe in ``recipe_dir``.

    The result lives in ``cache/guest/<recipe_hash>/``; an existing complete
    build is returned at once unless ``force``. Downloads are kept in
    ``cache/debs/`` and repacked payload packages in ``cache/debs-uncompressed/``.
    """
    cache = cache if cache is not None else cache_dir()
    rhash = recipe_hash(recipe_dir)
    guest_root = cache / "guest"
    out = guest_root / rhash
    if out.is_dir() and not force:
        try:
            art = GuestArtifacts.load(out)
        except GuestBuildError:
            log(f"guest: {out} is incomplete, rebuilding")
        else:
            log(f"guest: using cached build {out}")
            os.utime(out)  # marks it in use, so that pruning spares it
            return art
    recipe = load_recipe(recipe_dir)
    start = time.monotonic()
    log(f"guest: building recipe {rhash} into {out}")
    guest_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=guest_root, prefix=f".{rhash}-"))
    tmp.chmod(0o755)
    try:
        art = _build_into(recipe, recipe_dir, cache, tmp, rhash, log)
        (tmp / MANIFEST_NAME).write_text(json.dumps(art.as_dict(), indent=2) + "\n")
        for scratch in ("rootfs", "kernel-tree", "payload-trees"):
            shutil.rmtree(tmp / scratch, ignore_errors=True)
        if out.exists():
            old = guest_root / f".{rhash}-old-{os.getpid()}"
            os.replace(out, old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, out)
        except OSError:
            # Another build of the same recipe finished first: use that one.
            shutil.rmtree(tmp, ignore_errors=True)
            return GuestArtifacts.load(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"guest: built in {time.monotonic() - start:.1f} s: {out}")
    prune_builds(guest_root, keep=KEEP_BUILDS, log=log)
    return GuestArtifacts.load(out)


def prune_builds(guest_root: Path, *, keep: int, log: Log, idle_s: float = 86400.0) -> None:
    """Remove builds (each is ~300 MB) beyond the ``keep`` newest that were unused for a day.

    Builds used within ``idle_s`` are kept whatever their number: another
    checkout (another commit under asv, the other side of a gate, a sweep in
    progress) may be running on another recipe right now.
    """
    builds = sorted(
        (p for p in guest_root.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    now = time.time()
    for old in builds[keep:]:
        if now - old.stat().st_mtime < idle_s:
            continue
        log(f"guest: removing old build {old}")
        shutil.rmtree(old, ignore_errors=True)


def _build_into(
    recipe: Recipe, recipe_dir: Path, cache: Path, tmp: Path, rhash: str, log: Log
) -> GuestArtifacts:
    debs = cache / "debs"
    pins = recipe.all_pins()
    paths = fetch_debs(pins, debs, log)

    # Kernel: vmlinux plus the module files, from the one kernel package.
    log(f"guest: extracting {recipe.kernel_package}={recipe.kernel_version}")
    ktree = tmp / "kernel-tree"
    extract_deb(paths[recipe.kernel_package], ktree)
    kversion, bzimage = _find_kernel(ktree)
    vmlinux = vmlinux_from_bzimage(bzimage.read_bytes())
    (tmp / "vmlinux").write_bytes(vmlinux)
    log(f"guest: vmlinux {kversion}: {len(vmlinux) / 2**20:.1f} MiB")
    moddir = ktree / "lib" / "modules" / kversion
    modules = _resolve_modules(moddir, recipe.modules)
    log(f"guest: {len(modules)} kernel modules in load order: {' '.join(m for m, _ in modules)}")

    # Initramfs: tools with their libraries, busybox, modules, init.
    rootfs = tmp / "rootfs"
    for name in recipe.initramfs_packages:
        extract_deb(paths[name], rootfs)
    collected = collect_with_libraries(Tree(rootfs), recipe.initramfs_files)
    log(f"guest: initramfs tools: {len(recipe.initramfs_files)} files, {len(collected.files)} with libraries")
    initrd = tmp / "initramfs.cpio"
    _write_initramfs(initrd, recipe_dir, collected, modules, kversion, rhash)
    log(f"guest: initramfs.cpio: {initrd.stat().st_size / 2**20:.1f} MiB")

    # Payloads: repacked uncompressed packages on ext2 images.
    repacked_dir = cache / "debs-uncompressed"
    repacked_dir.mkdir(parents=True, exist_ok=True)
    repacked: dict[str, Path] = {}
    todo = [p for p in recipe.payload if not (repacked_dir / paths[p.name].name).is_file()]
    if todo:
        log(f"guest: repacking {len(todo)} payload packages uncompressed")
    for p in recipe.payload:
        target = repacked_dir / paths[p.name].name
        if not target.is_file():
            repack_uncompressed(paths[p.name], target, tmp)
        repacked[p.name] = target
    payload_files: dict[str, Path] = {}
    counts: dict[str, int] = {}
    for set_name, pkgs in recipe.payload_sets().items():
        img = tmp / f"payload-{set_name}.img"
        _write_payload_image(img, tmp / "payload-trees" / set_name, pkgs, repacked)
        payload_files[set_name] = img
        counts[set_name] = len(pkgs)
        log(f"guest: payload-{set_name}.img: {len(pkgs)} packages, {img.stat().st_size / 2**20:.1f} MiB")

    return GuestArtifacts(
        build_dir=tmp,
        kernel=tmp / "vmlinux",
        initrd=initrd,
        payloads=payload_files,
        recipe_hash=rhash,
        kernel_version=kversion,
        packages=pins,
        payload_packages=counts,
        modules=tuple(m for m, _ in modules),
    )


def _find_kernel(ktree: Path) -> tuple[str, Path]:
    moddirs = sorted((ktree / "lib" / "modules").iterdir()) if (ktree / "lib" / "modules").is_dir() else []
    if len(moddirs) != 1:
        raise GuestBuildError(f"kernel package has {len(moddirs)} module trees, expected one")
    kversion = moddirs[0].name
    bz = ktree / "boot" / f"vmlinuz-{kversion}"
    if not bz.is_file():
        raise GuestBuildError(f"kernel package lacks boot/vmlinuz-{kversion}")
    return kversion, bz


def _resolve_modules(moddir: Path, wanted: Sequence[str]) -> list[tuple[str, Path]]:
    """Load order of ``wanted`` plus dependencies, read from each ``.ko``'s ``.modinfo``."""
    files: dict[str, Path] = {}
    for ko in (moddir / "kernel").rglob("*.ko"):
        files[module_name(ko.name)] = ko
    builtin_file = moddir / "modules.builtin"
    builtin = (
        [module_name(line.strip()) for line in builtin_file.read_text().splitlines() if line.strip()]
        if builtin_file.is_file()
        else []
    )
    cache: dict[str, list[str]] = {}

    def depends(name: str) -> list[str]:
        if name not in cache:
            if name not in files:
                raise GuestBuildError(
                    f"kernel module {name} is neither a .ko nor built in; fix [kernel] modules "
                    f"in images/recipe.toml"
                )
            section = elf_section_data(files[name].read_bytes(), ".modinfo")
            cache[name] = module_depends(parse_modinfo(section or b""))
        return cache[name]

    order = module_load_order(wanted, depends, builtin)
    return [(m, files[m]) for m in order]


_BUSYBOX_LINKS = ("/bin/sh",)


def _write_initramfs(
    path: Path,
    recipe_dir: Path,
    collected: _Collected,
    modules: Sequence[tuple[str, Path]],
    kversion: str,
    rhash: str,
) -> None:
    with path.open("wb") as f:
        w = CpioWriter(f)
        for d in ("dev", "proc", "sys", "tmp", "run", "mnt", "target", "payload", "etc", "root"):
            w.add_dir(d)
        # The kernel opens /dev/console for init before anything is mounted.
        w.add_chardev("dev/console", 5, 1)
        w.add_chardev("dev/null", 1, 3, 0o666)
        for guest, host in sorted(collected.files.items()):
            mode = stat.S_IMODE(host.stat().st_mode)
            w.add_file(guest, host.read_bytes(), mode)
        for guest, target in sorted(collected.symlinks.items()):
            w.add_symlink(guest, target)
        for link in _BUSYBOX_LINKS:
            w.add_symlink(link, "/bin/busybox")
        w.add_file("init", (recipe_dir / "init").read_bytes(), 0o755)
        wdir = recipe_dir / "workloads"
        if wdir.is_dir():
            for script in sorted(wdir.glob("*.sh")):
                w.add_file(f"usr/share/diskbench/{script.name}", script.read_bytes(), 0o644)
        mod_root = f"lib/modules/{kversion}"
        for name, ko in modules:
            w.add_file(f"{mod_root}/{name}.ko", ko.read_bytes(), 0o644)
        w.add_file(
            "etc/diskbench/modules",
            "".join(f"/{mod_root}/{name}.ko\n" for name, _ in modules).encode(),
        )
        w.add_file("etc/diskbench/kernel", f"{kversion}\n".encode())
        w.add_file("etc/diskbench/recipe", f"{rhash}\n".encode())
        w.close()


def _write_payload_image(
    img: Path, tree: Path, pkgs: Sequence[PayloadPackage], repacked: Mapping[str, Path]
) -> None:
    """An ext2 image (``mke2fs -d``, no mount needed) with ``debs/`` and ``manifest.txt``.

    ``manifest.txt`` has one ``essential|base FILE`` line per package, the
    essential ones (extracted first, as debootstrap does) first.
    """
    debs_dir = tree / "debs"
    debs_dir.mkdir(parents=True)
    lines = []
    total = 0
    for p in sorted(pkgs, key=lambda p: (not p.essential, p.name)):
        src = repacked[p.name]
        os.link(src, debs_dir / src.name) if _same_fs(src, debs_dir) else shutil.copy2(src, debs_dir)
        total += src.stat().st_size
        lines.append(f"{'essential' if p.essential else 'base'} {src.name}\n")
    (tree / "manifest.txt").write_text("".join(lines))
    # Room for ext2 metadata and block rounding of many small files.
    size_kib = int(total * 1.15 / 1024) + 8192
    run(
        [
            "mke2fs", "-q", "-F", "-t", "ext2", "-m", "0", "-b", "4096",
            "-L", "diskbench-payload", "-E", "root_owner=0:0", "-d", tree, img, f"{size_kib}k",
        ],
        timeout_s=600,
        error_cls=GuestBuildError,
    )  # fmt: skip


def _same_fs(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.stat().st_dev


def gzip_initramfs(cpio: Path, out: Path) -> None:
    """A gzip copy of an initramfs (kept for boot-time comparisons; the build uses the plain one)."""
    with (
        cpio.open("rb") as src,
        out.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as dst,
    ):
        shutil.copyfileobj(src, dst)


# --------------------------------------------------------------------------- pin


def parse_apt_policy(text: str) -> dict[str, str | None]:
    """Candidate version per package from ``apt-cache policy A B ...`` (None: no candidate)."""
    out: dict[str, str | None] = {}
    current: str | None = None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            current = line[:-1]
        elif current is not None and line.strip().startswith("Candidate:"):
            value = line.split(":", 1)[1].strip()
            out[current] = None if value == "(none)" else value
    return out


def rewrite_recipe_pins(text: str, kernel_version: str, packages: Mapping[str, str]) -> str:
    """``recipe.toml`` with new versions, comments and layout kept (pure)."""
    section = ""
    lines = []
    for line in text.splitlines(keepends=True):
        m = re.match(r"^\s*\[([^\]]+)\]", line)
        if m:
            section = m.group(1).strip()
        kv = re.match(r'^(\s*)("?)([A-Za-z0-9.+_-]+)\2(\s*=\s*)"([^"]*)"(.*)$', line, re.S)
        if kv and section == "kernel" and kv.group(3) == "version":
            line = f'{kv.group(1)}version{kv.group(4)}"{kernel_version}"{kv.group(6)}'
        elif kv and section == "initramfs.packages" and kv.group(3) in packages:
            name = kv.group(3)
            q = kv.group(2)
            line = f'{kv.group(1)}{q}{name}{q}{kv.group(4)}"{packages[name]}"{kv.group(6)}'
        lines.append(line)
    return "".join(lines)


def _candidates(names: Sequence[str]) -> dict[str, str]:
    result = run(["apt-cache", "policy", *names], timeout_s=120, error_cls=GuestBuildError)
    policy = parse_apt_policy(result.stdout)
    missing = [n for n in names if not policy.get(n)]
    if missing:
        raise GuestBuildError(
            f"no candidate version in the apt sources for: {', '.join(missing)}; "
            f"run `apt-get update`, or change images/recipe.toml"
        )
    return {n: str(policy[n]) for n in names}


def parse_depends(value: str) -> list[list[str]]:
    """A Depends-style field as alternatives of package names (versions and arch dropped)."""
    groups = []
    for group in value.split(","):
        alts = []
        for alt in group.split("|"):
            name = alt.strip().split(" ", 1)[0].split("(", 1)[0].split(":", 1)[0].strip()
            if name:
                alts.append(name)
        if alts:
            groups.append(alts)
    return groups


def required_closure(controls: Mapping[str, Mapping[str, str]]) -> set[str]:
    """debootstrap's "required" set: Essential/Priority-required packages and their dependencies.

    ``controls`` maps package name to its control fields. Dependencies are
    followed through Depends and Pre-Depends within the given packages; of
    alternatives, the first one present counts (as debootstrap resolves them).
    """
    todo = [n for n, f in controls.items() if f.get("Essential") == "yes" or f.get("Priority") == "required"]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        f = controls[name]
        for key in ("Pre-Depends", "Depends"):
            for alts in parse_depends(f.get(key, "")):
                present = [a for a in alts if a in controls]
                if present:
                    todo.append(present[0])
    return seen


def _deb_fields(deb: Path) -> dict[str, str]:
    result = run(
        ["dpkg-deb", "-f", deb, "Package", "Version", "Priority", "Essential", "Depends", "Pre-Depends"],
        timeout_s=60,
        error_cls=GuestBuildError,
    )
    fields = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def pin_recipe(recipe_dir: Path = IMAGES_DIR, log: Log = print) -> Recipe:
    """Re-pin every package to the mirror's current candidate and rewrite the lock files.

    The payload set is what ``debootstrap --variant=minbase --download-only``
    fetches (needs root; it installs nothing). The "essential" packages are
    debootstrap's required set (:func:`required_closure`), which it extracts
    before letting the target's dpkg unpack everything.
    """
    recipe = load_recipe(recipe_dir, require_lock=False)
    names = [recipe.kernel_package, *recipe.initramfs_packages]
    cands = _candidates(names)
    for name in names:
        old = recipe.kernel_version if name == recipe.kernel_package else recipe.initramfs_packages[name]
        if old != cands[name]:
            log(f"guest pin: {name} {old} -> {cands[name]}")
    toml_path = recipe_dir / "recipe.toml"
    new_toml = rewrite_recipe_pins(
        toml_path.read_text(),
        cands[recipe.kernel_package],
        {n: cands[n] for n in recipe.initramfs_packages},
    )

    log(f"guest pin: debootstrap --variant={recipe.variant} --download-only {recipe.suite}")
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="diskbench-pin-") as tmp:
        target = Path(tmp) / "target"
        run(
            [
                "debootstrap", f"--variant={recipe.variant}", "--download-only",
                recipe.suite, target, _apt_mirror(),
            ],
            timeout_s=1200,
            error_cls=GuestBuildError,
        )  # fmt: skip
        archives = target / "var" / "cache" / "apt" / "archives"
        controls = {}
        for deb in sorted(archives.glob("*.deb")):
            f = _deb_fields(deb)
            controls[f["Package"]] = f
        required = required_closure(controls)
        packages = [PayloadPackage(n, f["Version"], n in required) for n, f in sorted(controls.items())]
    if not packages:
        raise GuestBuildError("debootstrap --download-only fetched no packages")
    lock = format_payload_lock(
        packages,
        header=(
            f"Install payload: debootstrap --variant={recipe.variant} --download-only {recipe.suite}\n"
            f"Generated by `{PIN_COMMAND}`; columns: package version essential|base\n"
            "essential = Essential: yes or Priority: required, and their dependencies\n"
            "(debootstrap's required set, extracted first)"
        ),
    )
    old_small = set(recipe.payload_small)
    dropped = old_small - {p.name for p in packages}
    if dropped:
        raise GuestBuildError(
            f"payload.small names packages that are no longer in the payload: "
            f"{', '.join(sorted(dropped))}; edit [payload] small in images/recipe.toml"
        )
    _write_atomic(toml_path, new_toml)
    _write_atomic(recipe_dir / "payload.lock", lock)
    log(f"guest pin: {len(packages)} payload packages, {sum(p.essential for p in packages)} essential")
    return load_recipe(recipe_dir)


def _apt_mirror() -> str:
    """The Debian mirror URL of the host's apt sources (the only network there is)."""
    for src in _apt_source_lines():
        m = re.search(r"(https?://\S+/debian)/?(\s|$)", src)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


def _apt_source_lines() -> Iterator[str]:
    listdir = Path("/etc/apt/sources.list.d")
    sources = [
        Path("/etc/apt/sources.list"),
        *sorted(listdir.glob("*.list")),
        *sorted(listdir.glob("*.sources")),
    ]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(("deb ", "URIs:")) and "security" not in line:
                yield line


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
