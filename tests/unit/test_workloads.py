"""Parsers of guest outputs and the metric registry, on output captured from real runs."""

from __future__ import annotations

import pytest

from harness.errors import ProtocolError, UsageError
from harness.sample.protocol import parse_report
from harness.workloads import all_metrics, metric_info, parse_outputs
from harness.workloads.bonnie import METRICS as BONNIE_METRICS
from harness.workloads.bonnie import parse_csv_line

# bonnie++ 2.00a in the guest (TCG, raw virtio-blk, ext4): -s 64 -r 32 -n 1 -f -b.
# Rewrite and block input ran from the page cache: +++++.
GUEST_200A_N1 = (
    "1.98,2.00a,diskbench,1,1795323774,64M,,8192,5,,,65614,82,+++++,+++,,,+++++,+++,7068,253,"
    "1,,,,,367,17,+++++,+++,371,15,330,17,+++++,+++,620,20,"
    ",10995us,8249us,,383us,24949us,10832us,606us,40124us,37662us,398us,27462us"
)
# seed 000's bonnie++ 1.96 line: -f -b -n 0, seeks too fast
SEED_196 = (
    "1.96,1.96,TEST,1,1387339401,4G,,,,374271,39,214541,19,,,392015,17,+++++,+++,"
    ",,,,,,,,,,,,,,,,,,167ms,89125us,,52047us,4766us,,,,,,"
)
# seed 000's full 1.96 line: per-char tests, 16k files, millisecond latencies
SEED_196_FULL = (
    "1.96,1.96,ubuntu,1,1378913658,4G,,786,99,17094,3,15431,3,4662,91,37881,4,548.4,17,16,,,,,"
    "142,0,+++++,+++,+++++,+++,+++++,+++,+++++,+++,+++++,+++,"
    "16569us,15704ms,2485ms,51815us,491ms,261ms,291us,400us,710us,382us,42us,787us"
)
# mke2fs 1.47.0 in the guest on a 1 GiB virtio-blk disk (progress backspaces dropped by /init)
MKE2FS_1G = (
    "mke2fs 1.47.0 (5-Feb-2023)\n"
    "Creating filesystem with 262144 4k blocks and 65536 inodes\n"
    "Filesystem UUID: 515f908d-0f47-4be9-aa5f-3972208af321\n"
    "Superblock backups stored on blocks: \n 32768, 98304, 163840, 229376\n\n"
    "Allocating group tables: 0/8   done                            \n"
    "Writing inode tables: 0/8   done                            \n"
    "Creating journal (8192 blocks): done\n"
    "Writing superblocks and filesystem accounting information: 0/8   done\n"
)


def test_bonnie_200a_line_from_the_guest() -> None:
    metrics, fields = parse_outputs("bonnie", {"bonnie_csv": GUEST_200A_N1 + "\n"})
    assert metrics["bonnie.seq_output_block_kib_per_s"] == 65614
    assert metrics["bonnie.seq_output_block_cpu_pct"] == 82
    assert metrics["bonnie.random_seeks_per_s"] == 7068
    assert metrics["bonnie.random_seeks_cpu_pct"] == 253
    assert metrics["bonnie.seq_create_per_s"] == 367
    assert metrics["bonnie.seq_delete_per_s"] == 371
    assert metrics["bonnie.random_create_per_s"] == 330
    assert metrics["bonnie.random_delete_per_s"] == 620
    assert metrics["bonnie.latency_seq_output_block_us"] == 10995
    assert metrics["bonnie.latency_rewrite_us"] == 8249
    assert metrics["bonnie.latency_random_delete_us"] == 27462
    # too fast: absent, never 0, and named
    for name in ("bonnie.rewrite_kib_per_s", "bonnie.seq_input_block_kib_per_s", "bonnie.seq_stat_per_s"):
        assert name not in metrics
        assert name in fields["too_fast"]
    assert "bonnie.rewrite_cpu_pct" in fields["too_fast"]
    # not run (-f): absent and not too fast
    assert "bonnie.seq_output_char_kib_per_s" not in metrics
    assert "bonnie.seq_output_char_kib_per_s" not in fields["too_fast"]
    assert fields["bonnie_csv"] == GUEST_200A_N1
    assert fields["bonnie_version"] == "2.00a"
    assert fields["bonnie_params"] == {
        "concurrency": "1",
        "size": "64M",
        "seeks": "8192",
        "seek_procs": "5",
        "num_files": "1",
    }
    assert len(metrics) + len(fields["too_fast"]) == 36 - 6  # every figure but putc/getc's 3 each


