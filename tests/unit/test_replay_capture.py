"""The capture of a stream: a blklogwrites log, QEMU's trace lines, and the two joined with depths."""

from __future__ import annotations

import io
import struct

import pytest

from harness.errors import ProtocolError
from harness.sample.replay.capture import (
    LOG_DISCARD,
    LOG_FLUSH,
    LOG_MAGIC,
    LogEntry,
    graph_of,
    merge,
    parse_log,
    parse_trace,
)
from harness.sample.replay.stream import Kind

SECTOR = 512


def log_bytes(entries: list[tuple[int, int, int, bytes]]) -> bytes:
    """A dm-log-writes log: (first sector, sectors, flags, data) per entry, as blklogwrites writes it."""
    out = bytearray(struct.pack("<QQQI", LOG_MAGIC, 1, len(entries), SECTOR).ljust(SECTOR, b"\0"))
    for first, count, flags, data in entries:
        out += struct.pack("<QQQQ", first, count, flags, 0).ljust(SECTOR, b"\0")
        out += data
    return bytes(out)


def test_the_log_gives_writes_with_zero_data_flushes_and_discards_in_completion_order() -> None:
    raw = log_bytes(
        [
            (8, 2, 0, b"\1" * 1024),
            (16, 1, 0, b"\0" * 512),
            (0, 0, LOG_FLUSH, b""),
            (32, 8, LOG_DISCARD, b""),  # a discard carries no data
        ]
    )
    entries = parse_log(io.BytesIO(raw))
    assert entries == [
        LogEntry(512, Kind.WRITE, 8 * SECTOR, 1024, zero=False, fua=False),
        LogEntry(512 + 512 + 1024, Kind.WRITE, 16 * SECTOR, 512, zero=True, fua=False),
        LogEntry(512 + 1024 + 1024 + 512, Kind.FLUSH, 0, 0, zero=False, fua=False),
        LogEntry(512 + 1024 + 1024 + 512 + 512, Kind.DISCARD, 32 * SECTOR, 8 * SECTOR, zero=False, fua=False),
    ]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "no superblock"),
        (struct.pack("<QQQI", 1234, 1, 0, SECTOR).ljust(SECTOR, b"\0"), "not dm-log-writes v1"),
        (log_bytes([(8, 4, 0, b"\1" * 512)]), "ends inside the data"),
        (log_bytes([(8, 1, 0x100, b"\1" * 512)]), "unknown flags"),
        (log_bytes([(8, 1, 0, b"\1" * 512)]) + b"\0" * 10, "cut or too long"),
    ],
)
def test_a_broken_log_is_a_protocol_error(raw: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse_log(io.BytesIO(raw))


def test_a_log_past_its_entry_bound_is_refused() -> None:
    raw = log_bytes([(0, 0, LOG_FLUSH, b"")] * 5)
    with pytest.raises(ProtocolError, match="too long"):
        parse_log(io.BytesIO(raw), max_entries=4)


IMG, LOG = "/proc/self/fd/7", "/proc/self/fd/9"
OPENS = [
    f'1@100.000001:bdrv_open_common bs 0xa1 filename "{IMG}" flags 0x2a0a2 format_name "file"',
    f'1@100.000002:bdrv_open_common bs 0xa2 filename "{IMG}" flags 0x220a2 format_name "qcow2"',
    f'1@100.000003:bdrv_open_common bs 0xa3 filename "{IMG}" flags 0x220a2 format_name "blklogwrites"',
    f'1@100.000004:bdrv_open_common bs 0xb1 filename "{LOG}" flags 0x2e0a2 format_name "file"',
    '1@100.000005:bdrv_open_common bs 0xc1 filename "/tools.img" flags 0x0 format_name "raw"',
]


def test_the_trace_gives_the_graph_the_disks_issues_and_log_completions() -> None:
    lines = [
        *OPENS,
        "1@200.000010:blk_co_pwritev blk 0xf0 bs 0xa3 offset 4096 bytes 1024 flags 0x10",
        "1@200.000011:blk_co_preadv blk 0xf1 bs 0xc1 offset 0 bytes 512 flags 0x0",  # another drive
        "1@200.000012:blk_co_preadv blk 0xf0 bs 0xa3 offset 0 bytes 512 flags 0x0",
        "1@200.000013:blk_co_pwritev blk 0xf0 bs 0xa3 offset 0 bytes 65536 flags 0x6",
        "1@200.000020:bdrv_co_pwritev_part bs 0xa2 offset 4096 bytes 1024 flags 0x0",  # the format node
        "1@200.000030:bdrv_co_pwritev_part bs 0xb1 offset 512 bytes 1536 flags 0x0",
        "1@200.000031:bdrv_co_pwritev_part bs 0xb1 offset 0 bytes 512 flags 0x0",  # the superblock
        "garbage line",
        "1@200.000040:bdrv_co_pwritev_part bs 0xb1 offset 2048 bytes 512 flags 0x0",
    ]
    trace = parse_trace(lines, image=IMG, log=LOG)
    assert trace.graph == [("qcow2", "0xa2"), ("file", "0xa2")]
    assert [(i.kind, i.offset, i.bytes, i.time_us) for i in trace.issues] == [
        (Kind.WRITE, 4096, 1024, 200_000_010),
        (Kind.READ, 0, 512, 200_000_012),
        (Kind.WRITE_ZEROES, 0, 65536, 200_000_013),
    ]
    assert trace.logged_us == {512: 200_000_030, 2048: 200_000_040}


def test_an_overlays_log_node_is_named_in_json_and_its_chain_is_not_the_graph() -> None:
    """QEMU 7.2's trace of a recording on an overlay: the layer under it opened by its own
    descriptor, and the blklogwrites node named by the json: filename of its qcow2 child, whose
    backing options are its own."""
    under = "/proc/self/fd/8"
    named = (
        f'json:{{"backing": {{"driver": "qcow2", "file": {{"driver": "file", "filename": "{under}"}}}}, '
        f'"driver": "qcow2", "file": {{"driver": "file", "filename": "{IMG}"}}}}'
    )
    lines = [
        f'1@100.000001:bdrv_open_common bs 0xa1 filename "{IMG}" flags 0x2a022 format_name "file"',
        f'1@100.000002:bdrv_open_common bs 0xa2 filename "{IMG}" flags 0x22022 format_name "qcow2"',
        f'1@100.000003:bdrv_open_common bs 0xd1 filename "{under}" flags 0xe020 format_name "file"',
        f'1@100.000004:bdrv_open_common bs 0xd2 filename "{under}" flags 0x6020 format_name "qcow2"',
        f'1@100.000005:bdrv_open_common bs 0xa3 filename "{named}" flags 0x22022 format_name "blklogwrites"',
        f'1@100.000006:bdrv_open_common bs 0xb1 filename "{LOG}" flags 0x2e0a2 format_name "file"',
        "1@200.000010:blk_co_pwritev blk 0xf0 bs 0xa3 offset 4096 bytes 4096 flags 0x0",
    ]
    trace = parse_trace(lines, image=IMG, log=LOG)
    assert trace.graph == [("qcow2", "0x22"), ("file", "0x22")]
    assert [(i.offset, i.bytes) for i in trace.issues] == [(4096, 4096)]
    # a json: name whose file is another image is not this recording's
    other = named.replace(f'"filename": "{IMG}"}}}}', '"filename": "/proc/self/fd/5"}}')
    with pytest.raises(ProtocolError, match="not a recording run"):
        parse_trace([lines[0], lines[1], lines[4].replace(named, other), lines[5]], image=IMG, log=LOG)


def test_a_trace_without_the_log_node_is_not_a_recording() -> None:
    with pytest.raises(ProtocolError, match="not a recording run"):
        parse_trace(OPENS[:2], image=IMG, log=LOG)


def test_merge_orders_by_issue_places_flushes_at_completion_and_counts_depth() -> None:
    lines = [
        *OPENS,
        # two writes issued together, a read, the second write done first, then a flush
        "1@1.000100:blk_co_pwritev blk 0xf0 bs 0xa3 offset 0 bytes 512 flags 0x0",
        "1@1.000110:blk_co_pwritev blk 0xf0 bs 0xa3 offset 512 bytes 512 flags 0x10",
        "1@1.000120:blk_co_preadv blk 0xf0 bs 0xa3 offset 8192 bytes 4096 flags 0x0",
        "1@1.000200:bdrv_co_pwritev_part bs 0xb1 offset 1024 bytes 1024 flags 0x0",  # 2nd write done
        "1@1.000300:bdrv_co_pwritev_part bs 0xb1 offset 2048 bytes 1024 flags 0x0",  # 1st write done
        "1@1.000400:bdrv_co_pwritev_part bs 0xb1 offset 3072 bytes 512 flags 0x0",  # flush done
        "1@1.000500:blk_co_pwritev blk 0xf0 bs 0xa3 offset 0 bytes 512 flags 0x0",  # never logged
    ]
    entries = [
        LogEntry(512, Kind.WRITE, 0, 512, zero=True, fua=False),  # before the trace was on
        LogEntry(1024, Kind.WRITE, 512, 512, zero=False, fua=False),
        LogEntry(2048, Kind.WRITE, 0, 512, zero=True, fua=False),
        LogEntry(3072, Kind.FLUSH, 0, 0, zero=False, fua=False),
    ]
    merged = merge(
        entries, parse_trace(lines, image=IMG, log=LOG), disk_bytes=1 << 20, drive={"cache": "none"}
    )
    got = [(r.kind, r.offset, r.zero, r.fua, r.depth) for r in merged.stream.requests]
    assert got == [
        (Kind.WRITE, 0, True, False, 0),
        (Kind.WRITE, 512, False, True, 1),
        (Kind.READ, 8192, False, False, 2),
        (Kind.FLUSH, 0, False, False, 0),
        (Kind.WRITE, 0, False, False, 0),
    ]
    assert merged.unlogged_entries == 1
    assert merged.unmatched_issues == 1
    assert merged.stream.graph == (("qcow2", "0xa2"), ("file", "0xa2"))


def test_graph_of_a_replay_trace_without_timestamps() -> None:
    lines = [
        'bdrv_open_common bs 0x1 filename "/img" flags 0xe0a2 format_name "file"',
        'bdrv_open_common bs 0x2 filename "/img" flags 0x60a2 format_name "qcow2"',
        'bdrv_open_common bs 0x3 filename "/img" flags 0x60a2 format_name "throttle"',
    ]
    assert graph_of(lines, image="/img") == [("throttle", "0xa2"), ("qcow2", "0xa2"), ("file", "0xa2")]
