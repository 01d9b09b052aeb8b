"""From a recording run's two outputs to a :class:`~harness.sample.replay.stream.Stream`.  Pure: no I/O
but reading the file objects it is given.

The recording run (:mod:`harness.sample.replay.record`) gives:

- **the write log** of a ``blklogwrites`` node put over the disk's format node
  (dm-log-writes format): a superblock in sector 0, then one entry per
  completed write, write-zeroes, discard and flush, in the order they
  completed; an entry is a header sector (``sector``, ``nr_sectors``, ``flags``,
  ``data_len``, little-endian u64) followed, for a write, by its data.  From it
  come the flushes and discards (QEMU 7.2 traces neither) and whether a
  write's data was all zeros.
- **QEMU's trace** (log backend, ``-msg timestamp=on``; a line is
  ``PID@SECONDS.MICROS:EVENT ARGS``): ``bdrv_open_common`` (the block nodes,
  their driver and open flags), ``blk_co_preadv``/``blk_co_pwritev`` at the
  disk's BlockBackend (every read and write when the guest issued it, with its
  flags: FUA, write-zeroes), and ``bdrv_co_pwritev_part`` on the log's file
  node, which blklogwrites writes each entry to *after* the request
  completed: the completion time of every logged request.

Merged: reads and writes in the order the guest issued them; each write
matched to its log entry by offset and length (the first unmatched one that
completed after it was issued); flushes and discards placed at their
completion (their issue is not traced: a flush then covers the writes issued
while it ran, which a guest's flush at most overlaps).  A request's
``depth`` is how many earlier requests had not completed when it was issued;
reads have no completion in the trace and count as done at once (their own
depth is right; a read's time in flight is missing from the others').
"""

from __future__ import annotations

import heapq
import json
import re
import struct
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

from harness.errors import ProtocolError, StreamOverCap
from harness.sample.replay.stream import MAX_REQUESTS, Kind, Request, Stream

LOG_MAGIC = 0x6A736677736872
LOG_VERSION = 1
LOG_FLUSH = 0x1
LOG_FUA = 0x2
LOG_DISCARD = 0x4
LOG_MARK = 0x8
# BdrvRequestFlags of QEMU 7.2 (include/block/block-common.h)
REQ_ZERO_WRITE = 0x2
REQ_FUA = 0x10
# BDRV_O_* open flags that carry the cache mode and aio as both -drive and qemu-io set them:
# RDWR, NOCACHE, NATIVE_AIO, NO_FLUSH, IO_URING.  (The trace shows the flags a node is opened
# with, before its own options are parsed: discard and copy-on-read given as options are not
# there yet, so those are compared as options, see harness.sample.replay.script.)
GRAPH_FLAGS = 0x2 | 0x20 | 0x80 | 0x200 | 0x40000
ZERO_CHUNK = 1 << 20

_LINE = re.compile(r"^(?:(\d+)@(\d+)\.(\d{6}):)?(\w+) (.*)$")
_OPEN = re.compile(r'^bs (0x[0-9a-f]+) filename "(.*)" flags (0x[0-9a-f]+) format_name "([\w-]+)"$')
_BLK = re.compile(r"^blk (0x[0-9a-f]+) bs (0x[0-9a-f]+) offset (\d+) bytes (\d+) flags (0x[0-9a-f]+)$")
_BDRV = re.compile(r"^bs (0x[0-9a-f]+) offset (\d+) bytes (\d+) flags (0x[0-9a-f]+)$")


@dataclass(frozen=True)
class LogEntry:
    """One entry of the write log: a completed request, in completion order."""

    log_offset: int  # where its header sits in the log file
    kind: Kind
    offset: int
    bytes: int
    zero: bool
    fua: bool


@dataclass(frozen=True)
class Issue:
    """A read or write as the BlockBackend saw it issued."""

    time_us: int
    kind: Kind
    offset: int
    bytes: int
    flags: int


@dataclass
class Trace:
    """What the trace says of the disk under test."""

    graph: list[tuple[str, str]] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    # log file offset -> time (µs) blklogwrites wrote the entry there
    logged_us: dict[int, int] = field(default_factory=dict)


