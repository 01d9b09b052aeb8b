"""QEMU start to workload start, cold boot vs snapshot start: median and spread.

    .venv/bin/python benchmarks/boot_time.py --accel tcg --boots 10

Each start launches QEMU for a raw 256 MiB virtio-blk disk and times, on the
host's monotonic clock, from process start to the guest's ``start`` line: the
guest has its workload (``probe``: it powers off at once) and would start it.
A cold start boots the kernel; a snapshot start restores the guest saved at
its ready line (built once, before the timed starts, and cached).  Target
under TCG on a 2-core runner: snapshot start at most 1.5 s; under KVM 0.3 s.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from harness.compare.samplestats import Stats
from harness.guest import build_guest
from harness.sample import images, snapshot
from harness.sample.guest_sampler import RunOptions, vm_config
from harness.sample.vm import Machine
from harness.spec import make_cell
from harness.subject.binaries import QEMU_IMG, Binaries


def start_once(start: snapshot.Start, guest: Any, accel: str, tmp: Path, index: int) -> tuple[float, str]:
    cell = make_cell(format="raw", interface="virtio-blk", workload="dd", dd_mib=16, size="256M")
    opts = RunOptions(
        binaries=Binaries.on_path(),
        accel=accel,
        accel_reason="benchmark",
        work_dir=tmp,
        results_dir=tmp,
        run_id="boot",
    )
    image = tmp / f"disk-{index}.raw"
    images.create(image, cell.image, qemu_img=QEMU_IMG)
    log_dir = tmp / f"{start.value}-{index}"

    def wait_ready(vm: Machine) -> dict[str, Any]:
        return vm.wait_event("ready", timeout_s=120, what="ready line")

    try:
        with snapshot.start_guest(
            vm_config(cell, guest, opts, image),
            log_dir,
            name="boot-time",
            start=start,
            cell=cell,
            plan=snapshot.SnapshotPlan(
                recipe_hash=guest.recipe_hash,
                scratch_path=tmp / "scratch.raw",
                make_scratch=lambda path: _create(path, cell),
            ),
            boot_timeout_s=120,
            wait_ready=wait_ready,
        ) as started:
            started.vm.send_control("diskbench.workload=probe")
            started.vm.wait_event("start", timeout_s=120, what="workload start")
            return started.vm.elapsed_s, started.start
    finally:
        image.unlink(missing_ok=True)


def _create(path: Path, cell: Any) -> None:
    images.create(path, cell.image, qemu_img=QEMU_IMG)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--accel", default="tcg", choices=("tcg", "kvm"))
    parser.add_argument("--boots", type=int, default=10, help="timed starts of each kind")
    args = parser.parse_args()
    guest = build_guest(log=lambda _m: None)
    times: dict[str, list[float]] = {"cold": [], "snapshot": []}
    with tempfile.TemporaryDirectory(prefix="diskbench-boot-", dir="/var/tmp") as tmp_name:
        tmp = Path(tmp_name)
        start_once(snapshot.Start.SNAPSHOT, guest, args.accel, tmp, -1)  # builds the snapshot, untimed
        for index in range(args.boots):
            # interleaved, so a change of the host's load hits both kinds alike
            for kind in (snapshot.Start.COLD, snapshot.Start.SNAPSHOT):
                seconds, how = start_once(kind, guest, args.accel, tmp, index)
                if how != kind.value:
                    raise SystemExit(f"a {kind.value} start became a {how} start: see the warning above")
                times[kind.value].append(seconds)
                print(f"{kind.value} {index + 1}/{args.boots}: {seconds:.2f} s", flush=True)
    for kind, values in times.items():
        stats = Stats.of(values)
        print(
            f"QEMU start to workload start, {kind} ({args.accel}): median {stats.median:.2f} s, "
            f"{stats.format('s')} (min {stats.min:.2f}, max {stats.max:.2f}, n={stats.n})"
        )


if __name__ == "__main__":
    main()
