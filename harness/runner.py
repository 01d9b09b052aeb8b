"""Cell -> record: fresh image per sample, one guest per sample, failures captured.

A sample that fails (boot timeout, panic, bad report, corrupt image) becomes
a sample with ``status: error``, its reason and the console tail; the run
goes on.  The record is rewritten atomically after every sample, so a crash
loses at most the sample in flight.
"""

from __future__ import annotations

import datetime as dt
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness import images
from harness.errors import HarnessError, ProtocolError
from harness.protocol import GuestReport, parse_ready, parse_report
from harness.records import new_record, record_path, write_json_atomic
from harness.spec import Cell, Interface, Workload
from harness.vm import PAYLOAD_SERIAL, Drive, Machine, VMConfig

DISK_NODE = "disk0"


class Guest(Protocol):
    """What the runner needs of a built guest (see :mod:`harness.guest`)."""

    kernel: Path
    initrd: Path
    payloads: dict[str, Path]
    recipe_hash: str
    kernel_version: str


@dataclass(frozen=True)
class RunOptions:
    accel: str
    accel_reason: str
    work_dir: Path
    results_dir: Path
    run_id: str
    repeat: int = 3
    boot_timeout_s: float = 120.0
    workload_timeout_s: float = 1800.0
    mem_mib: int = 256
    smp: int = 1
    keep_images: bool = False
    extra_append: tuple[str, ...] = ()


def new_run_id() -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{secrets.token_hex(2)}"


def vm_config(cell: Cell, guest: Guest, opts: RunOptions, image: Path) -> VMConfig:
    drives = []
    if cell.workload.name is Workload.INSTALL:
        drives.append(
            Drive(
                node="payload",
                path=guest.payloads[cell.workload.payload],
                format="raw",
                interface=Interface.VIRTIO_BLK,
                readonly=True,
                serial=PAYLOAD_SERIAL,
            )
        )
    drives.append(
        Drive(
            node=DISK_NODE,
            path=image,
            format=cell.image.format.value,
            interface=cell.drive.interface,
            cache=cell.drive.cache,
            aio=cell.drive.aio,
        )
    )
    return VMConfig(
        kernel=guest.kernel,
        initrd=guest.initrd,
        append=[*cell.workload.kernel_args(), *opts.extra_append],
        drives=drives,
        accel=opts.accel,
        mem_mib=opts.mem_mib,
        smp=opts.smp,
    )


def sample_metrics(report: GuestReport, host: dict[str, Any]) -> dict[str, float]:
    """Flat figures of one sample: seconds unless the name says otherwise."""
    metrics = {f"phase.{name}_s": secs for name, secs in report.phase_seconds().items()}
    metrics["total_s"] = report.total_s
    for key, value in report.metrics.items():
        metrics[key] = value
    for key in ("boot_s", "overhead_s", "create_s"):
        if key in host:
            metrics[f"host.{key}"] = float(host[key])
    return metrics