def parse_log(
    fh: BinaryIO, *, sector_bytes: int = 512, max_entries: int = MAX_REQUESTS * 4
) -> list[LogEntry]:
    """The entries of a blklogwrites log, read to its end (its superblock counts only up to the last flush)."""
    head = fh.read(sector_bytes)
    if len(head) < 28:
        raise ProtocolError("the write log has no superblock: blklogwrites did not run")
    magic, version, _count, sector = struct.unpack_from("<QQQI", head)
    if magic != LOG_MAGIC or version != LOG_VERSION or sector != sector_bytes:
        raise ProtocolError(
            f"the write log's superblock is not dm-log-writes v1 with {sector_bytes}-byte sectors"
        )
    entries: list[LogEntry] = []
    position = sector_bytes
    while True:
        header = fh.read(sector_bytes)
        if not header:
            return entries
        if len(header) < 32 or len(entries) >= max_entries:
            raise ProtocolError(f"the write log is cut or too long at byte {position}")
        first, count, flags, _data_len = struct.unpack_from("<QQQQ", header)
        if flags & ~(LOG_FLUSH | LOG_FUA | LOG_DISCARD | LOG_MARK):
            raise ProtocolError(f"the write log has unknown flags {flags:#x} at byte {position}")
        size = count * sector_bytes
        zero = True
        if flags & LOG_FLUSH:
            kind = Kind.FLUSH
        elif flags & LOG_DISCARD:
            kind = Kind.DISCARD
        elif flags & LOG_MARK:
            kind = Kind.FLUSH  # never written by QEMU; a mark carries no data
            size = 0
        else:
            kind = Kind.WRITE
            zero = _all_zero(fh, size, position)
        entries.append(
            LogEntry(
                log_offset=position,
                kind=kind,
                offset=first * sector_bytes if kind is not Kind.FLUSH else 0,
                bytes=size if kind is not Kind.FLUSH else 0,
                zero=zero and kind is Kind.WRITE,
                fua=bool(flags & LOG_FUA),
            )
        )
        position += sector_bytes + (size if kind is Kind.WRITE else 0)


def _all_zero(fh: BinaryIO, size: int, position: int) -> bool:
    zero = True
    left = size
    while left:
        chunk = fh.read(min(left, ZERO_CHUNK))
        if not chunk:
            raise ProtocolError(f"the write log ends inside the data of the entry at byte {position}")
        if zero and chunk.count(0) != len(chunk):
            zero = False
        left -= len(chunk)
    return zero


def parse_trace(lines: Iterable[str], *, image: str, log: str, max_issues: int = MAX_REQUESTS * 4) -> Trace:
    """The disk's graph, issues and log completions from QEMU's trace.

    ``image`` and ``log`` are the file names QEMU was given for the image and
    the write log (as they appear in ``bdrv_open_common``).  More than ``max_issues`` issues or
    log completions end the parse as they come (:class:`~harness.errors.StreamOverCap`): what is
    kept of a trace never grows past that.
    """
    trace = Trace()
    root = log_node = None
    nodes: list[tuple[str, str]] = []
    for line in lines:
        match = _LINE.match(line.rstrip("\n"))
        if match is None:
            continue
        _pid, secs, micros, event, args = match.groups()
        time_us = int(secs) * 1_000_000 + int(micros) if secs is not None else 0
        if event == "bdrv_open_common":
            opened = _OPEN.match(args)
            if opened is None:
                continue
            ptr, filename, flags, driver = opened.groups()
            if filename == log and driver == "file":
                log_node = ptr
            elif driver == "blklogwrites" and _names_image(filename, image):
                root = ptr
            elif filename == image:
                nodes.append((driver, hex(int(flags, 16) & GRAPH_FLAGS)))
        elif event in ("blk_co_preadv", "blk_co_pwritev"):
            issued = _BLK.match(args)
            if issued is None or issued.group(2) != root:
                continue
            offset, size, flags = int(issued.group(3)), int(issued.group(4)), int(issued.group(5), 16)
            if event == "blk_co_preadv":
                kind = Kind.READ
            else:
                kind = Kind.WRITE_ZEROES if flags & REQ_ZERO_WRITE else Kind.WRITE
            if len(trace.issues) >= max_issues:
                raise StreamOverCap(
                    f"the trace holds more than {max_issues} requests: past what a stream may hold"
                )
            trace.issues.append(Issue(time_us, kind, offset, size, flags))
        elif event == "bdrv_co_pwritev_part":
            written = _BDRV.match(args)
            if written is not None and written.group(1) == log_node and int(written.group(2)) > 0:
                if len(trace.logged_us) >= max_issues:
                    raise StreamOverCap(
                        f"the trace holds more than {max_issues} logged requests: past what a stream may hold"
                    )
                trace.logged_us.setdefault(int(written.group(2)), time_us)
    if root is None or log_node is None:
        raise ProtocolError("the trace does not show the blklogwrites node and its log: not a recording run")
    # opened bottom up (protocol, then format): the graph is kept top down
    trace.graph = list(reversed(nodes))
    return trace


