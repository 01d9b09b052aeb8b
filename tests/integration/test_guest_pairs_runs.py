"""A guest pair taken together with real guests (TCG): the workloads sent at once, both QEMU on one
CPU (shared) or each on a CPU of its own, the two swapped (crossed)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.record import Sample
from harness.sample.guest_sampler import RunOptions, run_sample
from harness.sample.pairing import PAIR_NICE, Mode, Pairing, crossed_cpus
from harness.spec import make_cell
from harness.subject.binaries import Binaries

# timed: a pair on both CPUs, its two starts held together; one at a time, never beside another test
pytestmark = [pytest.mark.integration, pytest.mark.guest, pytest.mark.timed]


@pytest.mark.parametrize("mode", [Mode.SHARED, Mode.CROSSED])
def test_a_guest_pair_starts_its_workloads_together_on_its_cpus(
    mode: Mode, guest: Any, tmp_path: Path, disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode is Mode.CROSSED and crossed_cpus() is None:
        pytest.skip("a crossed pair needs two CPUs")
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
    pairing = Pairing(mode=mode)
    got: dict[str, Sample] = {}

    def side(label: str) -> None:
        try:
            got[label] = run_sample(cell, guest, opts, 1, tmp_path / label, together=pairing)
        finally:
            pairing.abort()  # as the gate's rounds do: a side that is done never keeps the other

    threads = [threading.Thread(target=side, args=(label,)) for label in ("base", "head")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    base, head = got["base"], got["head"]
    for sample in (base, head):
        assert sample.ok, sample.reason
        together = sample.host["together"]
        assert together["met"] is True and together["mode"] == mode.value
        if mode is Mode.SHARED:
            # QEMU (and every thread it started) ran on the pair's CPU alone
            assert together["cpus"] == [pairing.cpu]
        else:
            # on the pair's two CPUs in turn, every move taken, about half its time on each
            crossed = together["crossed"]
            assert crossed["cpus"] == list(pairing.cross or ()) and crossed["moves_ok"] is True
            assert crossed["swaps"] >= 5 and min(crossed["on_cpu_s"]) > 0.2 * sum(crossed["on_cpu_s"])
        if os.geteuid() == 0:
            assert together["nice"] == PAIR_NICE
        cpu = sample.host["cpu"]
        assert cpu["vcpu_run_s"] > 0 and cpu["qemu_cpu_s"] > 0 and cpu["vcpu_wait_s"] >= 0
        # the time the vCPU waited for the CPU is not the guest's own
        assert 0 < sample.metrics["host.workload_alone_s"] <= sample.metrics["host.workload_s"]
    # both workloads were sent at the same moment (both guests ready first)
    assert abs(base.host["together"]["sent_at_s"] - head.host["together"]["sent_at_s"]) < 0.5
    # each side's image had a name of its own in the shared work dir, and both are gone
    assert not list(disk_dir.glob(f"{cell.id}*"))