def run_sample(cell: Cell, guest: Guest, opts: RunOptions, index: int, log_dir: Path) -> dict[str, Any]:
    """One measured run of ``cell``; never raises for a failure of the sample itself."""
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    image_path = opts.work_dir / f"{cell.id}.{cell.image.format.value}"
    host: dict[str, Any] = {}
    sample: dict[str, Any] = {
        "index": index,
        "status": "error",
        "started_at": started,
        "host": host,
        "logs": {
            "console": str(log_dir / "console.log"),
            "qemu_stderr": str(log_dir / "qemu.stderr"),
            "report": str(log_dir / "report.jsonl"),
        },
    }
    vm: Machine | None = None
    try:
        created = images.create(image_path, cell.image)
        host["create_s"] = created.create_s
        host["allocated_before"] = created.allocated_bytes
        config = vm_config(cell, guest, opts, image_path)
        with Machine(config, log_dir, name=cell.id) as vm:
            sample["argv"] = vm.argv
            ready = parse_ready(vm.wait_event("ready", timeout_s=opts.boot_timeout_s, what="ready line"))
            host["boot_s"] = vm.elapsed_s
            sample["guest_ready"] = ready
            before = vm.blockstats(DISK_NODE)
            event = vm.wait_event("report", timeout_s=opts.workload_timeout_s, what="workload report")
            host["workload_s"] = vm.elapsed_s - host["boot_s"]
            sample["report"] = event
            host["guest_stopped"] = vm.wait_guest_stopped(timeout_s=60.0)
            after = vm.blockstats(DISK_NODE)
            host["blockstats_before"] = before
            host["blockstats_after"] = after
            host["qemu_io"] = vm.proc_io()
            garbage = vm.garbage()
        if garbage:
            raise ProtocolError(f"guest sent {len(garbage)} line(s) that are not JSON: {garbage[0][:80]!r}")
        report = parse_report(event, workload=cell.workload.name.value)
        check = images.check(image_path, cell.image.format)
        host["check"] = {"rc": check.returncode, "verdict": check.verdict, "report": check.report}
        host["allocated_after"] = images.allocated_bytes(image_path)
        host["wall_s"] = time.monotonic() - t0
        host["overhead_s"] = host["wall_s"] - host["boot_s"] - report.total_s
        sample["metrics"] = sample_metrics(report, host)
        if report.status != "ok":
            sample["reason"] = f"guest workload failed: {report.error or 'no reason given'}"
            sample["log_tail"] = vm.console_tail() if vm else ""
        elif report.fsck_rc not in (None, 0):
            sample["reason"] = f"e2fsck -fn in the guest found errors (exit {report.fsck_rc})"
        elif check.fails_sample:
            sample["reason"] = f"qemu-img check says {check.verdict} (exit {check.returncode})"
        else:
            sample["status"] = "ok"
    except HarnessError as exc:
        sample["reason"] = exc.message
        sample["error_type"] = type(exc).__name__
        sample["log_tail"] = exc.log_tail or (vm.console_tail() if vm else "")
        host["wall_s"] = time.monotonic() - t0
    finally:
        if not opts.keep_images:
            image_path.unlink(missing_ok=True)
    return sample


def run_cell(
    cell: Cell,
    guest: Guest,
    opts: RunOptions,
    *,
    machine: dict[str, Any],
    subject: dict[str, Any],
    progress: Callable[[str], None] = lambda _msg: None,
    label: str = "",
    path: Path | None = None,
    existing: dict[str, Any] | None = None,
    log_root: Path | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Run the samples of ``cell`` up to ``opts.repeat``; write the record after each.

    ``path`` defaults to ``RESULTS/records/RUN_ID/CELL_ID.json``.  With
    ``existing`` (a record of this cell, same machine and subject) the run
    goes on from its next sample instead of starting over: records are the
    checkpoint of a sweep.
    """
    path = path or record_path(opts.results_dir, opts.run_id, cell.id)
    record = existing or new_record(
        cell=cell.as_dict(),
        machine=machine,
        subject=subject,
        vm={
            "accel": opts.accel,
            "accel_reason": opts.accel_reason,
            "mem_mib": opts.mem_mib,
            "smp": opts.smp,
            "boot_timeout_s": opts.boot_timeout_s,
            "workload_timeout_s": opts.workload_timeout_s,
        },
        run_id=opts.run_id,
    )
    log_root = log_root or opts.results_dir / "logs" / opts.run_id / cell.id
    for index in range(len(record["samples"]), opts.repeat):
        progress(f"{label}{cell.id} sample {index + 1}/{opts.repeat} ...")
        sample = run_sample(cell, guest, opts, index, log_root / f"sample-{index}")
        record["samples"].append(sample)
        write_json_atomic(path, record)
        progress(f"{label}{cell.id} sample {index + 1}/{opts.repeat}: {describe_sample(sample)}")
    return path, record


def describe_sample(sample: dict[str, Any]) -> str:
    if sample["status"] != "ok":
        return f"FAILED: {sample.get('reason', 'unknown reason')}"
    metrics = sample["metrics"]
    parts = [f"total {metrics['total_s']:.2f} s", f"boot {metrics['host.boot_s']:.2f} s"]
    if "mib_per_s" in metrics:
        parts.append(f"{metrics['mib_per_s']:.1f} MiB/s")
    return ", ".join(parts)
