"""A QEMU build fetched from Debian's packages (``diskbench qemu get``): its prefix, its own data
and module directories, its manifest, and how it runs as itself.

A fetched build is a prefix ``PREFIX/usr/bin/qemu-system-x86_64`` ... with
:data:`MANIFEST` beside ``usr/``; :func:`build_of` finds it from the binary's path, so a
:class:`~harness.subject.binaries.Binaries` that names the build's binaries runs the build whole:
``-L`` for each of its firmware directories (:data:`DATA_DIRS`, searched before QEMU's compiled-in
ones) and ``QEMU_MODULE_DIR`` for its modules (QEMU 7.2 and 10.0 search that directory first;
a module of another build is refused by QEMU's build stamp).  Pure but for reading the manifest
and hashing binaries.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.files import file_digest
from harness.subject.binaries import QEMU, QEMU_IMG, Binaries

MANIFEST = "diskbench-qemu.json"
MANIFEST_FORMAT = 1
#: QEMU's firmware and data (its own option ROMs), the BIOS, the NIC ROMs: ``-L`` each, in order
DATA_DIRS = ("usr/share/qemu", "usr/share/seabios", "usr/lib/ipxe/qemu")
MODULE_DIR = "usr/lib/x86_64-linux-gnu/qemu"
#: the binaries a run uses, hashed into the manifest and checked before each use
BINARIES = ("qemu-system-x86_64", "qemu-img", "qemu-io")
#: the files a guest of this project boots with: a build without them is incomplete
REQUIRED_FILES = (
    "usr/share/qemu/pvh.bin",
    "usr/share/qemu/linuxboot_dma.bin",
    "usr/share/seabios/bios-256k.bin",
)


class QemuBuildError(UsageError):
    """A QEMU version or build that cannot be used as given: one line naming it and the fix, exit 2."""


def upstream_version(debian_version: str) -> str:
    """QEMU's own version in a Debian version: ``1:10.0.2+ds-2+deb13u1~bpo12+1`` -> ``10.0.2``."""
    text = debian_version.split(":", 1)[-1]
    if "-" in text:
        text = text.rsplit("-", 1)[0]
    for mark in ("+", "~"):
        text = text.split(mark, 1)[0]
    return text


@dataclass(frozen=True)
class QemuBuild:
    """A fetched build: where it is, which Debian packages made it, the digests of its binaries."""

    prefix: Path
    #: qemu-system-x86's Debian version (the build's key)
    debian_version: str
    #: what ``qemu-system-x86_64 --version`` says (``10.0.2``)
    version: str
    packages: tuple[tuple[str, str], ...]
    #: binary name -> SHA256 of its bytes when it was unpacked
    digests: tuple[tuple[str, str], ...]

    def binary(self, name: str) -> Path:
        return self.prefix / "usr" / "bin" / name

    @property
    def data_dirs(self) -> tuple[Path, ...]:
        return tuple(self.prefix / d for d in DATA_DIRS if (self.prefix / d).is_dir())

    @property
    def module_dir(self) -> Path:
        return self.prefix / MODULE_DIR

    def qemu_args(self) -> list[str]:
        """``-L DIR`` for each of its data directories: QEMU searches them before its own."""
        return [arg for d in self.data_dirs for arg in ("-L", str(d))]

    def environ(self) -> dict[str, str]:
        """The environment its binaries run with: its module directory, never the system's."""
        return {"QEMU_MODULE_DIR": str(self.module_dir)}

    def binaries(self) -> Binaries:
        """Its ``qemu-system-x86_64`` and ``qemu-img`` (its ``qemu-io`` beside them)."""
        return Binaries(qemu=str(self.binary(QEMU)), qemu_img=str(self.binary(QEMU_IMG)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "debian_version": self.debian_version,
            "version": self.version,
            "packages": dict(self.packages),
            "sha256": dict(self.digests),
        }

    def describe(self) -> str:
        """One line: ``10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1) in PREFIX``."""
        return f"{self.version} (Debian {self.debian_version}) in {self.prefix}"

    def check(self) -> None:
        """Each binary is still the one unpacked (its SHA256), or a QemuBuildError."""
        for name, want in self.digests:
            path = self.binary(name)
            got = _digest(str(path), *_stamp(path))
            if got != want:
                raise QemuBuildError(
                    f"{path}: not the binary unpacked for QEMU {self.debian_version} (SHA256 "
                    f"{got[:12] or 'missing'}, the manifest says {want[:12]}): the build is tampered; "
                    f"remove {self.prefix} and run `diskbench qemu get {self.debian_version}`"
                )


def load_build(prefix: Path) -> QemuBuild:
    """The build whose manifest is ``PREFIX/diskbench-qemu.json``; a QemuBuildError if it is none."""
    try:
        data = json.loads((prefix / MANIFEST).read_text())
        if data.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format {data.get('format')!r}")
        return QemuBuild(
            prefix=prefix,
            debian_version=str(data["debian_version"]),
            version=str(data["version"]),
            packages=tuple(sorted((str(k), str(v)) for k, v in data["packages"].items())),
            digests=tuple(sorted((str(k), str(v)) for k, v in data["sha256"].items())),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise QemuBuildError(
            f"{prefix}: no QEMU build of diskbench ({exc}): fetch one with `diskbench qemu get VERSION`"
        ) from None


def build_of(binary: str) -> QemuBuild | None:
    """The fetched build ``binary`` belongs to (``PREFIX/usr/bin/NAME``), or None for any other
    binary (a name on PATH, a build of a tree, the system's)."""
    path = Path(binary)
    if not path.is_absolute() or path.parent.name != "bin" or path.parent.parent.name != "usr":
        return None
    prefix = path.parent.parent.parent
    manifest = prefix / MANIFEST
    if not manifest.is_file():
        return None
    return _load_cached(prefix, *_stamp(manifest))


@lru_cache(maxsize=32)
def _load_cached(prefix: Path, _mtime_ns: int, _size: int) -> QemuBuild:
    return load_build(prefix)


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=64)
def _digest(path: str, _mtime_ns: int, size: int) -> str:
    return "" if size < 0 else file_digest(Path(path))


def environ_for(binary: str) -> dict[str, str]:
    """The environment ``binary`` runs with: its build's module directory when it is a fetched
    build's (:meth:`QemuBuild.environ`), else nothing added."""
    build = build_of(binary)
    return build.environ() if build is not None else {}


def qemu_args_for(binary: str) -> list[str]:
    """QEMU's options that make ``binary`` use its own build's firmware (``-L``), or none."""
    build = build_of(binary)
    return build.qemu_args() if build is not None else []


def binary_digest(binary: str) -> str:
    """The SHA256 of the file ``binary`` names (a path, or a name looked up on PATH as the exec
    would), or "" when there is none."""
    found = binary if "/" in binary else shutil.which(binary)
    if not found:
        return ""
    path = Path(found).resolve()
    return _digest(str(path), *_stamp(path))
