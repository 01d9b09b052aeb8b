"""Real guests under TCG running the bonnie and mkfs workloads, their outputs parsed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.record import load_record
from harness.sample.protocol import parse_report
from harness.spec import make_cell
from harness.workloads import metric_info, parse_outputs

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def run_one(cell: Any, guest_cells: Callable[..., list[Path]]) -> dict[str, Any]:
    (path,) = guest_cells([cell])
    record = load_record(path).to_json()
    sample: dict[str, Any] = record["samples"][0]
    assert sample["status"] == "ok", sample.get("reason")
    return sample


def parsed(sample: dict[str, Any], workload: str) -> tuple[dict[str, float], dict[str, Any]]:
    """The figures parsed from the guest's raw outputs, as the runner parses them."""
    report = parse_report(sample["report"], workload=workload)
    return parse_outputs(workload, report.outputs)


def test_bonnie_small_on_qcow2(guest_cells: Callable[..., list[Path]]) -> None:
    # 64 MiB of test file, 1024 files: about 30 s under TCG
    cell = make_cell(
        format="qcow2",
        workload="bonnie",
        bonnie_size_mib=64,
        bonnie_ram_mib=32,
        bonnie_files=1,
        size="256M",
    )
    sample = run_one(cell, guest_cells)
    metrics = sample["metrics"]
    assert [k for k in metrics if k.startswith("phase.")] == [
        "phase.mkfs_s",
        "phase.mount_s",
        "phase.bonnie_s",
        "phase.umount_s",
        "phase.fsck_s",
    ]
    assert metrics["total_s"] > metrics["phase.bonnie_s"] > 1.0
    figures, fields = parsed(sample, "bonnie")
    assert fields["bonnie_version"] == "2.00a"
    assert fields["bonnie_params"]["size"] == "64M"
    assert fields["bonnie_params"]["num_files"] == "1"
    # Sequential block output goes to the disk (fsync with -b), but QEMU's writeback cache can
    # take 64 MiB faster than bonnie times ("+++++" once on a busy host): a real rate where
    # measured, and its latency always.
    output = figures.get("bonnie.seq_output_block_kib_per_s")
    assert output is None or 100 < output < 10_000_000
    assert figures["bonnie.latency_seq_output_block_us"] > 0
    # -f: no per-character tests at all
    assert not any("_char_" in name for name in [*figures, *fields["too_fast"]])
    # Each throughput and file test is measured or too fast, never both, never silently missing.
    stems = (
        "seq_output_block_kib",
        "rewrite_kib",
        "seq_input_block_kib",
        "random_seeks",
        "seq_create",
        "seq_delete",
    )
    for stem in stems:
        name = f"bonnie.{stem}_per_s"
        assert (name in figures) != (name in fields["too_fast"]), name
    for name in fields["too_fast"]:
        assert name not in figures
    for name, value in figures.items():
        assert value >= 0 and metric_info(name).name == name
        assert metrics.get(name, value) == value  # the runner's copy, where it merges them
    # What the guest wrote is at least the test file (plus rewrite and file creation).
    assert sample["host"]["blockstats"]["wr_bytes"] >= 64 * 1024**2
    assert sample["host"]["check"]["verdict"] == "clean"


def test_mkfs_writes_every_inode_table(guest_cells: Callable[..., list[Path]]) -> None:
    cell = make_cell(format="raw", preallocation="off", workload="mkfs", size="1G")
    sample = run_one(cell, guest_cells)
    metrics = sample["metrics"]
    assert [k for k in metrics if k.startswith("phase.")] == ["phase.mkfs_s", "phase.fsck_s"]
    assert metrics["total_s"] == metrics["phase.mkfs_s"] > 0
    assert metrics["bytes"] == 1024**3
    figures, fields = parsed(sample, "mkfs")
    assert figures["mkfs.fs_bytes"] == 1024**3
    assert figures["mkfs.block_groups"] == 8  # 32768 4k blocks per group
    assert figures["mkfs.inodes"] == 65536
    assert figures["mkfs.journal_bytes"] == 32 * 1024**2
    assert fields["mke2fs_summary"] == "Creating filesystem with 262144 4k blocks and 65536 inodes"
    # The inode tables (256 B per inode) and the journal were written as data, not
    # as WRITE_ZEROES that QEMU turns into fallocate: QEMU's own write calls carry them.
    tables = figures["mkfs.inodes"] * 256
    assert metrics["host.written_bytes"] >= tables + figures["mkfs.journal_bytes"]
    assert sample["host"]["check"]["verdict"] == "not-applicable"


