"""Cells: the points of the matrix, validated before anything runs.

Pure: no I/O. Every value is spelled as qemu-img and QEMU spell it.  A bad
value raises :class:`SpecError` with one line naming the value and what is
allowed, so the CLI can print it and exit 2 before an image is created.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum, StrEnum
from typing import Any

from harness.errors import SpecError


class Format(StrEnum):
    RAW = "raw"
    QCOW2 = "qcow2"


class Cache(StrEnum):
    NONE = "none"
    WRITETHROUGH = "writethrough"
    WRITEBACK = "writeback"
    DIRECTSYNC = "directsync"
    UNSAFE = "unsafe"

    @property
    def direct(self) -> bool:
        """Whether QEMU opens the image with O_DIRECT in this mode."""
        return self in (Cache.NONE, Cache.DIRECTSYNC)


class Aio(StrEnum):
    THREADS = "threads"
    NATIVE = "native"
    IO_URING = "io_uring"


class Interface(StrEnum):
    VIRTIO_BLK = "virtio-blk"
    VIRTIO_SCSI = "virtio-scsi"
    IDE = "ide"
    AHCI = "ahci"
    NVME = "nvme"


class Workload(StrEnum):
    INSTALL = "install"
    DD = "dd"
    BONNIE = "bonnie"
    MKFS = "mkfs"
    FIO = "fio"


class CacheState(StrEnum):
    """The host page cache of the image when the measured sample starts.

    ``fresh``: a new image per sample (the default).  ``warm``: a first,
    unmeasured run of the workload on the image, then the measured run on the
    same image without dropping anything.  ``cold``: the same, but the host
    page cache of the image is dropped before the measured run.  Seed 003's
    first, second and after-drop_caches runs.
    """

    FRESH = "fresh"
    WARM = "warm"
    COLD = "cold"


# "written" is a raw image every byte of which is written before the run
# (seed 003's dd if=/dev/zero image): not a qemu-img option, the harness writes it.
WRITTEN = "written"
PREALLOCATION: Mapping[Format, tuple[str, ...]] = {
    Format.RAW: ("off", "falloc", "full", WRITTEN),
    Format.QCOW2: ("off", "metadata", "falloc", "full"),
}
COMPAT = ("1.1", "0.10")
CLUSTER_SIZE_MIN = 512
CLUSTER_SIZE_MAX = 2 * 1024 * 1024
DEFAULT_CLUSTER_SIZE = 65536
PAYLOADS = ("small", "full")
# qcow2 encryption: "luks" (qemu-img's encrypt.format=luks), or none
ENCRYPTIONS = ("none", "luks")
# The LUKS passphrase is a QEMU secret object given to qemu-img and QEMU alike.
# It is fixed and public: the benchmark measures the cipher's cost, the key protects nothing.
SECRET_ID = "diskbench-secret"
SECRET_DATA = "diskbench"


def secret_object() -> str:
    """The ``--object``/``-object`` value that holds the LUKS passphrase."""
    return f"secret,id={SECRET_ID},data={SECRET_DATA}"


FILESYSTEMS = ("ext4", "ext2")
FIO_TARGETS = ("both", "raw", "file")

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str | int, *, what: str = "size") -> int:
    """``"64K"`` -> 65536. Sizes are binary, as qemu-img reads them."""
    if isinstance(text, int):
        return text
    match = _SIZE_RE.match(text)
    if not match:
        raise SpecError(f"{what} {text!r} is not a size: use a number with an optional K, M, G or T suffix")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def format_size(size: int) -> str:
    """65536 -> ``"64k"``: the shortest exact binary spelling, for cell ids."""
    for suffix, unit in (("t", 1024**4), ("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def _choice(enum: type[Enum], value: str | Enum, what: str) -> Any:
    if isinstance(value, enum):
        return value
    try:
        return enum(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(str(m.value) for m in enum)
        raise SpecError(f"unknown {what} {value!r}: use one of {allowed}") from None


@dataclass(frozen=True)
class ImageSpec:
    """How the disk under test is created (``qemu-img create``)."""

    format: Format = Format.QCOW2
    preallocation: str = "off"
    size: int = 2 * 1024**3
    cluster_size: int | None = None
    lazy_refcounts: bool = False
    compat: str | None = None
    encrypt: str = "none"

    @property
    def encrypted(self) -> bool:
        """Whether the image is a LUKS-encrypted qcow2 (qemu-img and QEMU need the secret)."""
        return self.encrypt != "none"

    @property
    def written(self) -> bool:
        """Whether the harness writes every byte after creating it (raw ``written``)."""
        return self.preallocation == WRITTEN

    def create_options(self) -> list[str]:
        """The ``-o`` options for ``qemu-img create``."""
        opts = [f"preallocation={'off' if self.written else self.preallocation}"]
        if self.format is Format.QCOW2:
            opts.append(f"cluster_size={self.cluster_size or DEFAULT_CLUSTER_SIZE}")
            opts.append(f"lazy_refcounts={'on' if self.lazy_refcounts else 'off'}")
            opts.append(f"compat={self.compat or COMPAT[0]}")
            if self.encrypted:
                opts += [f"encrypt.format={self.encrypt}", f"encrypt.key-secret={SECRET_ID}"]
        return opts

    @property
    def slug(self) -> str:
        parts = [self.format.value, self.preallocation]
        if self.format is Format.QCOW2:
            parts.append(f"cs{format_size(self.cluster_size or DEFAULT_CLUSTER_SIZE)}")
            if self.lazy_refcounts:
                parts.append("lazy")
            if self.compat not in (None, COMPAT[0]):
                parts.append(f"compat{self.compat}")
            if self.encrypted:
                parts.append(self.encrypt)
        parts.append(format_size(self.size))
        return "-".join(parts)


@dataclass(frozen=True)
class DriveSpec:
    """How QEMU attaches the disk under test."""

    cache: Cache = Cache.WRITEBACK
    aio: Aio = Aio.THREADS
    interface: Interface = Interface.VIRTIO_BLK

    @property
    def slug(self) -> str:
        return f"{self.cache.value}-{self.aio.value}-{self.interface.value}"


@dataclass(frozen=True)
class WorkloadSpec:
    """What the guest runs, with its parameters."""

    name: Workload = Workload.INSTALL
    payload: str = "full"
    dd_mib: int = 256
    dd_chunk_mib: int = 2
    fs: str = "ext4"
    bonnie_size_mib: int = 512
    bonnie_ram_mib: int = 256
    bonnie_files: int = 0
    # fio (images/workloads/fio.fio): targets, MiB of the sequential jobs, IOs of each random
    # 4 KiB job, writes of the fsync-per-write job
    fio_target: str = "both"
    fio_size_mib: int = 64
    fio_ios: int = 2000
    fio_fsync_ios: int = 200

    def kernel_args(self) -> list[str]:
        args = [f"diskbench.workload={self.name.value}"]
        if self.name is Workload.DD:
            args += [
                f"diskbench.fs={self.fs}",
                f"diskbench.dd_mib={self.dd_mib}",
                f"diskbench.dd_chunk_mib={self.dd_chunk_mib}",
            ]
        elif self.name is Workload.BONNIE:
            args += [
                f"diskbench.fs={self.fs}",
                f"diskbench.bonnie_size_mib={self.bonnie_size_mib}",
                f"diskbench.bonnie_ram_mib={self.bonnie_ram_mib}",
                f"diskbench.bonnie_files={self.bonnie_files}",
            ]
        elif self.name is Workload.MKFS:
            args.append(f"diskbench.fs={self.fs}")
        elif self.name is Workload.FIO:
            args += [
                f"diskbench.fio_target={self.fio_target}",
                f"diskbench.fio_size_mib={self.fio_size_mib}",
                f"diskbench.fio_ios={self.fio_ios}",
                f"diskbench.fio_fsync_ios={self.fio_fsync_ios}",
            ]
        return args

    @property
    def slug(self) -> str:
        if self.name is Workload.INSTALL:
            return f"install-{self.payload}"
        if self.name is Workload.BONNIE:
            return f"bonnie-{self.bonnie_size_mib}m-r{self.bonnie_ram_mib}m-n{self.bonnie_files}-{self.fs}"
        if self.name is Workload.MKFS:
            return f"mkfs-{self.fs}"
        if self.name is Workload.FIO:
            return f"fio-{self.fio_target}-{self.fio_size_mib}m-{self.fio_ios}x-{self.fio_fsync_ios}f"
        return f"dd-{self.dd_mib}m-{self.dd_chunk_mib}m-{self.fs}"


@dataclass(frozen=True)
class Cell:
    """One point of the matrix; :attr:`id` is stable across runs and machines."""

    image: ImageSpec = field(default_factory=ImageSpec)
    drive: DriveSpec = field(default_factory=DriveSpec)
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    cache_state: CacheState = CacheState.FRESH

    @property
    def id(self) -> str:
        base = f"{self.image.slug}.{self.drive.slug}.{self.workload.slug}"
        return base if self.cache_state is CacheState.FRESH else f"{base}.{self.cache_state.value}"

    def as_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            if isinstance(value, Enum):
                return value.value
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value

        data = {k: plain(v) for k, v in asdict(self).items()}
        data["id"] = self.id
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cell:
        image = data["image"]
        drive = data["drive"]
        workload = data["workload"]
        return make_cell(
            format=image["format"],
            preallocation=image["preallocation"],
            size=image["size"],
            cluster_size=image.get("cluster_size"),
            lazy_refcounts=bool(image.get("lazy_refcounts", False)),
            compat=image.get("compat"),
            encrypt=image.get("encrypt", "none"),
            cache=drive["cache"],
            aio=drive["aio"],
            interface=drive["interface"],
            workload=workload["name"],
            payload=workload.get("payload", "full"),
            dd_mib=workload.get("dd_mib", 256),
            dd_chunk_mib=workload.get("dd_chunk_mib", 2),
            fs=workload.get("fs", "ext4"),
            bonnie_size_mib=workload.get("bonnie_size_mib", 512),
            bonnie_ram_mib=workload.get("bonnie_ram_mib", 256),
            bonnie_files=workload.get("bonnie_files", 0),
            fio_target=workload.get("fio_target", "both"),
            fio_size_mib=workload.get("fio_size_mib", 64),
            fio_ios=workload.get("fio_ios", 2000),
            fio_fsync_ios=workload.get("fio_fsync_ios", 200),
            cache_state=data.get("cache_state", "fresh"),
        )


def filesystem_room(disk_size: int, fs: str) -> int:
    """Bytes a file can surely take on a fresh ``fs`` filled to the whole disk.

    mke2fs takes inode tables (up to 1/16 of a small disk), bitmaps and, for
    ext4, a journal; the rest minus a margin is room.  Generous enough for
    seed 001's 256 MiB on a 300 MiB ext2 image, strict enough to refuse what
    cannot fit.
    """
    if fs == "ext2":
        return disk_size - disk_size // 16 - 2 * 1024**2
    return disk_size - disk_size // 8 - 8 * 1024**2


def _validate_cluster_size(value: str | int | None, fmt: Format) -> int | None:
    if value is None:
        return None
    size = parse_size(value, what="cluster_size")
    if fmt is not Format.QCOW2:
        raise SpecError(f"cluster_size {value!r} applies to qcow2 only: drop it for format {fmt.value}")
    if size < CLUSTER_SIZE_MIN or size > CLUSTER_SIZE_MAX or size & (size - 1):
        raise SpecError(f"cluster_size {value!r} is not allowed: use a power of two from 512 to 2M")
    return size


def make_cell(
    *,
    format: str | Format = Format.QCOW2,
    preallocation: str = "off",
    size: str | int = "2G",
    cluster_size: str | int | None = None,
    lazy_refcounts: bool = False,
    compat: str | None = None,
    encrypt: str = "none",
    cache: str | Cache = Cache.WRITEBACK,
    aio: str | Aio = Aio.THREADS,
    interface: str | Interface = Interface.VIRTIO_BLK,
    workload: str | Workload = Workload.INSTALL,
    payload: str = "full",
    dd_mib: int = 256,
    dd_chunk_mib: int = 2,
    fs: str = "ext4",
    bonnie_size_mib: int = 512,
    bonnie_ram_mib: int = 256,
    bonnie_files: int = 0,
    fio_target: str = "both",
    fio_size_mib: int = 64,
    fio_ios: int = 2000,
    fio_fsync_ios: int = 200,
    cache_state: str | CacheState = CacheState.FRESH,
) -> Cell:
    """Build one validated cell from user-facing spellings."""
    fmt: Format = _choice(Format, format, "format")
    prealloc = str(preallocation).strip().lower()
    if prealloc not in PREALLOCATION[fmt]:
        raise SpecError(
            f"preallocation {preallocation!r} is not allowed for {fmt.value}: "
            f"use one of {', '.join(PREALLOCATION[fmt])}"
        )
    disk_size = parse_size(size, what="disk size")
    if disk_size < 64 * 1024**2:
        raise SpecError(f"disk size {size!r} is too small: use at least 64M")
    csize = _validate_cluster_size(cluster_size, fmt)
    if fmt is Format.QCOW2 and csize is None:
        csize = DEFAULT_CLUSTER_SIZE
    if lazy_refcounts and fmt is not Format.QCOW2:
        raise SpecError(f"lazy_refcounts applies to qcow2 only: drop it for format {fmt.value}")
    if compat is not None:
        compat = str(compat)
        if fmt is not Format.QCOW2:
            raise SpecError(f"compat {compat!r} applies to qcow2 only: drop it for format {fmt.value}")
        if compat not in COMPAT:
            raise SpecError(f"unknown qcow2 compat {compat!r}: use one of {', '.join(COMPAT)}")
        if compat == "0.10" and lazy_refcounts:
            raise SpecError("lazy_refcounts needs qcow2 compat 1.1, not 0.10: drop one of them")
    if fmt is Format.QCOW2 and compat is None:
        compat = COMPAT[0]
    encrypt = str(encrypt).strip().lower()
    if encrypt not in ENCRYPTIONS:
        raise SpecError(f"unknown encrypt {encrypt!r}: use one of {', '.join(ENCRYPTIONS)}")
    if encrypt != "none" and fmt is not Format.QCOW2:
        raise SpecError(f"encrypt {encrypt!r} applies to qcow2 only: drop it for format {fmt.value}")
    cache_mode: Cache = _choice(Cache, cache, "cache mode")
    aio_mode: Aio = _choice(Aio, aio, "aio")
    if aio_mode is Aio.NATIVE and not cache_mode.direct:
        raise SpecError(
            f"aio=native needs a direct cache mode, not cache={cache_mode.value}: "
            "use cache=none or cache=directsync, or aio=threads"
        )
    iface: Interface = _choice(Interface, interface, "interface")
    wl: Workload = _choice(Workload, workload, "workload")
    if payload not in PAYLOADS:
        raise SpecError(f"unknown payload {payload!r}: use one of {', '.join(PAYLOADS)}")
    if fs not in FILESYSTEMS:
        raise SpecError(f"unknown filesystem {fs!r}: use one of {', '.join(FILESYSTEMS)}")
    if dd_mib <= 0 or dd_chunk_mib <= 0 or dd_mib % dd_chunk_mib:
        raise SpecError(
            f"dd size {dd_mib} MiB in {dd_chunk_mib} MiB chunks: use positive sizes, "
            "the total a multiple of the chunk"
        )
    if bonnie_size_mib <= 0 or bonnie_ram_mib < 0 or bonnie_files < 0:
        raise SpecError(
            f"bonnie size {bonnie_size_mib} MiB, ram {bonnie_ram_mib} MiB, files {bonnie_files}: "
            "use a positive size and non-negative ram and files"
        )
    if wl is Workload.BONNIE and bonnie_size_mib < 2 * bonnie_ram_mib:
        raise SpecError(
            f"bonnie++ test size {bonnie_size_mib} MiB is less than twice its ram {bonnie_ram_mib} MiB: "
            "bonnie++ refuses that; use a size of at least 2x ram"
        )
    if wl is Workload.BONNIE and bonnie_size_mib * 1024**2 > disk_size // 2:
        raise SpecError(
            f"bonnie++ test size {bonnie_size_mib} MiB does not fit a {format_size(disk_size)} disk: "
            "use a disk at least twice as large"
        )
    fio_target = str(fio_target).strip().lower()
    if fio_target not in FIO_TARGETS:
        raise SpecError(f"unknown fio target {fio_target!r}: use one of {', '.join(FIO_TARGETS)}")
    for what, value in (
        ("fio_size_mib", fio_size_mib),
        ("fio_ios", fio_ios),
        ("fio_fsync_ios", fio_fsync_ios),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**7:
            raise SpecError(f"{what} {value!r}: use a whole number from 1 to 10000000")
    if wl is Workload.FIO and fio_size_mib * 1024**2 > filesystem_room(disk_size, "ext4"):
        raise SpecError(
            f"fio size {fio_size_mib} MiB does not fit a {format_size(disk_size)} disk: ext4 leaves "
            f"about {filesystem_room(disk_size, 'ext4') // 1024**2} MiB there; use a larger disk"
        )
    state: CacheState = _choice(CacheState, cache_state, "cache state")
    if wl is Workload.DD and dd_mib * 1024**2 > filesystem_room(disk_size, fs):
        raise SpecError(
            f"dd of {dd_mib} MiB does not fit a {format_size(disk_size)} disk: {fs} leaves about "
            f"{filesystem_room(disk_size, fs) // 1024**2} MiB there; use a larger disk"
        )
    return Cell(
        image=ImageSpec(
            format=fmt,
            preallocation=prealloc,
            size=disk_size,
            cluster_size=csize,
            lazy_refcounts=lazy_refcounts,
            compat=compat,
            encrypt=encrypt,
        ),
        drive=DriveSpec(cache=cache_mode, aio=aio_mode, interface=iface),
        workload=WorkloadSpec(
            name=wl,
            payload=payload,
            dd_mib=dd_mib,
            dd_chunk_mib=dd_chunk_mib,
            fs=fs,
            bonnie_size_mib=bonnie_size_mib,
            bonnie_ram_mib=bonnie_ram_mib,
            bonnie_files=bonnie_files,
            fio_target=fio_target,
            fio_size_mib=fio_size_mib,
            fio_ios=fio_ios,
            fio_fsync_ios=fio_fsync_ios,
        ),
        cache_state=state,
    )


def expand(
    axes: Mapping[str, Sequence[Any]], *, skip_format_mismatch: bool = False, **fixed: Any
) -> tuple[list[Cell], list[str]]:
    """Every combination of the axis values (a small sweep), validated.

    ``axes`` maps :func:`make_cell` keyword names to lists of values.  A bad
    combination raises at once, before anything runs; with
    ``skip_format_mismatch`` a combination that only a *different* format
    allows (preallocation=metadata or cluster_size on raw) is skipped and
    named in the returned notes instead.  Duplicate cells are kept once.
    """
    names = list(axes)
    cells: dict[str, Cell] = {}
    skipped: list[str] = []
    for combo in itertools.product(*(axes[n] for n in names)):
        values = dict(zip(names, combo, strict=True))
        try:
            cell = make_cell(**fixed, **values)
        except SpecError as exc:
            if skip_format_mismatch and _format_mismatch(values, fixed):
                skipped.append(str(exc))
                continue
            raise
        cells.setdefault(cell.id, cell)
    if not cells:
        raise SpecError(
            "no valid combination: " + (skipped[0] if skipped else "give at least one value per axis")
        )
    return list(cells.values()), skipped


def _format_mismatch(values: Mapping[str, Any], fixed: Mapping[str, Any]) -> bool:
    """Whether the combination is valid for another format (so it can be skipped)."""
    try:
        _choice(Format, values.get("format", ""), "format")
    except SpecError:
        return False
    for other in Format:
        if other.value == str(values.get("format", "")).lower():
            continue
        try:
            make_cell(**fixed, **{**values, "format": other})
        except SpecError:
            continue
        return True
    return False


def split_list(text: str) -> list[str]:
    """``"raw, qcow2"`` -> ``["raw", "qcow2"]``: CLI flags take comma lists."""
    return [part.strip() for part in text.split(",") if part.strip()]


def unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
