"""The cpio ``newc`` format of an initramfs: a deterministic writer, a reader for checks, gzip."""

from __future__ import annotations

import gzip
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any


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


def gzip_initramfs(cpio: Path, out: Path) -> None:
    """A gzip copy of an initramfs (kept for boot-time comparisons; the build uses the plain one)."""
    with (
        cpio.open("rb") as src,
        out.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as dst,
    ):
        shutil.copyfileobj(src, dst)
