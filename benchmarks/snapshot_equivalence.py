"""Does a snapshot start measure what a cold boot measures?

    .venv/bin/python benchmarks/snapshot_equivalence.py --samples 6

For one dd cell and one install cell, cold-boot and snapshot-start samples
run interleaved (cold, snapshot, cold, ...) on this host, each on a fresh
image.  Per workload figure the two kinds' samples are compared with the
two-sided Mann-Whitney U test of :mod:`harness.compare` (the test the gate
uses: rank-based, no normality assumed, exact for small samples); a p-value
above 0.05 means no detectable difference at this n.  The guest clock after
a restore is checked against the host's: the guest's own workload time
(``total_s``, CLOCK_MONOTONIC in the guest) over the host's wall time from the
guest's ``start`` line to its report (``host.workload_s``) must be below 1
(the host's span also holds fsck and the report) and match the cold boots'.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.compare import mann_whitney_u
from harness.compare.samplestats import Stats
from harness.guest import build_guest
from harness.sample.guest_sampler import RunOptions, run_sample
from harness.spec import make_cell
from harness.subject.binaries import Binaries

CELLS = {
    "dd": {"format": "qcow2", "interface": "virtio-blk", "workload": "dd", "dd_mib": 128, "size": "1G"},
    "install": {
        "format": "qcow2",
        "interface": "virtio-blk",
        "workload": "install",
        "payload": "small",
        "size": "1G",
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=6, help="samples of each kind per cell")
    parser.add_argument("--accel", default="tcg", choices=("tcg", "kvm"))
    parser.add_argument("--cells", default="dd,install")
    args = parser.parse_args()
    guest = build_guest(log=lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="diskbench-equiv-", dir="/var/tmp") as tmp_name:
        tmp = Path(tmp_name)
        base = RunOptions(
            binaries=Binaries.on_path(),
            accel=args.accel,
            accel_reason="benchmark",
            work_dir=tmp,
            results_dir=tmp,
            run_id="eq",
        )
        for name in args.cells.split(","):
            cell = make_cell(**CELLS[name])  # type: ignore[arg-type]
            samples: dict[str, list[dict[str, Any]]] = {"cold": [], "snapshot": []}
            for index in range(args.samples):
                for kind in ("cold", "snapshot"):
                    opts = replace(base, start=kind)
                    sample = run_sample(cell, guest, opts, index, tmp / name / kind / str(index))
                    if sample["status"] != "ok" or sample["host"].get("start") != kind:
                        raise SystemExit(f"{name} {kind} sample failed: {sample.get('reason')}")
                    samples[kind].append(sample)
                    m = sample["metrics"]
                    print(
                        f"{name} {kind} {index + 1}: total {m['total_s']:.2f} s, "
                        f"boot {m['host.boot_s']:.2f} s, host workload {sample['host']['workload_s']:.2f} s",
                        flush=True,
                    )
            report(name, samples)


def report(name: str, samples: dict[str, list[dict[str, Any]]]) -> None:
    cold, snap = samples["cold"], samples["snapshot"]
    metrics = sorted(
        k for k in cold[0]["metrics"] if k != "host.boot_s" and all(k in s["metrics"] for s in snap)
    )
    print(f"\n{name}: cold n={len(cold)} vs snapshot n={len(snap)} (two-sided Mann-Whitney U)")
    for metric in metrics:
        a = [s["metrics"][metric] for s in cold]
        b = [s["metrics"][metric] for s in snap]
        _u, p = mann_whitney_u(a, b)
        print(f"  {metric:32} cold {Stats.of(a).format('')}  snapshot {Stats.of(b).format('')}  p={p:.3f}")
    for kind, group in samples.items():
        ratio = Stats.of([s["metrics"]["total_s"] / s["host"]["workload_s"] for s in group])
        boot = Stats.of([s["metrics"]["host.boot_s"] for s in group])
        print(
            f"  {kind}: guest total_s / host workload_s {ratio.format('')}; boot median {boot.median:.2f} s"
        )


if __name__ == "__main__":
    main()
