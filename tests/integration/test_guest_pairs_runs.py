"""A guest pair taken together with real guests (TCG): both QEMU on one CPU, the workloads sent at once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from harness.record import Sample
from harness.sample.guest_sampler import RunOptions, run_sample
from harness.sample.pairing import Pairing
from harness.spec import make_cell
from harness.subject.binaries import Binaries

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def test_a_guest_pair_runs_on_one_cpu_and_starts_its_workloads_together(
    guest: Any, tmp_path: Path, disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISKBENCH_CACHE", str(tmp_path / "cache"))
    cell = make_cell(format="qcow2", workload="dd", dd_mib=8, size="256M")
    opts = RunOptions(
        binaries=Binaries.on_path(),
        accel="tcg",
        accel_reason="test",
        work_dir=disk_dir,
        results_dir=tmp_path,
        run_id="t",
        start="snapshot",
    )
    pairing = Pairing()
    got: dict[str, Sample] = {}

    def side(label: str) -> None:
        try:
            got[label] = run_sample(cell, guest, opts, 1, tmp_path / label, together=pairing)
        finally:
            pairing.barrier.abort()  # as the gate's rounds do: a side that is done never keeps the other

    threads = [threading.Thread(target=side, args=(label,)) for label in ("base", "head")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    base, head = got["base"], got["head"]
    for sample in (base, head):
        assert sample.ok, sample.reason
        together = sample.host["together"]
        # QEMU (and every thread it started) ran on the pair's CPU alone, and met its partner
        assert together["met"] is True and together["cpus"] == [pairing.cpu]
        cpu = sample.host["cpu"]
        assert cpu["vcpu_run_s"] > 0 and cpu["qemu_cpu_s"] > 0 and cpu["vcpu_wait_s"] >= 0
        # the time the vCPU waited for the CPU (its partner's share, at least) is not the guest's own
        assert 0 < sample.metrics["host.workload_alone_s"] < sample.metrics["host.workload_s"]
    # both workloads were sent at the same moment (both guests ready first)
    assert abs(base.host["together"]["sent_at_s"] - head.host["together"]["sent_at_s"]) < 0.5
    # each side's image had a name of its own in the shared work dir, and both are gone
    assert not list(disk_dir.glob(f"{cell.id}*"))
