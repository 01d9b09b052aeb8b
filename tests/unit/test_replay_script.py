"""The replay's qemu-io: options both ways, the script with its drains, and qemu-io's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ProtocolError
from harness.sample.replay.replay import guest_drive_options
from harness.sample.replay.script import (
    Completion,
    ReplayMismatch,
    commands,
    figures,
    graph_mismatch,
    guest_options,
    option_mismatch,
    parse_output,
    qemu_io_argv,
    quantile,
    replay_options,
)
from harness.sample.replay.stream import Kind, Request
from harness.spec import make_cell


def test_guest_options_keep_the_block_layers_words_and_say_the_defaults() -> None:
    drive = "if=none,id=disk0,file=/w/a,,b.qcow2,format=qcow2,cache=none,aio=native,detect-zeroes=unmap"
    assert guest_options(drive) == {
        "format": "qcow2",
        "cache": "none",
        "aio": "native",
        "detect-zeroes": "unmap",
        "discard": "ignore",
        "copy-on-read": "off",
    }


POLICY = (
    ("throttling.bps-write", "52428800"),
    ("throttling.iops-total", "1000"),
    ("detect-zeroes", "unmap"),
    ("discard", "unmap"),
    ("l2-cache-size", "1048576"),
)


def test_the_replay_applies_exactly_the_guests_drive_options() -> None:
    cell = make_cell(format="qcow2", cache="none", aio="native", size="64M")
    wanted = guest_drive_options(cell, POLICY, Path("/w/img.qcow2"))
    argv = qemu_io_argv("qemu-io", "/w/img,1.qcow2", wanted)
    assert argv[:7] == ["qemu-io", "-t", "none", "-i", "native", "-d", "unmap"]
    assert "throttle-group,id=replay-tg,x-bps-write=52428800,x-iops-total=1000" in argv
    spec = argv[-1]
    assert spec.startswith("driver=throttle,throttle-group=replay-tg,file.driver=qcow2,")
    assert "file.file.filename=/w/img,,1.qcow2" in spec
    assert "file.detect-zeroes=unmap" in spec and "file.l2-cache-size=1048576" in spec
    assert replay_options(argv) == wanted
    assert option_mismatch(wanted, replay_options(argv)) is None


def test_an_overlay_replays_over_its_chain_each_layer_by_its_handed_name() -> None:
    cell = make_cell(format="qcow2", cache="none", size="64M", backing="depth=2")
    chain = ((Path("/proc/self/fd/7"), "qcow2"), (Path("/proc/self/fd/8"), "qcow2"))
    wanted = guest_drive_options(cell, POLICY, Path("/w/img.qcow2"), chain)
    # the layers' drivers are the block layer's, their names (descriptors) are not
    assert wanted["backing.driver"] == wanted["backing.backing.driver"] == "qcow2"
    assert not [k for k in wanted if k.endswith("filename")]
    argv = qemu_io_argv("qemu-io", "/w/img.qcow2", wanted, backing=["/proc/self/fd/9", "/proc/self/fd/1,0"])
    spec = argv[-1]
    assert "file.backing.driver=qcow2,file.backing.file.filename=/proc/self/fd/9" in spec
    assert "file.backing.backing.driver=qcow2,file.backing.backing.file.filename=/proc/self/fd/1,,0" in spec
    assert option_mismatch(wanted, replay_options(argv)) is None
    # the stream's drive, recorded from the guest's -drive with other names, is the same
    assert guest_options(f"file=/w/x,{','.join(f'{k}={v}' for k, v in wanted.items())}") == wanted
    with pytest.raises(
        ReplayMismatch, match="the guest's drive has 2 backing layers, the replay was given 1"
    ):
        qemu_io_argv("qemu-io", "/w/img.qcow2", wanted, backing=["/proc/self/fd/9"])
    plain = guest_drive_options(make_cell(format="qcow2", size="64M"), (), Path("/w/img.qcow2"))
    with pytest.raises(ReplayMismatch, match="has 0 backing layers, the replay was given 1"):
        qemu_io_argv("qemu-io", "/w/img.qcow2", plain, backing=["/proc/self/fd/9"])


def test_an_option_qemu_io_cannot_express_is_a_mismatch_naming_it() -> None:
    cell = make_cell(format="raw", size="64M")
    wanted = guest_drive_options(cell, (("werror", "stop"),), Path("/w/img"))
    with pytest.raises(ReplayMismatch, match="qemu-io cannot apply the guest's drive option werror=stop"):
        qemu_io_argv("qemu-io", "/w/img", wanted)


def test_differing_options_and_graphs_are_named() -> None:
    why = option_mismatch({"cache": "none"}, {"cache": "writeback"})
    assert why == "the replay's drive option cache=writeback differs from the guest's cache=none"
    assert option_mismatch({"a": "1"}, {}) is not None
    assert graph_mismatch([("qcow2", "0x22")], [("throttle", "0x22"), ("qcow2", "0x22")]) is None
    why = graph_mismatch([("qcow2", "0xa2"), ("file", "0xa2")], [("qcow2", "0x22"), ("file", "0x22")])
    assert why is not None and "qcow2[0x22] > file[0x22] differs from the guest's qcow2[0xa2]" in why


def test_the_script_keeps_order_and_never_puts_more_in_flight_than_the_guest_had() -> None:
    requests = [
        Request(Kind.WRITE, 0, 4096, depth=0),
        Request(Kind.WRITE, 4096, 4096, depth=1),
        Request(Kind.WRITE, 8192, 4096, zero=True, depth=2),
        Request(Kind.WRITE, 12288, 4096, depth=1),  # three in flight already: drain first
        Request(Kind.READ, 0, 512, depth=0),  # one in flight: it ran alone, synchronously
        Request(Kind.FLUSH),
        Request(Kind.WRITE, 0, 4096, fua=True),
        Request(Kind.WRITE_ZEROES, 0, 65536),
        Request(Kind.DISCARD, 65536, 65536),
    ]
    assert commands(requests) == [
        "aio_write -P 0xa5 0 4096",
        "aio_write -P 0xa5 4096 4096",
        "aio_write -P 0 8192 4096",
        "aio_flush",
        "write -P 0xa5 12288 4096",
        "read 0 512",
        "flush",
        "write -f -P 0xa5 0 4096",
        "write -z 0 65536",
        "discard 65536 65536",
    ]
    # a stream at depth 0 runs one request at a time, each waited for without a drain
    serial = commands([Request(Kind.WRITE, i * 512, 512) for i in range(3)])
    assert serial == [f"write -P 0xa5 {i * 512} 512" for i in range(3)]


OUTPUT = """wrote 65536/65536 bytes at offset 0
64 KiB, 1 ops; 00.01 sec (10.852 MiB/sec and 200.0000 ops/sec)
read 4096/4096 bytes at offset 0
4 KiB, 1 ops; 00.00 sec (37.868 MiB/sec and 10000.0000 ops/sec)
discard 65536/65536 bytes at offset 0
64 KiB, 1 ops; 00.00 sec (230.715 MiB/sec and 3691.4399 ops/sec)
wrote 4096/4096 bytes at offset 65536
4 KiB, 1 ops; 00.00 sec (700.072 KiB/sec and inf ops/sec)
"""


def test_qemu_io_output_gives_each_requests_time() -> None:
    done = parse_output(OUTPUT)
    assert [(c.word, c.offset, c.bytes) for c in done] == [
        ("wrote", 0, 65536),
        ("read", 0, 4096),
        ("discard", 0, 65536),
        ("wrote", 65536, 4096),
    ]
    assert done[0].latency_s == pytest.approx(0.005)
    assert done[1].latency_s == pytest.approx(0.0001)
    assert done[3].latency_s == 0.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("wrote 4096/4096 bytes at offset 0\n", "no statistics line"),
        ("wrote 512/4096 bytes at offset 0\n4 KiB, 1 ops; 00.00 sec (1 KiB/sec and 2.0 ops/sec)\n", "short"),
        ("aio_write failed: Input/output error\n", "failed request"),
    ],
)
def test_bad_qemu_io_output_is_a_protocol_error(text: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse_output(text)


def test_figures_are_quantiles_of_each_kinds_times() -> None:
    done = [Completion("wrote", 0, 512, t / 1000) for t in range(1, 101)] + [
        Completion("read", 0, 512, 0.002)
    ]
    got = figures(done, wall_s=1.5, flushes=3)
    assert got["replay.wall_s"] == 1.5 and got["replay.flushes"] == 3
    assert got["replay.write_ops"] == 100 and got["replay.read_ops"] == 1 and got["replay.discard_ops"] == 0
    assert got["replay.write_p50_ms"] == pytest.approx(50.5)
    assert got["replay.write_p90_ms"] == pytest.approx(90.1)
    assert got["replay.read_p99_ms"] == pytest.approx(2.0)
    assert "replay.discard_p50_ms" not in got
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
