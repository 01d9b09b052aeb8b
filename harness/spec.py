"""Cells: the points of the matrix, validated before anything runs.

Pure: no I/O. Every value is spelled as qemu-img and QEMU spell it.  A bad
value raises :class:`SpecError` with one line naming the value and what is
allowed, so the CLI can print it and exit 2 before an image is created.
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Any

from harness.backing import EXTENDED_L2_MIN_CLUSTER, Backing, parse_backing
from harness.errors import SpecError
from harness.sizes import format_size as format_size  # re-exported: spelled here before
from harness.sizes import parse_size as parse_size
from harness.workloads import registry
from harness.workloads.params import WorkloadKind
from harness.workloads.registry import Workload as Workload  # re-exported: the cell's word
from harness.workloads.registry import parse_workload

if TYPE_CHECKING:
    from typing_extensions import Unpack


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


class Measure(StrEnum):
    """How a sample measures its cell.

    ``guest``: a real guest runs the workload on the disk (the default; every figure of
    the device emulation and the bus).  ``replay``: the cell's request stream, recorded
    once from such a guest on QEMU's side, is replayed natively by the side's ``qemu-io``
    against the same block layer (format driver, cache mode, aio, the policy's options),
    with no emulated CPU in between (:mod:`harness.sample.replay`).  The two are never compared
    with each other: a replay cell has an id of its own.
    """

    GUEST = "guest"
    REPLAY = "replay"


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
    # qcow2's subclusters: said in the record and the id only when on
    extended_l2: bool = False

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
            if self.extended_l2:
                opts.append("extended_l2=on")
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
            if self.extended_l2:
                parts.append("l2ext")
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
    """What the guest runs, with its parameters.

    It holds the value of every registered workload's parameters (see
    :mod:`harness.workloads.registry`), not only its own, so that every
    record's ``workload`` dict has the same keys in the same order; each is
    read as an attribute (``spec.dd_mib``).  The workload's own declaration
    (:attr:`kind`) says which of them it uses.
    """

    name: Workload = Workload.INSTALL
    values: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        # a parameter not given has its default, so equal cells compare equal
        held = dict(self.values)
        full = {name: held.pop(name, default) for name, default in registry.defaults().items()}
        object.__setattr__(self, "values", (*full.items(), *held.items()))

    def __getattr__(self, key: str) -> Any:
        if not key.startswith("_"):
            for name, value in self.__dict__.get("values", ()):
                if name == key:
                    return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")

    @property
    def kind(self) -> WorkloadKind:
        return registry.kind(self.name)

    def params(self) -> dict[str, Any]:
        """Every parameter's value by name, in the registry's order."""
        return dict(self.values)

    def kernel_args(self) -> list[str]:
        return self.kind.kernel_args(self.params())

    @property
    def slug(self) -> str:
        return self.kind.slug(self.params())

    def as_dict(self) -> dict[str, Any]:
        """The record's ``workload``: every parameter but those unsaid at their default
        (:attr:`~harness.workloads.params.Param.quiet_default`)."""
        known = registry.params()
        return {
            "name": self.name.value,
            **{k: v for k, v in self.params().items() if not (k in known and known[k].quiet(v))},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkloadSpec:
        """A record's ``workload`` dict as it is, unchecked (see :meth:`Cell.from_dict` for checked).

        KeyError without a name, ValueError for a name no workload has.
        """
        known = registry.params()
        return cls(name=Workload(data["name"]), values=tuple((k, v) for k, v in data.items() if k in known))


@dataclass(frozen=True)
class Cell:
    """One point of the matrix; :attr:`id` is stable across runs and machines."""

    image: ImageSpec = field(default_factory=ImageSpec)
    drive: DriveSpec = field(default_factory=DriveSpec)
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    cache_state: CacheState = CacheState.FRESH
    measure: Measure = Measure.GUEST
    # the disk an overlay over a chain (harness.backing); None: a disk of its own
    backing: Backing | None = None

    @property
    def id(self) -> str:
        image = self.image.slug if self.backing is None else f"{self.image.slug}-{self.backing.slug}"
        base = f"{image}.{self.drive.slug}.{self.workload.slug}"
        if self.cache_state is not CacheState.FRESH:
            base = f"{base}.{self.cache_state.value}"
        return base if self.measure is Measure.GUEST else f"{base}.{self.measure.value}"

    def as_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            if isinstance(value, Enum):
                return value.value
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value

        image = plain(asdict(self.image))
        if not self.image.extended_l2:
            del image["extended_l2"]  # a cell without it keeps the record it always had
        return {
            "image": image,
            "drive": plain(asdict(self.drive)),
            "workload": self.workload.as_dict(),
            "cache_state": self.cache_state.value,
            # a guest cell's record keeps the keys it always had
            **({} if self.measure is Measure.GUEST else {"measure": self.measure.value}),
            **({} if self.backing is None else {"backing": self.backing.as_dict()}),
            "id": self.id,
        }

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
            extended_l2=bool(image.get("extended_l2", False)),
            backing=_backing_text(data.get("backing")),
            cache=drive["cache"],
            aio=drive["aio"],
            interface=drive["interface"],
            workload=workload["name"],
            cache_state=data.get("cache_state", "fresh"),
            measure=data.get("measure", "guest"),
            **{name: workload.get(name, default) for name, default in registry.defaults().items()},
        )


def _backing_text(data: Any) -> str | None:
    """A record's ``backing`` dict as :func:`~harness.backing.parse_backing` reads it, or None."""
    if not isinstance(data, Mapping):
        return None
    words = [f"{key}={data[key]}" for key in ("depth", "fill", "pattern", "format") if key in data]
    if data.get("format", "qcow2") == "qcow2":
        if data.get("cluster_size") is not None:
            words.append(f"cluster_size={data['cluster_size']}")
        words.append(f"extended_l2={'on' if data.get('extended_l2') else 'off'}")
    return ",".join(words)


