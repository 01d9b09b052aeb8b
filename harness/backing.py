"""A cell's backing chain: its disk an overlay over a base, as platforms run guests.  Pure.

``--backing depth=1,fill=50%,pattern=scattered`` (``backing = "..."`` in a spec) makes the
cell's qcow2 image a fresh overlay per sample over a chain of ``depth`` read-only images: the
base, of which ``fill`` is written (a share of the disk, ``50%``, or a size, ``512M``), laid
out ``sequential`` (from the start) or ``scattered`` (one :data:`FILL_CHUNK` in every few,
evenly over the disk), and ``depth - 1`` empty qcow2 layers between it and the overlay.  The
base's format and qcow2 options (``format``, ``cluster_size``, ``extended_l2``) are its own;
the layers between take the base's qcow2 options.  The chain is built once per key and cached
(:mod:`harness.sample.chain`).

:func:`parse_backing` checks the text against a disk's size and gives a :class:`Backing`;
bad input is a :class:`SpecError` naming the key and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.errors import SpecError
from harness.sizes import format_size, parse_size

DEPTHS = (1, 2, 3)
PATTERNS = ("sequential", "scattered")
BASE_FORMATS = ("qcow2", "raw")
#: what a scattered fill writes at a time, and the step of a sequential one
FILL_CHUNK = 64 * 1024
DEFAULT_BASE_CLUSTER = 65536
#: QEMU's smallest cluster with extended L2 entries (32 subclusters of at least 512 bytes)
EXTENDED_L2_MIN_CLUSTER = 16384
KEYS = ("depth", "fill", "pattern", "format", "cluster_size", "extended_l2")
ON_OFF = {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}


@dataclass(frozen=True)
class Backing:
    """The chain under a cell's overlay: its depth, the base's fill and layout, the base's options."""

    depth: int = 1
    #: "50%" (a share of the disk) or a size in bytes, as given
    fill_percent: int | None = 100
    fill_size: int | None = None
    pattern: str = "sequential"
    format: str = "qcow2"
    cluster_size: int | None = DEFAULT_BASE_CLUSTER
    extended_l2: bool = False

    def fill_bytes(self, disk_size: int) -> int:
        """The bytes of the base that are written, a whole number of :data:`FILL_CHUNK`."""
        wanted = self.fill_size if self.fill_size is not None else disk_size * (self.fill_percent or 0) // 100
        return min(wanted, disk_size) // FILL_CHUNK * FILL_CHUNK

    def extents(self, disk_size: int) -> list[tuple[int, int]]:
        """(offset, length) of every written run of the base: one from 0 (sequential), or one
        chunk in every ``step`` evenly over the disk (scattered)."""
        filled = self.fill_bytes(disk_size)
        if filled == 0:
            return []
        if self.pattern == "sequential":
            return [(0, filled)]
        chunks = filled // FILL_CHUNK
        slots = disk_size // FILL_CHUNK
        return [(slots * i // chunks * FILL_CHUNK, FILL_CHUNK) for i in range(chunks)]

    @property
    def fill_text(self) -> str:
        return f"{self.fill_percent}%" if self.fill_size is None else format_size(self.fill_size).upper()

    @property
    def slug(self) -> str:
        """The chain in a cell id: ``over-d1-f50pct-scattered-qcow2-cs64k``."""
        fill = f"{self.fill_percent}pct" if self.fill_size is None else format_size(self.fill_size)
        parts = ["over", f"d{self.depth}", f"f{fill}", self.pattern, self.format]
        if self.format == "qcow2":
            parts.append(f"cs{format_size(self.cluster_size or DEFAULT_BASE_CLUSTER)}")
            if self.extended_l2:
                parts.append("l2ext")
        return "-".join(parts)

    def spelled(self) -> str:
        """The text :func:`parse_backing` reads back to this chain (a run flag's, a spec's)."""
        words = [f"depth={self.depth}", f"fill={self.fill_text}", f"pattern={self.pattern}"]
        words.append(f"format={self.format}")
        if self.format == "qcow2":
            words.append(f"cluster_size={format_size(self.cluster_size or DEFAULT_BASE_CLUSTER).upper()}")
            words.append(f"extended_l2={'on' if self.extended_l2 else 'off'}")
        return ",".join(words)

    def as_dict(self) -> dict[str, Any]:
        """What a record's cell says of the chain."""
        return {
            "depth": self.depth,
            "fill": self.fill_text,
            "pattern": self.pattern,
            "format": self.format,
            "cluster_size": self.cluster_size,
            "extended_l2": self.extended_l2,
        }


def _fill(text: str, disk_size: int) -> tuple[int | None, int | None]:
    value = text.strip()
    if value.endswith("%"):
        number = value[:-1].strip()
        if not number.isdigit() or int(number) > 100:
            raise SpecError(f"backing fill {text!r} is not a share of the disk: use 0% to 100%, or a size")
        return int(number), None
    size = parse_size(value, what="backing fill")
    if size > disk_size:
        raise SpecError(
            f"backing fill {text!r} is larger than the disk ({format_size(disk_size).upper()}): "
            f"use at most 100% or {format_size(disk_size).upper()}"
        )
    return None, size


def parse_backing(text: str | Backing, disk_size: int) -> Backing:
    """``"depth=2,fill=50%,pattern=scattered"`` -> :class:`Backing`, checked against ``disk_size``.

    Keys left out take their defaults (depth 1, fill 100 %, sequential, a qcow2 base of 64K
    clusters without extended L2 entries).
    """
    if isinstance(text, Backing):
        text = text.spelled()
    given: dict[str, str] = {}
    for word in str(text).split(","):
        if not word.strip():
            continue
        key, sep, value = word.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or key not in KEYS:
            raise SpecError(
                f"backing {word.strip()!r} is not a key=value of the chain: use {', '.join(KEYS)} "
                "(e.g. depth=1,fill=50%,pattern=scattered)"
            )
        if key in given:
            raise SpecError(f"backing {key} is given twice: keep one")
        given[key] = value.strip()
    depth_text = given.get("depth", "1")
    if not depth_text.isdigit() or int(depth_text) not in DEPTHS:
        raise SpecError(f"backing depth {depth_text!r} is not allowed: use 1, 2 or 3")
    percent, size = _fill(given.get("fill", "100%"), disk_size)
    pattern = given.get("pattern", "sequential").lower()
    if pattern not in PATTERNS:
        raise SpecError(f"backing pattern {pattern!r} is not allowed: use {' or '.join(PATTERNS)}")
    fmt = given.get("format", "qcow2").lower()
    if fmt not in BASE_FORMATS:
        raise SpecError(f"backing format {fmt!r} is not allowed: use {' or '.join(BASE_FORMATS)}")
    l2_text = given.get("extended_l2", "off").lower()
    if l2_text not in ON_OFF:
        raise SpecError(f"backing extended_l2 {l2_text!r}: use on or off")
    extended_l2 = ON_OFF[l2_text]
    cluster: int | None = None
    if fmt == "raw":
        for key in ("cluster_size", "extended_l2"):
            if key in given:
                raise SpecError(f"backing {key} applies to a qcow2 base only: drop it for format=raw")
        if int(depth_text) > 1:
            raise SpecError(
                "backing depth above 1 needs a qcow2 base (the layers between are qcow2): use format=qcow2"
            )
    else:
        cluster = parse_size(
            given.get("cluster_size", str(DEFAULT_BASE_CLUSTER)), what="backing cluster_size"
        )
        if cluster < 512 or cluster > 2 * 1024**2 or cluster & (cluster - 1):
            raise SpecError(
                f"backing cluster_size {given.get('cluster_size')!r} is not allowed: use a power of two from 512 to 2M"
            )
        if extended_l2 and cluster < EXTENDED_L2_MIN_CLUSTER:
            raise SpecError(
                f"backing extended_l2 needs a cluster_size of at least 16K, not {format_size(cluster).upper()}: "
                "use a larger cluster_size or extended_l2=off"
            )
    return Backing(
        depth=int(depth_text),
        fill_percent=percent,
        fill_size=size,
        pattern=pattern,
        format=fmt,
        cluster_size=cluster,
        extended_l2=extended_l2,
    )
