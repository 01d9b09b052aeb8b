"""A recorded request stream: what a guest asked of its disk, in order.  Pure: no I/O.

A stream file is a small versioned JSON object with the requests as columns
(one array per field, the same length each), so a dd-128M stream of about a
thousand requests is a few tens of kilobytes::

    {"format": "diskbench-replay-stream", "version": 1,
     "disk_bytes": 268435456, "sector_bytes": 512,
     "drive": {"format": "qcow2", "cache": "none", "aio": "threads", "detect-zeroes": "unmap"},
     "graph": [["qcow2", "0x220a2"], ["file", "0x2a0a2"]],
     "requests": {"kind": "wwwf...", "offset": [...], "bytes": [...],
                  "zero": [0, 1, ...], "fua": [0, ...], "depth": [0, 3, ...]},
     "source": {...}}

``kind`` is one letter per request (:class:`Kind`).  ``zero`` says a write's
data was all zeros (for a write-zeroes request, always); ``depth`` is how
many earlier requests were still in flight when it was issued (see
:mod:`harness.sample.replay.capture` for how that is known).  ``drive`` is the
guest's ``-drive`` options that decide the block layer's work (everything but
file names and the device), ``graph`` the block nodes QEMU opened for the
disk (driver and open flags, top down): the replay must give the same.

A stream file may come from anywhere (a cache, a pull request's artifact):
:func:`parse_stream` checks every field, bounds the request count, keeps
every request inside the disk and aligned to its sector, and never trusts a
length it has not checked.  Its :attr:`Stream.digest` is the SHA-256 of the
canonical JSON and names it in records.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from harness.errors import UsageError

FORMAT = "diskbench-replay-stream"
VERSION = 1
#: qemu-io takes its script on the command line (see harness.sample.replay.script): bounded by ARG_MAX
MAX_REQUESTS = 20_000
#: the largest read or write a stream may hold (a guest's are a few MiB; qemu-io allocates each)
MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_DISK_BYTES = 16 * 1024**4
MAX_DEPTH = 4096
MAX_FILE_BYTES = 8 * 1024 * 1024
#: option names and values a stream's drive and graph may hold: what a -drive line may hold
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
MAX_OPTIONS = 64


class StreamError(UsageError):
    """A stream file that is not a stream: exit 2, naming the file and what is wrong."""


class Kind(StrEnum):
    READ = "r"
    WRITE = "w"
    WRITE_ZEROES = "z"
    FLUSH = "f"
    DISCARD = "d"

    @property
    def word(self) -> str:
        return {"r": "read", "w": "write", "z": "write_zeroes", "f": "flush", "d": "discard"}[self.value]


@dataclass(frozen=True)
class Request:
    kind: Kind
    offset: int = 0
    bytes: int = 0
    zero: bool = False
    fua: bool = False
    depth: int = 0


@dataclass(frozen=True)
class Stream:
    disk_bytes: int
    requests: tuple[Request, ...]
    drive: Mapping[str, str] = field(default_factory=dict)
    graph: tuple[tuple[str, str], ...] = ()
    sector_bytes: int = 512
    source: Mapping[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Requests per kind (every kind, zeros included)."""
        counted = Counter(r.kind for r in self.requests)
        return {kind.word: counted.get(kind, 0) for kind in Kind}

    def summary(self) -> dict[str, Any]:
        """What two recordings of one cell are compared by."""
        writes = [r for r in self.requests if r.kind in (Kind.WRITE, Kind.WRITE_ZEROES)]
        reads = [r for r in self.requests if r.kind is Kind.READ]
        return {
            **self.counts(),
            "write_bytes": sum(r.bytes for r in writes),
            "read_bytes": sum(r.bytes for r in reads),
            "zero_writes": sum(1 for r in writes if r.zero),
            "fua_writes": sum(1 for r in writes if r.fua),
            "write_sizes": dict(sorted(Counter(r.bytes for r in writes).items())),
            "max_depth": max((r.depth for r in self.requests), default=0),
            "mean_depth": sum(r.depth for r in self.requests) / len(self.requests) if self.requests else 0.0,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "disk_bytes": self.disk_bytes,
            "sector_bytes": self.sector_bytes,
            "drive": dict(sorted(self.drive.items())),
            "graph": [list(node) for node in self.graph],
            "requests": {
                "kind": "".join(r.kind.value for r in self.requests),
                "offset": [r.offset for r in self.requests],
                "bytes": [r.bytes for r in self.requests],
                "zero": [int(r.zero) for r in self.requests],
                "fua": [int(r.fua) for r in self.requests],
                "depth": [r.depth for r in self.requests],
            },
            "source": dict(self.source),
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON, without ``source`` (where it was recorded is not what it is)."""
        data = self.as_dict()
        del data["source"]
        return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def parse_stream(text: str | bytes, *, source: str) -> Stream:
    """A stream from its file's text; anything off is a :class:`StreamError` naming ``source``."""
    if len(text) > MAX_FILE_BYTES:
        raise StreamError(f"{source}: {len(text)} bytes, past the {MAX_FILE_BYTES} a stream may have")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise StreamError(f"{source}: not JSON ({str(exc)[:80]}): record the stream again") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StreamError(f"{source}: not a replay stream (format is not {FORMAT!r})")
    if data.get("version") != VERSION:
        raise StreamError(
            f"{source}: stream version {data.get('version')!r}, this harness reads {VERSION}: record it again"
        )
    disk_bytes = _int(data.get("disk_bytes"), "disk_bytes", source, 1, MAX_DISK_BYTES)
    sector = _int(data.get("sector_bytes"), "sector_bytes", source, 512, 4096)
    if sector & (sector - 1):
        raise StreamError(f"{source}: sector_bytes {sector} is not a power of two")
    drive = _options(data.get("drive"), source)
    graph = _graph(data.get("graph"), source)
    requests = _requests(data.get("requests"), source, disk_bytes=disk_bytes, sector=sector)
    extra = data.get("source", {})
    return Stream(
        disk_bytes=disk_bytes,
        requests=requests,
        drive=drive,
        graph=graph,
        sector_bytes=sector,
        source=extra if isinstance(extra, dict) else {},
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _int(value: Any, name: str, source: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise StreamError(f"{source}: {name} = {str(value)[:40]!r}: use an integer from {low} to {high}")
    return value


def _word(value: Any, name: str, source: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 64 or not set(value) <= _PLAIN:
        raise StreamError(f"{source}: {name} {str(value)[:40]!r}: use letters, digits and . - _ only")
    return value


def _options(value: Any, source: str) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > MAX_OPTIONS:
        raise StreamError(f"{source}: drive must be an object of at most {MAX_OPTIONS} options")
    return {_word(k, "drive option", source): _word(v, f"drive option {k}", source) for k, v in value.items()}


def _graph(value: Any, source: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or len(value) > 16:
        raise StreamError(f"{source}: graph must be a list of at most 16 nodes")
    nodes = []
    for node in value:
        if not isinstance(node, list) or len(node) != 2:
            raise StreamError(f"{source}: a graph node must be [driver, flags]")
        nodes.append((_word(node[0], "graph driver", source), _word(node[1], "graph flags", source)))
    return tuple(nodes)


def _column(columns: Mapping[str, Any], name: str, source: str, count: int) -> Sequence[Any]:
    value = columns.get(name)
    if not isinstance(value, list | str) or len(value) != count:
        raise StreamError(f"{source}: requests.{name} must hold one value per request ({count})")
    return value


def _requests(value: Any, source: str, *, disk_bytes: int, sector: int) -> tuple[Request, ...]:
    if not isinstance(value, dict):
        raise StreamError(f"{source}: requests must be an object of columns")
    kinds = value.get("kind")
    if not isinstance(kinds, str):
        raise StreamError(f"{source}: requests.kind must be a string of r, w, z, f, d")
    if len(kinds) > MAX_REQUESTS:
        raise StreamError(f"{source}: {len(kinds)} requests, past the {MAX_REQUESTS} a stream may have")
    count = len(kinds)
    offsets = _column(value, "offset", source, count)
    sizes = _column(value, "bytes", source, count)
    zeros = _column(value, "zero", source, count)
    fuas = _column(value, "fua", source, count)
    depths = _column(value, "depth", source, count)
    requests = []
    for i, letter in enumerate(kinds):
        try:
            kind = Kind(letter)
        except ValueError:
            raise StreamError(f"{source}: request {i}: kind {letter!r} is not one of r, w, z, f, d") from None
        where = f"request {i}"
        depth = _int(depths[i], f"{where} depth", source, 0, MAX_DEPTH)
        zero = _int(zeros[i], f"{where} zero", source, 0, 1) == 1
        fua = _int(fuas[i], f"{where} fua", source, 0, 1) == 1
        if kind is Kind.FLUSH:
            _int(offsets[i], f"{where} offset", source, 0, 0)
            _int(sizes[i], f"{where} bytes", source, 0, 0)
            requests.append(Request(kind, depth=depth))
            continue
        offset = _int(offsets[i], f"{where} offset", source, 0, disk_bytes - sector)
        # a read or write is a buffer qemu-io allocates: bounded; zeroes and discards carry no data
        largest = MAX_REQUEST_BYTES if kind in (Kind.READ, Kind.WRITE) else disk_bytes
        size = _int(sizes[i], f"{where} bytes", source, sector, largest)
        if offset % sector or size % sector:
            raise StreamError(f"{source}: {where} ({offset}, {size}) is not aligned to {sector} bytes")
        if offset + size > disk_bytes:
            raise StreamError(
                f"{source}: {where} ends at {offset + size}, past the disk's {disk_bytes} bytes"
            )
        requests.append(
            Request(kind, offset, size, zero=zero or kind is Kind.WRITE_ZEROES, fua=fua, depth=depth)
        )
    return tuple(requests)