def _validate_cluster_size(value: str | int | None, fmt: Format) -> int | None:
    if value is None:
        return None
    size = parse_size(value, what="cluster_size")
    if fmt is not Format.QCOW2:
        raise SpecError(f"cluster_size {value!r} applies to qcow2 only: drop it for format {fmt.value}")
    if size < CLUSTER_SIZE_MIN or size > CLUSTER_SIZE_MAX or size & (size - 1):
        raise SpecError(f"cluster_size {value!r} is not allowed: use a power of two from 512 to 2M")
    return size


class CellAxes(typing.TypedDict, total=False):
    """The cell's own axes as :func:`make_cell` takes them, spelled as users spell them (the
    workloads' parameters come after ``workload``, from the registry); declared once, here:
    a sweep spec's keys, their TOML types and the presets' axes are read from it."""

    format: str | Format
    preallocation: str
    size: str | int
    cluster_size: str | int | None
    lazy_refcounts: bool
    compat: str | None
    encrypt: str
    extended_l2: bool
    backing: str | None
    cache: str | Cache
    aio: str | Aio
    interface: str | Interface
    workload: str | Workload
    cache_state: str | CacheState
    measure: str | Measure


class CellSpelling(CellAxes, total=False):
    """What :func:`make_cell` takes: the cell's axes and the built-in workloads' parameters, so
    that the type checker holds every call to the names and types the registry declares
    (``tests/unit/test_cell_record.py`` holds this list to the registry's)."""

    payload: str
    dd_mib: int
    dd_chunk_mib: int
    fs: str
    bonnie_size_mib: int
    bonnie_ram_mib: int
    bonnie_files: int
    bonnie_char: str
    fio_target: str
    fio_size_mib: int
    fio_ios: int
    fio_fsync_ios: int
    fio_jobs: str


# what an axis is when a cell leaves it out
AXIS_DEFAULTS: dict[str, Any] = {
    "format": Format.QCOW2,
    "preallocation": "off",
    "size": "2G",
    "cluster_size": None,
    "lazy_refcounts": False,
    "compat": None,
    "encrypt": "none",
    "extended_l2": False,
    "backing": None,
    "cache": Cache.WRITEBACK,
    "aio": Aio.THREADS,
    "interface": Interface.VIRTIO_BLK,
    "workload": Workload.INSTALL,
    "cache_state": CacheState.FRESH,
    "measure": Measure.GUEST,
}


