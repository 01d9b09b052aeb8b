"""QEMU start to guest ready: median and spread over N boots.

    .venv/bin/python benchmarks/boot_time.py --accel tcg --boots 5

Each boot launches QEMU with the guest's ``probe`` workload (ready line, then
power off) and times, on the host's monotonic clock, from process start to
the ready line on the report channel.  Target under TCG on a 2-core runner:
median below 10 s; under KVM below 2 s.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from harness.guest import build_guest
from harness.stats import Stats
from harness.vm import Machine, VMConfig


def boot_once(kernel: Path, initrd: Path, accel: str, log_dir: Path) -> float:
    config = VMConfig(
        kernel=kernel, initrd=initrd, append=["diskbench.workload=probe"], drives=[], accel=accel
    )
    with Machine(config, log_dir) as vm:
        vm.wait_event("ready", timeout_s=120, what="ready line")
        return vm.elapsed_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accel", default="tcg", choices=("tcg", "kvm"))
    parser.add_argument("--boots", type=int, default=5)
    args = parser.parse_args()
    guest = build_guest(log=lambda _m: None)
    times = []
    with tempfile.TemporaryDirectory(prefix="diskbench-boot-") as tmp:
        for index in range(args.boots):
            seconds = boot_once(guest.kernel, guest.initrd, args.accel, Path(tmp) / str(index))
            times.append(seconds)
            print(f"boot {index + 1}/{args.boots}: {seconds:.2f} s", flush=True)
    stats = Stats.of(times)
    print(
        f"QEMU start to guest ready ({args.accel}): {stats.format('s')} "
        f"(min {stats.min:.2f}, max {stats.max:.2f}, n={stats.n})"
    )


if __name__ == "__main__":
    main()