def _names_image(filename: str, image: str) -> bool:
    """Whether a node's ``filename`` is ``image``'s: the image itself, or the ``json:`` name QEMU
    gives a node above a format node with options of its own (an overlay's chain given as
    ``backing.*``), whose ``file`` is the image."""
    if filename == image:
        return True
    if not filename.startswith("json:"):
        return False
    try:
        described = json.loads(filename.removeprefix("json:"))
    except ValueError:
        return False
    below = described.get("file") if isinstance(described, dict) else None
    return isinstance(below, dict) and below.get("filename") == image


@dataclass(frozen=True)
class Merged:
    stream: Stream
    unmatched_issues: int
    unlogged_entries: int


def merge(
    entries: list[LogEntry], trace: Trace, *, disk_bytes: int, drive: dict[str, str], sector_bytes: int = 512
) -> Merged:
    """The stream of the traced window: issues and log entries joined, in issue order, with depths."""
    traced = [e for e in entries if e.log_offset in trace.logged_us]
    unlogged = len(entries) - len(traced)
    # a write's entry: same range, the first not yet taken (completion order)
    pending: dict[tuple[int, int], deque[LogEntry]] = defaultdict(deque)
    for entry in traced:
        if entry.kind is Kind.WRITE:
            pending[(entry.offset, entry.bytes)].append(entry)
    timed: list[tuple[int, int, Request, int | None]] = []  # (issue µs, seq, request, completion µs)
    unmatched = 0
    for seq, issue in enumerate(trace.issues):
        if issue.kind is Kind.READ:
            timed.append((issue.time_us, seq, Request(Kind.READ, issue.offset, issue.bytes), None))
            continue
        queue = pending.get((issue.offset, issue.bytes))
        found = queue.popleft() if queue else None
        done = trace.logged_us[found.log_offset] if found else None
        if found is None:
            unmatched += 1
        zero = issue.kind is Kind.WRITE_ZEROES or (found is not None and found.zero)
        fua = bool(issue.flags & REQ_FUA) or (found is not None and found.fua)
        timed.append((issue.time_us, seq, Request(issue.kind, issue.offset, issue.bytes, zero, fua), done))
    for seq, logged in enumerate(traced, start=len(trace.issues)):
        if logged.kind in (Kind.FLUSH, Kind.DISCARD):
            done = trace.logged_us[logged.log_offset]
            timed.append((done, seq, Request(logged.kind, logged.offset, logged.bytes), done))
    timed.sort(key=lambda item: (item[0], item[1]))
    requests = []
    in_flight: list[int] = []
    for issued, _seq, request, done in timed:
        while in_flight and in_flight[0] <= issued:
            heapq.heappop(in_flight)
        requests.append(
            Request(request.kind, request.offset, request.bytes, request.zero, request.fua, len(in_flight))
        )
        if done is not None and done > issued:
            heapq.heappush(in_flight, done)
    stream = Stream(
        disk_bytes=disk_bytes,
        requests=tuple(requests),
        drive=drive,
        graph=tuple(trace.graph),
        sector_bytes=sector_bytes,
    )
    return Merged(stream=stream, unmatched_issues=unmatched, unlogged_entries=unlogged)


def graph_of(lines: Iterable[str], *, image: str) -> list[tuple[str, str]]:
    """The block nodes opened on ``image`` (driver, flags), top down, from a trace of
    ``bdrv_open_common`` (a replay's: qemu-io's ``-T``)."""
    nodes = []
    for line in lines:
        match = _LINE.match(line.rstrip("\n"))
        if match is None or match.group(4) != "bdrv_open_common":
            continue
        opened = _OPEN.match(match.group(5))
        if opened is not None and opened.group(2) == image and opened.group(4) != "blklogwrites":
            nodes.append((opened.group(4), hex(int(opened.group(3), 16) & GRAPH_FLAGS)))
    return list(reversed(nodes))