def make_cell(**spelled: Unpack[CellSpelling]) -> Cell:
    """Build one validated cell from user-facing spellings: the axes of :class:`CellAxes` (each
    defaults to :data:`AXIS_DEFAULTS`) and the workloads' parameters (:func:`workload_params`),
    each checked whatever the cell's workload; the workload's own cross checks with the disk's
    size follow.  A name that is neither is refused with the names there are.
    """
    axes = {**AXIS_DEFAULTS, **{k: v for k, v in spelled.items() if k in AXIS_DEFAULTS}}
    params = {k: v for k, v in spelled.items() if k not in AXIS_DEFAULTS}
    format, preallocation, size = axes["format"], axes["preallocation"], axes["size"]
    cluster_size, lazy_refcounts, compat = axes["cluster_size"], axes["lazy_refcounts"], axes["compat"]
    encrypt, cache, aio, interface = axes["encrypt"], axes["cache"], axes["aio"], axes["interface"]
    workload, cache_state, measure = axes["workload"], axes["cache_state"], axes["measure"]
    extended_l2, backing = bool(axes["extended_l2"]), axes["backing"]
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
    wl = parse_workload(workload)
    values = registry.checked_values(params)
    check_disk = wl.kind.check_disk
    if check_disk is not None:
        check_disk(values, disk_size)
    state: CacheState = _choice(CacheState, cache_state, "cache state")
    how: Measure = _choice(Measure, measure, "measure")
    if how is Measure.REPLAY and state is not CacheState.FRESH:
        raise SpecError(
            f"measure=replay replays a fresh image's requests, not cache_state={state.value}: "
            "use cache_state=fresh, or measure=guest"
        )
    if how is Measure.REPLAY and encrypt != "none":
        raise SpecError("measure=replay cannot open an encrypted image: use encrypt=none, or measure=guest")
    _check_extended_l2(extended_l2, fmt, csize, compat)
    chain = None if backing in (None, "", "none") else parse_backing(backing, disk_size)
    if chain is not None:
        _check_overlay(fmt, prealloc, encrypt, extended_l2)
    return Cell(
        image=ImageSpec(
            format=fmt,
            preallocation=prealloc,
            size=disk_size,
            cluster_size=csize,
            lazy_refcounts=lazy_refcounts,
            compat=compat,
            encrypt=encrypt,
            extended_l2=extended_l2,
        ),
        drive=DriveSpec(cache=cache_mode, aio=aio_mode, interface=iface),
        workload=WorkloadSpec(name=wl, values=tuple(values.items())),
        cache_state=state,
        measure=how,
        backing=chain,
    )


def _check_extended_l2(on: bool, fmt: Format, cluster_size: int | None, compat: str | None) -> None:
    if not on:
        return
    if fmt is not Format.QCOW2:
        raise SpecError(f"extended_l2 applies to qcow2 only: drop it for format {fmt.value}")
    if compat == "0.10":
        raise SpecError("extended_l2 needs qcow2 compat 1.1, not 0.10: drop one of them")
    if (cluster_size or DEFAULT_CLUSTER_SIZE) < EXTENDED_L2_MIN_CLUSTER:
        raise SpecError(
            f"extended_l2 needs a cluster_size of at least 16K, not {format_size(cluster_size or 0).upper()}: "
            "use a larger cluster_size or drop extended_l2"
        )


def _check_overlay(fmt: Format, prealloc: str, encrypt: str, extended_l2: bool) -> None:
    """A cell whose disk is an overlay: what qemu-img and the samplers can make of one."""
    if fmt is not Format.QCOW2:
        raise SpecError(
            f"backing needs format qcow2 (a {fmt.value} image has no backing file): use format=qcow2"
        )
    if prealloc != "off" and not extended_l2:
        raise SpecError(
            f"backing with preallocation={prealloc} needs extended_l2 (qemu-img refuses a preallocated "
            "overlay without it): use preallocation=off, or extended_l2"
        )
    if encrypt != "none":
        raise SpecError("backing with an encrypted overlay is not measured: use encrypt=none")


def workload_params() -> tuple[str, ...]:
    """The workloads' parameter names: :func:`make_cell` keywords besides its own."""
    return tuple(registry.params())


def axis_names() -> tuple[str, ...]:
    """Every :func:`make_cell` keyword, in its order, the workloads' parameters after ``workload``."""
    own = list(CellAxes.__annotations__)
    at = own.index("workload") + 1
    return (*own[:at], *workload_params(), *own[at:])


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
