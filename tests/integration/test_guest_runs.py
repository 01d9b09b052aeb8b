"""Real guests under TCG: one measured cell end to end, faults become failed samples."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tcgopts import run_dirs, tcg_options

from harness.cli import main
from harness.host.workdir import image_path
from harness.record import load_record
from harness.rounds.session import MachineOptions, SessionOptions, run_cells
from harness.sample import images
from harness.sample.guest_sampler import run_sample
from harness.spec import make_cell
from harness.subject.binaries import QEMU, QEMU_IMG, Binaries

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def qemu_pids(marker: Path) -> set[int]:
    """QEMU processes whose command line names ``marker`` (this test's log dir)."""
    out = subprocess.run(["pgrep", "-f", f"qemu-system.*{marker}"], capture_output=True, text=True).stdout
    return {int(pid) for pid in out.split()}


def run_one(cell: Any, guest: Any, tmp_path: Path, disk_dir: Path, **kw: Any) -> dict[str, Any]:
    kw.setdefault("accel", "tcg")
    kw.setdefault("start", "cold")
    machine = MachineOptions(
        binaries=Binaries.on_path(), work_dir=disk_dir, results_dir=tmp_path / "results", **kw
    )
    result = run_cells([cell], SessionOptions(machine, repeat=1), guest=guest)
    records = sorted(result.run_dir.glob("*.json"))
    assert len(records) == 1
    record = load_record(records[0])
    # what the run returned is what it wrote: the same document
    assert record.to_json() == result.records[0].to_json()
    return record.to_json()


def test_install_small_payload_on_qcow2_virtio_blk(guest: Any, tmp_path: Path, disk_dir: Path) -> None:
    cell = make_cell(
        format="qcow2",
        preallocation="off",
        cache="writeback",
        interface="virtio-blk",
        workload="install",
        payload="small",
        size="1G",
    )
    record = run_one(cell, guest, tmp_path, disk_dir)
    sample = record["samples"][0]
    assert sample["status"] == "ok", sample.get("reason")
    metrics = sample["metrics"]
    phases = [k for k in metrics if k.startswith("phase.")]
    assert phases[:6] == [
        "phase.partition_s",
        "phase.mkfs_s",
        "phase.mount_s",
        "phase.extract_s",
        "phase.unpack_s",
        "phase.sync_s",
    ]
    assert metrics["files"] > 500 and metrics["bytes"] > 10 * 1024**2
    assert metrics["total_s"] > metrics["phase.unpack_s"] > 0
    host = sample["host"]
    assert host["check"]["verdict"] == "clean"
    assert host["allocated_after"] > host["allocated_before"] + metrics["bytes"] // 2
    assert host["blockstats"]["wr_bytes"] > metrics["bytes"] // 2
    assert metrics["host.flushes"] > 100  # dpkg fsyncs every file it unpacks
    assert metrics["host.guest_written_bytes"] == host["blockstats"]["wr_bytes"]
    assert 0.8 < metrics["host.write_amplification"] < 2.0
    assert host["map_after"]["data_bytes"] > metrics["bytes"] // 2
    assert record["vm"]["accel"] == "tcg" and record["vm"]["mem_mib"] == 256
    assert record["machine"]["qemu_version"].startswith(("7.", "8.", "9.", "10."))
    assert record["subject"]["guest"]["recipe_hash"] == guest.recipe_hash
    assert Path(sample["logs"]["console"]).read_text().count("DISKBENCH-READY") == 1
    assert not list(disk_dir.glob("*.qcow2")), "the sample's image is removed"


def test_dd_on_raw_falloc_ide_cache_none_under_auto_accel(guest: Any, tmp_path: Path, disk_dir: Path) -> None:
    cell = make_cell(
        format="raw",
        preallocation="falloc",
        cache="none",
        aio="native",
        interface="ide",
        workload="dd",
        dd_mib=32,
        size="256M",
    )
    record = run_one(cell, guest, tmp_path, disk_dir, accel="auto")
    vm = record["vm"]
    assert vm["accel"] in ("kvm", "tcg") and vm["accel"] == record["machine"]["accel"]
    if vm["accel"] == "tcg":
        assert vm["accel_reason"].startswith("auto: KVM unusable: ")
    sample = record["samples"][0]
    assert sample["status"] == "ok", sample.get("reason")
    metrics = sample["metrics"]
    assert metrics["bytes"] == 32 * 1024**2
    assert metrics["mib_per_s"] == pytest.approx(32 / metrics["phase.write_s"], rel=0.05)
    assert sample["host"]["check"]["verdict"] == "not-applicable"
    assert sample["host"]["blockstats"]["wr_bytes"] >= 32 * 1024**2
    # raw: QEMU writes what the guest writes, nothing more
    assert 0.95 < metrics["host.write_amplification"] < 1.1


def test_a_guest_that_never_reports_fails_after_its_deadline(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    cell = make_cell(format="qcow2", workload="dd", dd_mib=16, size="256M")
    opts = tcg_options(
        disk_dir,
        tmp_path,
        repeat=1,
        boot_timeout_s=120,
        workload_timeout_s=5,
        keep_images=True,
        extra_append=("diskbench.workload=sleep",),
    )
    sample = run_sample(cell, guest, opts, 0, tmp_path / "logs").to_json()
    assert sample["status"] == "error"
    assert sample["error_type"] == "GuestTimeout"
    assert sample["reason"] == "no workload report from the guest within 5 s"
    assert "DISKBENCH-READY" in sample["log_tail"]
    assert qemu_pids(tmp_path / "logs") == set(), "QEMU is gone"
    image = image_path(disk_dir, cell.id, "qcow2")
    # no write lock left behind: a locking open of the image succeeds
    subprocess.run(["qemu-img", "info", str(image)], check=True, capture_output=True)
    assert images.check(image, cell.image.format, qemu_img=QEMU_IMG).returncode in (0, 3)


def test_a_kernel_panic_ends_the_wait_at_once(guest: Any, tmp_path: Path, disk_dir: Path) -> None:
    cell = make_cell(format="raw", workload="dd", dd_mib=16, size="256M")
    opts = tcg_options(
        disk_dir, tmp_path, repeat=1, boot_timeout_s=300, extra_append=("rdinit=/nonexistent",)
    )
    sample = run_sample(cell, guest, opts, 0, tmp_path / "logs").to_json()
    assert sample["status"] == "error"
    assert sample["error_type"] in ("GuestPanic", "VMBootError")
    assert "Kernel panic" in sample["log_tail"]
    assert sample["host"]["wall_s"] < 120, "the panic ended the wait, not the 300 s deadline"


def test_accel_kvm_where_kvm_does_not_work_exits_3(
    guest: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.sample.accel import probe_kvm

    if probe_kvm(guest.kernel, guest.initrd, qemu=QEMU, timeout_s=20) is None:
        pytest.skip("KVM works on this machine")
    os.environ.setdefault("DISKBENCH_CACHE", str(Path.home() / ".cache" / "diskbench"))
    rc = main(
        [
            "run",
            "--accel",
            "kvm",
            "--workload",
            "dd",
            "--dd-mib",
            "16",
            "--size",
            "256M",
            "--repeat",
            "1",
            *run_dirs(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 3
    assert "--accel kvm: KVM does not work here:" in err
    assert not (tmp_path / "r" / "records").exists()


def test_cold_and_warm_samples_reuse_the_image_and_say_how_the_cache_was_dropped(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    common = {"format": "qcow2", "workload": "dd", "dd_mib": 16, "size": "256M"}
    cold = run_one(make_cell(cache_state="cold", **common), guest, tmp_path, disk_dir)["samples"][0]
    assert cold["status"] == "ok", cold.get("reason")
    host = cold["host"]
    assert host["priming"]["status"] == "ok"
    assert host["cache_drop"].startswith("posix_fadvise")
    assert host["allocated_before"] > 16 * 1024**2, "the measured run starts on the primed image"
    assert host["resident_before"] in (0, None) or host["resident_before"] < 1024**2
    warm = run_one(make_cell(cache_state="warm", **common), guest, tmp_path, disk_dir)["samples"][0]
    assert warm["status"] == "ok", warm.get("reason")
    assert "cache_drop" not in warm["host"]
    assert warm["host"]["resident_before"] is None or warm["host"]["resident_before"] > 1024**2
