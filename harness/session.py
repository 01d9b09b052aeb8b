"""A run of several cells: check, build, choose the accelerator, measure, tabulate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import images
from harness.accel import choose_accel
from harness.machine import machine_info
from harness.report import render_summary, render_table
from harness.runner import RunOptions, new_run_id, run_cell
from harness.spec import Cell

BOOT_TIMEOUT_S = {"kvm": 30.0, "tcg": 120.0}


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    records: list[dict[str, Any]]
    table: str

    @property
    def total_samples(self) -> int:
        return sum(len(r["samples"]) for r in self.records)

    @property
    def failed_samples(self) -> int:
        return sum(1 for r in self.records for s in r["samples"] if s["status"] != "ok")


def guest_subject(guest: Any) -> dict[str, Any]:
    return {
        "guest": {
            "recipe_hash": guest.recipe_hash,
            "kernel_version": guest.kernel_version,
            "packages": dict(sorted(guest.packages.items())),
        }
    }


def run_cells(
    cells: Sequence[Cell],
    *,
    repeat: int = 3,
    accel: str = "auto",
    work_dir: Path,
    results_dir: Path,
    boot_timeout_s: float | None = None,
    workload_timeout_s: float = 1800.0,
    mem_mib: int = 256,
    smp: int = 1,
    keep_images: bool = False,
    extra_append: Sequence[str] = (),
    progress: Callable[[str], None] = lambda _msg: None,
    guest: Any = None,
) -> RunResult:
    """Measure every cell ``repeat`` times; bad input fails before anything is created."""
    from harness.guest import build_guest

    work_dir = work_dir.resolve()
    fstype = images.check_work_dir(work_dir, {c.drive.cache for c in cells})
    if guest is None:
        guest = build_guest(log=progress)
    choice = choose_accel(accel, guest.kernel, guest.initrd, warn=progress)
    progress(f"accel: {choice.accel} ({choice.reason}); work dir {work_dir} on {fstype}")
    opts = RunOptions(
        accel=choice.accel,
        accel_reason=choice.reason,
        work_dir=work_dir,
        results_dir=results_dir.resolve(),
        run_id=new_run_id(),
        repeat=repeat,
        boot_timeout_s=boot_timeout_s or BOOT_TIMEOUT_S[choice.accel],
        workload_timeout_s=workload_timeout_s,
        mem_mib=mem_mib,
        smp=smp,
        keep_images=keep_images,
        extra_append=tuple(extra_append),
    )
    machine = machine_info(work_dir, accel=choice.accel, accel_reason=choice.reason)
    subject = guest_subject(guest)
    records = []
    for number, cell in enumerate(cells, start=1):
        _, record = run_cell(
            cell,
            guest,
            opts,
            machine=machine,
            subject=subject,
            progress=progress,
            label=f"[{number}/{len(cells)}] ",
        )
        records.append(record)
    return RunResult(
        run_dir=opts.results_dir / "records" / opts.run_id,
        records=records,
        table=render_table(records) + ("\n" + render_summary(records) if len(records) > 1 else ""),
    )