def test_bonnie_196_line_of_the_seed_document() -> None:
    metrics, fields = parse_csv_line(SEED_196)
    assert metrics == {
        "bonnie.seq_output_block_kib_per_s": 374271,
        "bonnie.seq_output_block_cpu_pct": 39,
        "bonnie.rewrite_kib_per_s": 214541,
        "bonnie.rewrite_cpu_pct": 19,
        "bonnie.seq_input_block_kib_per_s": 392015,
        "bonnie.seq_input_block_cpu_pct": 17,
        "bonnie.latency_seq_output_block_us": 167_000,
        "bonnie.latency_rewrite_us": 89125,
        "bonnie.latency_seq_input_block_us": 52047,
        "bonnie.latency_random_seeks_us": 4766,
    }
    assert fields["too_fast"] == ["bonnie.random_seeks_per_s", "bonnie.random_seeks_cpu_pct"]
    assert fields["bonnie_params"] == {"concurrency": "1", "size": "4G"}


def test_bonnie_196_full_line_normalises_milliseconds() -> None:
    metrics, fields = parse_csv_line(SEED_196_FULL)
    assert metrics["bonnie.seq_output_char_kib_per_s"] == 786
    assert metrics["bonnie.random_seeks_per_s"] == pytest.approx(548.4)
    assert metrics["bonnie.seq_create_per_s"] == 142
    assert metrics["bonnie.seq_create_cpu_pct"] == 0
    assert metrics["bonnie.latency_seq_output_block_us"] == 15_704_000
    assert metrics["bonnie.latency_random_stat_us"] == 42
    assert len(fields["too_fast"]) == 10
    assert fields["bonnie_params"]["num_files"] == "16"


@pytest.mark.parametrize(
    ("value", "micros"),
    [("750ns", 0.75), ("4766us", 4766.0), ("167ms", 167_000.0), ("12s", 12_000_000.0)],
)
def test_bonnie_latency_units(value: str, micros: float) -> None:
    line = SEED_196.replace("167ms", value)
    metrics, _ = parse_csv_line(line)
    assert metrics["bonnie.latency_seq_output_block_us"] == pytest.approx(micros)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("1.98,2.00a,diskbench,1,1795323774,64M", "has 6 fields, expected 50"),
        (GUEST_200A_N1 + ",", "has 51 fields, expected 50"),
        (GUEST_200A_N1.replace("65614", "65,614"), "has 51 fields"),
        (GUEST_200A_N1.replace("65614", "fast"), "bonnie.seq_output_block_kib_per_s is 'fast'"),
        (GUEST_200A_N1.replace("65614", "-3"), "is '-3', not a figure"),
        (GUEST_200A_N1.replace("10995us", "10995"), "not a latency"),
        (GUEST_200A_N1.replace("10995us", "11h"), "not a latency"),
        ("1.93c,1.93c,x,1,2,3", "format '1.93c' is not one this harness reads"),
        ("Using uid:0, gid:0.", "is not one this harness reads"),
        (GUEST_200A_N1 + "\n" + GUEST_200A_N1, "several lines"),
        ("1.98,2.00a,diskbench,1,1,64M" + "," * 44, "no figure at all"),
    ],
)
def test_bonnie_garbage_is_a_protocol_error(line: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message.replace("(", r"\(")):
        parse_outputs("bonnie", {"bonnie_csv": line})


def test_bonnie_outputs_must_carry_the_csv_and_nothing_else() -> None:
    with pytest.raises(ProtocolError, match="missing bonnie_csv"):
        parse_outputs("bonnie", {})
    with pytest.raises(ProtocolError, match="unexpected extra"):
        parse_outputs("bonnie", {"bonnie_csv": GUEST_200A_N1, "extra": ""})


def test_mkfs_geometry_from_mke2fs() -> None:
    metrics, fields = parse_outputs("mkfs", {"mke2fs": MKE2FS_1G})
    assert metrics == {
        "mkfs.fs_bytes": 1024**3,
        "mkfs.inodes": 65536,
        "mkfs.block_groups": 8,
        "mkfs.journal_bytes": 8192 * 4096,
    }
    assert fields["mke2fs_summary"] == "Creating filesystem with 262144 4k blocks and 65536 inodes"
    assert fields["mke2fs_output"] == MKE2FS_1G


