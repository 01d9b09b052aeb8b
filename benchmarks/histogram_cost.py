"""What QEMU's latency histograms cost a sample: wall time with and without them.

    .venv/bin/python benchmarks/histogram_cost.py --runs 5 --dd-mib 64

Runs the same dd cell alternately with and without ``block-latency-histogram-set``
(``RunOptions.latency_histograms``), ``--runs`` samples each, and prints the
median and spread of the sample's host wall time and of the guest's
``total_s`` for both, and their difference.  Alternating keeps a drifting
host from favouring one side.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from harness.compare.samplestats import Stats
from harness.guest import build_guest
from harness.rounds.cell import new_run_id
from harness.sample.guest_sampler import RunOptions, run_sample
from harness.spec import make_cell
from harness.subject.binaries import Binaries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="samples per side (default 5)")
    parser.add_argument("--dd-mib", type=int, default=64, help="size of the dd workload (default 64)")
    parser.add_argument("--cache", default="none", help="cache mode of the disk (default none)")
    parser.add_argument("--accel", default="tcg", choices=("tcg", "kvm"))
    args = parser.parse_args()
    guest = build_guest(log=lambda _m: None)
    cell = make_cell(format="qcow2", workload="dd", dd_mib=args.dd_mib, size="512M", cache=args.cache)
    wall: dict[bool, list[float]] = {True: [], False: []}
    total: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="diskbench-hist-", dir="/var/tmp") as tmp:
        for index in range(args.runs):
            for on in (True, False) if index % 2 == 0 else (False, True):
                opts = RunOptions(
                    binaries=Binaries.on_path(),
                    accel=args.accel,
                    accel_reason="benchmark",
                    work_dir=Path(tmp) / "work",
                    results_dir=Path(tmp) / "results",
                    run_id=new_run_id(),
                    latency_histograms=on,
                )
                opts.work_dir.mkdir(parents=True, exist_ok=True)
                sample = run_sample(cell, guest, opts, index, Path(tmp) / "logs" / f"{index}-{on}")
                if not sample.ok:
                    raise SystemExit(f"sample failed: {sample.reason}")
                wall[on].append(float(sample.host["wall_s"]))
                total[on].append(float(sample.metrics["total_s"]))
                print(
                    f"run {index + 1}/{args.runs} histograms {'on ' if on else 'off'}: "
                    f"wall {wall[on][-1]:.2f} s, total {total[on][-1]:.2f} s",
                    flush=True,
                )
    for name, figures in (("sample wall time", wall), ("guest total_s", total)):
        on, off = Stats.of(figures[True]), Stats.of(figures[False])
        print(
            f"{name}: with histograms {on.format('s')}, without {off.format('s')}, "
            f"difference of medians {(on.median - off.median) * 1000:+.0f} ms "
            f"({(on.median / off.median - 1) * 100:+.1f}%)"
        )
    print(f"cell {cell.id}, {args.runs} samples per side, accel {args.accel}")


if __name__ == "__main__":
    main()
