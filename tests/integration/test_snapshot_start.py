"""Snapshot start with a real guest (TCG) on every bus: restored, fresh image, dd reports ok."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tcgopts import tcg_options

from harness.record import load_record
from harness.sample import images, snapshot
from harness.sample.guest_sampler import vm_config
from harness.spec import make_cell
from harness.subject.binaries import QEMU_IMG

pytestmark = [pytest.mark.integration, pytest.mark.guest]

# drivers/char/random.c's notice once the vmgenid driver has reseeded the kernel's generator
RESEEDED = "crng reseeded due to virtual machine fork"


@pytest.mark.parametrize("interface", ["virtio-blk", "virtio-scsi", "ide", "ahci", "nvme"])
def test_snapshot_start_runs_dd_on_each_bus(
    interface: str,
    guest_cells: Callable[..., list[Path]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DISKBENCH_CACHE", str(tmp_path / "cache"))
    cell = make_cell(format="qcow2", interface=interface, workload="dd", dd_mib=8, size="256M")
    record = load_record(guest_cells([cell], start="snapshot", repeat=2)[0]).to_json()
    assert record["vm"]["start"] == "snapshot"
    snapshots = list(snapshot.snapshot_root().iterdir())
    assert len(snapshots) == 1, "one snapshot, built once for both samples"
    for sample in record["samples"]:
        assert sample["status"] == "ok", sample.get("reason")
        host = sample["host"]
        assert host["start"] == "snapshot", host.get("start_fallback")
        assert sample["guest_ready"]["restored"] is True
        assert sample["metrics"]["bytes"] == 8 * 1024**2
        assert host["blockstats"]["wr_bytes"] >= 8 * 1024**2
        assert host["check"]["verdict"] == "clean"
        # the guest's clock runs on after the restore, at the host's pace
        assert 0 < sample["metrics"]["total_s"] <= host["workload_s"] + 0.05


def test_every_restore_reseeds_the_guest_kernels_random_numbers(
    guest: Any, tmp_path: Path, disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new VM generation ID per restore, and the guest kernel reseeds on it (its log says so)."""
    monkeypatch.setenv("DISKBENCH_CACHE", str(tmp_path / "cache"))
    disk_dir.mkdir(parents=True, exist_ok=True)
    cell = make_cell(format="qcow2", workload="dd", dd_mib=8, size="256M")
    # loglevel=7: the kernel's notice of the reseed reaches the console
    opts = tcg_options(disk_dir, tmp_path, extra_append=("loglevel=7",))
    ids = []
    for index in range(2):
        image = disk_dir / f"sample-{index}.qcow2"
        images.create(image, cell.image, qemu_img=QEMU_IMG)
        with snapshot.start_guest(
            vm_config(cell, guest, opts, image),
            tmp_path / f"sample-{index}",
            name=f"sample-{index}",
            start=snapshot.Start.SNAPSHOT,
            cell=cell,
            plan=snapshot.SnapshotPlan(
                recipe_hash=guest.recipe_hash,
                scratch_path=disk_dir / "scratch.qcow2",
                make_scratch=lambda path: images.create(path, cell.image, qemu_img=QEMU_IMG),
            ),
            boot_timeout_s=300.0,
            wait_ready=lambda _vm, _s: {},
        ) as started:
            assert started.start == "snapshot", started.fallback
            ids.append(started.vm.qmp("query-vm-generation-id")["guid"])
            deadline = time.monotonic() + 120.0
            while RESEEDED not in started.vm.console_log.read_text(errors="replace"):
                assert time.monotonic() < deadline, started.vm.console_tail()
                time.sleep(0.1)
    assert ids[0] != ids[1]