@pytest.mark.parametrize("target", ["both", "raw"])
def test_fio_from_the_tools_drive(guest: Any, guest_cells: Callable[..., list[Path]], target: str) -> None:
    # fio comes from the read-only tools drive (fio's libraries are not in the initramfs)
    assert guest.tools is not None and guest.tools.is_file()
    cell = make_cell(
        format="qcow2",
        workload="fio",
        fio_target=target,
        fio_size_mib=8,
        fio_ios=300,
        fio_fsync_ios=30,
        size="256M",
    )
    sample = run_one(cell, guest_cells)
    metrics = sample["metrics"]
    # fio's JSON is larger than the report text a record keeps: the parsed documents are kept
    fields = {"fio_json": sample["fio_json"]}
    # the record keeps no cut copy of the JSON text in the report, only what it became
    for key in (f"fio_{t}_json" for t in fields["fio_json"]):
        assert sample["report"]["outputs"][key].endswith(" chars, parsed into the sample's fields]")
    figures = {k: v for k, v in metrics.items() if k.startswith("fio.")}
    targets = ["raw", "file"] if target == "both" else ["raw"]
    assert sorted(fields["fio_json"]) == sorted(targets)
    assert fields["fio_json"]["raw"]["fio version"] == "fio-3.33"
    for prefix in targets:
        jobs = [j["jobname"] for j in fields["fio_json"][prefix]["jobs"]]
        assert jobs == [
            f"{prefix}-{name}"
            for name in (
                "seq-write", "seq-read", "rand-write-qd1", "rand-write-qd32",
                "rand-read-qd1", "rand-read-qd32", "fsync-write",
            )
        ]  # fmt: skip
        for job in fields["fio_json"][prefix]["jobs"]:
            direction = "read" if "read" in job["jobname"] else "write"
            wanted = {"seq": 8 * 1024**2 // 2**20, "fsync": 30}.get(job["jobname"].split("-")[1], 300)
            assert job[direction]["total_ios"] == wanted, job["jobname"]
        # every job's figures, as the runner merged them into the sample
        for name in ("seq-write.mib_per_s", "rand-write-qd1.clat_p50_ms", "fsync-write.iops"):
            key = f"fio.{prefix}-{name}"
            assert figures[key] > 0 and metric_info(key).name == key, key
    assert ("fio.file-seq-write.iops" in metrics) is (target == "both")
    assert ("phase.mkfs_s" in metrics) is (target == "both")
    # QEMU's own accounting saw the jobs' requests: at least the random writes and the fsyncs
    assert metrics["dev.write_ops"] >= len(targets) * (2 * 300 + 30)
    assert metrics["dev.flush_p50_ms"] > 0
    assert sample["host"]["check"]["verdict"] == "clean"


def test_fio_with_a_tools_drive_that_does_not_mount(
    guest: Any, guest_cells: Callable[..., list[Path]], tmp_path: Path
) -> None:
    """A tools drive that is no filesystem: the sample fails, the guest says why on its console
    and in its report (a line of valid JSON), and nothing crashes."""
    import dataclasses

    bogus = tmp_path / "tools.img"
    bogus.write_bytes(bytes(4 * 2**20))
    cell = make_cell(format="raw", workload="fio", fio_target="raw", fio_size_mib=8, size="256M")
    (path,) = guest_cells([cell], guest=dataclasses.replace(guest, tools=bogus))
    sample = load_record(path).to_json()["samples"][0]
    assert sample["status"] == "error"
    report = parse_report(sample["report"], workload="fio")
    assert report.status == "error"
    assert (report.error or "").startswith("setup failed: tools drive: mount"), report.error
    assert "diskbench: setup failed: tools drive: mount" in sample["log_tail"]
    assert "fio" not in {p.name for p in report.phases}