def test_mkfs_ext2_has_no_journal_and_groups_only_when_printed() -> None:
    text = "Creating filesystem with 262144 1k blocks and 65536 inodes\nWriting inode tables: done\n"
    metrics, _ = parse_outputs("mkfs", {"mke2fs": text})
    assert metrics == {"mkfs.fs_bytes": 256 * 1024**2, "mkfs.inodes": 65536}


@pytest.mark.parametrize("text", ["", "mke2fs: Device size reported to be zero.\n", "Creating filesystem"])
def test_mkfs_without_its_summary_is_a_protocol_error(text: str) -> None:
    with pytest.raises(ProtocolError, match="no 'Creating filesystem with"):
        parse_outputs("mkfs", {"mke2fs": text})


def test_dd_and_install_send_no_outputs() -> None:
    assert parse_outputs("dd", {}) == ({}, {})
    assert parse_outputs("install", {}) == ({}, {})
    with pytest.raises(ProtocolError, match="dd report outputs: unexpected bonnie_csv"):
        parse_outputs("dd", {"bonnie_csv": GUEST_200A_N1})
    with pytest.raises(ProtocolError, match="no parser for the outputs of workload 'fiox'"):
        parse_outputs("fiox", {})


@pytest.mark.parametrize(
    ("name", "unit", "higher", "informational"),
    [
        ("phase.mkfs_s", "s", False, False),
        ("phase.unpack_s", "s", False, False),
        ("total_s", "s", False, False),
        ("host.boot_s", "s", False, False),
        ("host.wall_s", "s", False, False),
        ("mib_per_s", "MiB/s", True, False),
        ("bytes", "B", False, True),
        ("files", "count", False, True),
        ("packages", "count", False, True),
        ("host.write_amplification", "ratio", False, False),
        ("host.flushes", "count", False, False),
        ("host.written_bytes", "B", False, False),
        ("host.write_calls", "count", False, False),
        ("bonnie.seq_output_block_kib_per_s", "KiB/s", True, False),
        ("bonnie.rewrite_kib_per_s", "KiB/s", True, False),
        ("bonnie.random_seeks_per_s", "1/s", True, False),
        ("bonnie.seq_create_per_s", "1/s", True, False),
        ("bonnie.random_delete_per_s", "1/s", True, False),
        ("bonnie.seq_output_block_cpu_pct", "%", False, True),
        ("bonnie.latency_seq_output_block_us", "us", False, False),
        ("bonnie.latency_random_create_us", "us", False, False),
        ("mkfs.block_groups", "count", False, True),
    ],
)
def test_metric_info(name: str, unit: str, higher: bool, informational: bool) -> None:
    metric = metric_info(name)
    assert (metric.name, metric.unit, metric.higher_is_better, metric.informational) == (
        name,
        unit,
        higher,
        informational,
    )
    assert metric.description


def test_every_parsed_figure_is_in_the_registry() -> None:
    names = {m.name for m in BONNIE_METRICS}
    assert len(names) == 36
    metrics, fields = parse_csv_line(SEED_196_FULL)
    for name in [*metrics, *fields["too_fast"]]:
        assert metric_info(name).name == name
    mkfs_metrics, _ = parse_outputs("mkfs", {"mke2fs": MKE2FS_1G})
    assert set(mkfs_metrics) <= set(all_metrics())


@pytest.mark.parametrize(
    "name", ["bonnie.seq_output_block", "phase.mkfs", "speed", "host.boot", "host.mib_per_s", "phase.x_per_s"]
)
def test_an_unknown_metric_is_an_error_not_a_guess(name: str) -> None:
    with pytest.raises(UsageError, match=f"unknown metric '{name}'"):
        metric_info(name)


def test_report_outputs_are_validated() -> None:
    base = {
        "event": "report",
        "workload": "bonnie",
        "status": "ok",
        "phases": {"bonnie": {"s": 10.0, "rc": 0}},
        "total_s": 10.0,
        "metrics": {},
    }
    assert parse_report({**base, "outputs": {"bonnie_csv": "1.98,x"}}, workload="bonnie").outputs == {
        "bonnie_csv": "1.98,x"
    }
    assert parse_report(base, workload="bonnie").outputs == {}
    with pytest.raises(ProtocolError, match="'outputs' is not an object"):
        parse_report({**base, "outputs": ["x"]}, workload="bonnie")
    with pytest.raises(ProtocolError, match="output 'bonnie_csv' is 3, not a string"):
        parse_report({**base, "outputs": {"bonnie_csv": 3}}, workload="bonnie")
