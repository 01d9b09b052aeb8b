"""A real guest under TCG: QEMU's latency histograms of the disk under test in the record."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.record import load_record
from harness.sample import images
from harness.sample.vm import Drive, Machine, VMConfig
from harness.spec import Interface, make_cell
from harness.subject.binaries import QEMU, QEMU_IMG
from harness.workloads.latency import BOUNDARIES_NS, Histogram

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def test_histograms_of_a_dd_run_are_parsed_and_match_qemus_counts(
    guest_cells: Callable[..., list[Path]],
) -> None:
    cell = make_cell(format="qcow2", workload="dd", dd_mib=32, size="256M", cache="none")
    (path,) = guest_cells([cell])
    sample = load_record(path).to_json()["samples"][0]
    assert sample["status"] == "ok", sample.get("reason")
    kept = sample["host"]["latency_histograms"]
    assert sorted(kept) == ["flush", "read", "write"]
    write = Histogram.from_qmp(kept["write"], what="record")
    assert write.boundaries == BOUNDARIES_NS
    metrics = sample["metrics"]
    ops = sample["host"]["blockstats"]["wr_operations"]
    assert metrics["dev.write_ops"] == ops
    # set at the ready line, read at power-off: the histogram holds the workload's writes
    # (one QMP round trip apart from the blockstats reading, so allow a request or two)
    assert ops > 10
    assert abs(write.count - ops) <= 3
    p50, p90, p99 = (metrics[f"dev.write_{q}_ms"] for q in ("p50", "p90", "p99"))
    assert 0.001 < p50 <= p90 <= p99 < 10_000
    assert 0.001 < metrics["dev.write_mean_ms"] < 10_000
    assert 0 < metrics["dev.io_s"] < metrics["total_s"] + 5


@pytest.mark.parametrize("interface", list(Interface))
def test_histograms_can_be_set_on_the_disk_of_every_interface(
    interface: Interface, guest: Any, tmp_path: Path
) -> None:
    # QMP names the guest device that holds the drive: virtio-blk-pci's is a child of the proxy
    image = tmp_path / "disk.raw"
    # made by qemu-img as the QEMU account (harness.host.confine), as every disk under test is
    images.create(image, make_cell(format="raw", size="64M").image, qemu_img=QEMU_IMG)
    disk = Drive(node="disk0", path=image, format="raw", interface=interface)
    config = VMConfig(kernel=guest.kernel, initrd=guest.initrd, append=[], drives=[disk], qemu=QEMU)
    with Machine(config, tmp_path / "logs") as vm:
        vm.set_latency_histograms(disk, BOUNDARIES_NS)
        stats = vm.blockstats("disk0")
    histogram = Histogram.from_qmp(stats["wr_latency_histogram"], what=f"{interface} write histogram")
    assert histogram.boundaries == BOUNDARIES_NS
    assert "flush_latency_histogram" in stats and "rd_latency_histogram" in stats
