"""A guest sample's figures from the host's readings: QEMU's counters between two readings
(:func:`delta`), what the guest asked for against what QEMU did (:func:`host_counters`), the
flat metrics of a sample (:func:`sample_metrics`).  Pure: no I/O."""

from __future__ import annotations

from typing import Any

from harness.sample.protocol import GuestReport
from harness.sample.vm.cpu import CpuTimes, alone_s
from harness.spec import Aio
from harness.workloads.latency import latency_metrics

# QMP blockstats fields kept per sample (as deltas between ready and power-off)
BLOCKSTATS_FIELDS = (
    "rd_bytes",
    "wr_bytes",
    "rd_operations",
    "wr_operations",
    "flush_operations",
    "rd_total_time_ns",
    "wr_total_time_ns",
    "flush_total_time_ns",
    "wr_merged",
    "rd_merged",
    "unmap_operations",
    "unmap_bytes",
    "failed_rd_operations",
    "failed_wr_operations",
    "failed_flush_operations",
)
PROC_IO_FIELDS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")


def delta(before: dict[str, Any], after: dict[str, Any], fields: tuple[str, ...]) -> dict[str, int]:
    return {f: int(after.get(f, 0)) - int(before.get(f, 0)) for f in fields if f in after}


def host_counters(blockstats: dict[str, int], qemu_io: dict[str, int], aio: Aio) -> dict[str, float]:
    """The low-noise figures: what the guest asked for vs what QEMU really did.

    ``guest_written_bytes`` is what the guest's device saw (``wr_bytes``);
    ``written_bytes`` what QEMU wrote to the host while the workload ran:
    with ``aio=threads`` the bytes of its write calls (``wchar``, which
    counts every rewrite of a qcow2 metadata block); with ``native`` and
    ``io_uring`` the writes bypass those counters, so the bytes the kernel
    accounted to storage (``write_bytes``) stand in.  Their ratio is the write
    amplification of the format and cache mode.  Flushes are the guest's
    flush requests at the device.
    """
    figures: dict[str, float] = {}
    guest_bytes = blockstats.get("wr_bytes")
    if guest_bytes is not None:
        figures["host.guest_written_bytes"] = float(guest_bytes)
        figures["host.flushes"] = float(blockstats.get("flush_operations", 0))
    key = "wchar" if aio is Aio.THREADS else "write_bytes"
    if key in qemu_io:
        figures["host.written_bytes"] = float(qemu_io[key])
        if aio is Aio.THREADS:
            figures["host.write_calls"] = float(qemu_io.get("syscw", 0))
        if guest_bytes:
            figures["host.write_amplification"] = qemu_io[key] / guest_bytes
    return figures


def sample_metrics(report: GuestReport, host: dict[str, Any], aio: Aio = Aio.THREADS) -> dict[str, float]:
    """Flat figures of one sample: seconds unless the name says otherwise."""
    metrics = {f"phase.{name}_s": secs for name, secs in report.phase_seconds().items()}
    metrics["total_s"] = report.total_s
    for key, value in report.metrics.items():
        metrics[key] = value
    for key in ("boot_s", "workload_s", "overhead_s", "create_s"):
        if key in host:
            metrics[f"host.{key}"] = float(host[key])
    metrics.update(host_counters(host.get("blockstats", {}), host.get("qemu_io", {}), aio))
    cpu = host.get("cpu")
    if isinstance(cpu, dict) and "workload_s" in host:
        metrics["host.workload_cpu_s"] = float(cpu["qemu_cpu_s"])
        alone = alone_s(float(host["workload_s"]), float(cpu["vcpu_wait_s"]))
        if alone is not None:
            metrics["host.workload_alone_s"] = alone
    metrics.update(latency_metrics(host.get("latency_histograms", {}), host.get("blockstats", {})))
    return metrics


def cpu_delta(before: CpuTimes | None, after: CpuTimes | None) -> dict[str, float] | None:
    """QEMU's CPU time and its vCPUs' run and wait times between two readings."""
    if before is None or after is None:
        return None
    return {
        "qemu_cpu_s": after.cpu_s - before.cpu_s,
        "vcpu_run_s": after.vcpu_run_s - before.vcpu_run_s,
        "vcpu_wait_s": after.vcpu_wait_s - before.vcpu_wait_s,
    }
