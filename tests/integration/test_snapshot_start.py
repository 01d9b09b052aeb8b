"""Snapshot start with a real guest (TCG) on every bus: restored, fresh image, dd reports ok."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import snapshot
from harness.records import load_record
from harness.session import run_cells
from harness.spec import make_cell

pytestmark = [pytest.mark.integration, pytest.mark.guest]


@pytest.mark.parametrize("interface", ["virtio-blk", "virtio-scsi", "ide", "ahci", "nvme"])
def test_snapshot_start_runs_dd_on_each_bus(
    interface: str, guest: Any, tmp_path: Path, disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISKBENCH_CACHE", str(tmp_path / "cache"))
    cell = make_cell(format="qcow2", interface=interface, workload="dd", dd_mib=8, size="256M")
    result = run_cells(
        [cell],
        repeat=2,
        accel="tcg",
        work_dir=disk_dir,
        results_dir=tmp_path / "results",
        guest=guest,
        start="snapshot",
    )
    record = load_record(sorted(result.run_dir.glob("*.json"))[0])
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
