"""Measure the gate's own honesty: false alarms on A/A, and how often a real slowdown is caught.

Usage (from the repository root, after ``bash scripts/setup.sh``)::

    .venv/bin/python benchmarks/calibrate_gate.py --aa 20 --injected 5 --slowdowns 10,25

1. A throwaway clone of this repository's committed HEAD is made.
2. ``--aa`` gate runs compare HEAD with itself (trimmed spec
   ``benchmarks/gate-calibration.toml``).  Any ``regression`` is a false alarm.
3. The first cell is measured under a ladder of write throttles
   (``throttling.bps-write`` in the policy, 3 samples each; mkfs's journal and
   dd's data both pass through it); the throttle for a slowdown ``s`` is where
   the measured ``total_s`` reaches ``(1 + s)`` times the unthrottled median of
   the A/A runs, interpolated between the two ladder points around it.
4. For each slowdown a commit adding that throttle to ``policy.toml`` is made,
   and ``--injected`` gate runs compare it with HEAD.  A run that names the cell
   ``regression`` caught it.

The rates and every run's verdicts go to ``OUT/calibration.json`` and
``OUT/calibration.md``; the markdown is printed at the end.  On a KVM runner
pass ``--accel kvm`` (and a larger ``--aa``); the figures are per machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# everything the runs import later, imported now: a checkout edited while this runs cannot mix versions
import harness.guest  # noqa: E402
import harness.rounds.session  # noqa: E402, F401
from harness.compare import Settings, Verdict  # noqa: E402
from harness.compare.comparison import load_comparison  # noqa: E402
from harness.files import write_json_atomic  # noqa: E402
from harness.gate import GateAsked, GateOptions, SubjectSource, load_gate_spec, run_gate, settings_for  # noqa: E402
from harness.paths import default_results_dir, default_work_dir  # noqa: E402
from harness.record import gate_records, scan_records  # noqa: E402
from harness.rounds.session import MachineOptions  # noqa: E402
from harness.subject.binaries import Binaries  # noqa: E402
from harness.subject.policy import load_policy  # noqa: E402

MIB = 1024 * 1024


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def clone(into: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(into)], check=True)
    git(into, "config", "user.email", "calibration@diskbench.invalid")
    git(into, "config", "user.name", "diskbench calibration")
    return into


def commit_throttle(repo: Path, base: str, bps: int, label: str) -> str:
    """A commit on top of ``base`` whose policy throttles writes to ``bps`` bytes/s."""
    git(repo, "checkout", "-q", "--detach", base)
    policy = repo / "policy.toml"
    text = policy.read_text(encoding="utf-8")
    if "[drive.options]" not in text:
        text += "\n[drive.options]\n"
    text = text.replace("[drive.options]\n", f'[drive.options]\n"throttling.bps-write" = {bps}\n', 1)
    policy.write_text(text, encoding="utf-8")
    git(repo, "commit", "-q", "-am", f"policy: throttle writes to {bps} B/s ({label})")
    return git(repo, "rev-parse", "HEAD")


def one_gate(
    repo: Path, base: str, head: str, args: argparse.Namespace, out: Path, seed: int
) -> dict[str, Any]:
    spec = load_gate_spec(args.spec)
    t0 = time.monotonic()
    run_gate(
        repo=repo,
        sources=(SubjectSource("base", base), SubjectSource("head", head)),
        spec=spec,
        settings=settings_for(spec, Settings(seed=seed)),
        options=GateOptions.decide(
            spec,
            MachineOptions(
                binaries=Binaries.on_path(), work_dir=args.work_dir, results_dir=out, accel=args.accel
            ),
            GateAsked(seed=seed),
        ),
        out_dir=out,
        progress=(lambda m: print(m, file=sys.stderr, flush=True)) if args.verbose else (lambda _m: None),
    )
    return summarize(out, wall_s=time.monotonic() - t0)


def summarize(out: Path, *, wall_s: float | None = None) -> dict[str, Any]:
    """What the calibration keeps of one gate run: its verdicts, from its comparison.json."""
    comparison = load_comparison(out / "comparison.json")
    used_min = comparison.budget.used_min if comparison.budget is not None else None
    return {
        "out": str(out),
        "wall_s": round(wall_s if wall_s is not None else (used_min or 0) * 60, 1),
        "verdict": comparison.verdict.value,
        "fails": comparison.summary.fails,
        "cells": {
            c.name: {
                "verdict": c.verdict.value,
                "rounds": c.rounds,
                "ratio": next((m.ratio for m in c.metrics if m.metric == "total_s"), None),
            }
            for c in comparison.cells
        },
        "canary": comparison.canary.to_json() if comparison.canary is not None else None,
    }


def cell_figures(run_dirs: list[Path]) -> dict[str, dict[str, float]]:
    """Median write phase, total and dd size per cell id, over the base records of A/A runs."""
    totals: dict[str, list[float]] = {}
    writes: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}
    for run in run_dirs:
        for record in scan_records(gate_records(run, "base").directory).values():
            cid = record.cell_id
            sizes[cid] = int(record.cell.workload["dd_mib"]) * MIB
            for sample in record.ok:
                totals.setdefault(cid, []).append(sample.metrics["total_s"])
                writes.setdefault(cid, []).append(sample.metrics["phase.write_s"])
    return {
        cid: {
            "total_s": statistics.median(totals[cid]),
            "write_s": statistics.median(writes[cid]),
            "bytes": sizes[cid],
        }
        for cid in totals
    }


# throttles tried, as multiples of the cell's own dd rate: mkfs's journal zeroing runs far
# faster than dd, so a throttle above the dd rate already slows the cell
LADDER = (4.0, 2.5, 1.6, 1.0, 0.6)


def measure_ladder(cell: Any, rate_mib_s: float, args: argparse.Namespace, out: Path) -> dict[int, float]:
    """Median ``total_s`` of ``cell`` under each throttle of the ladder (3 samples each)."""
    from harness.rounds.session import MachineOptions, SessionOptions, run_cells
    from harness.subject.policy import parse_policy

    points: dict[int, float] = {}
    for factor in LADDER:
        bps = int(factor * rate_mib_s * MIB)
        policy = parse_policy(f'[drive.options]\n"throttling.bps-write" = {bps}\n', source="ladder")
        result = run_cells(
            [cell],
            SessionOptions(
                MachineOptions(
                    binaries=Binaries.on_path(),
                    work_dir=args.work_dir,
                    results_dir=out / f"ladder-{bps}",
                    accel=args.accel,
                    start="cold",
                ),
                repeat=3,
            ),
            policy=policy,
        )
        totals = [s.metrics["total_s"] for r in result.records for s in r.ok]
        if not totals:
            raise SystemExit(f"calibration: the run at {bps} B/s failed: see {result.run_dir}")
        points[bps] = statistics.median(totals)
        print(f"ladder: {bps / MIB:.0f} MiB/s -> total_s {points[bps]:.3f}", flush=True)
    return points


def throttle_for(points: dict[int, float], total_s: float, slowdown: float) -> int:
    """The rate where the measured ``total_s(rate)`` reaches ``(1 + slowdown) * total_s``.

    Linear in 1/rate between the two ladder points around the target; beyond the
    ladder, its nearest end.
    """
    target = (1 + slowdown) * total_s
    ladder = sorted(points.items(), reverse=True)  # fastest throttle (smallest effect) first
    if target <= ladder[0][1]:
        return ladder[0][0]
    for (r1, t1), (r2, t2) in itertools.pairwise(ladder):
        if t1 <= target <= t2 and t2 > t1:
            inv = 1 / r1 + (target - t1) / (t2 - t1) * (1 / r2 - 1 / r1)
            return int(1 / inv)
    return ladder[-1][0]


def render(doc: dict[str, Any]) -> str:
    lines = [
        f"# Gate calibration ({doc['accel']}, {doc['spec']})",
        "",
        f"A/A: {doc['aa']['runs']} gate runs, false alarms (the gate failed): "
        f"**{doc['aa']['false_alarms']}** ({doc['aa']['false_alarm_rate']:.0%}); "
        f"cell verdicts: {doc['aa']['cell_verdicts']}; median wall time per gate {doc['aa']['median_wall_s']:.0f} s.",
        "",
        "| injected | throttle | expected slowdown per cell | runs | caught | cells named regression | measured ratio (median) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for inj in doc["injected"]:
        expected = ", ".join(f"{k}: +{v:.0%}" for k, v in inj["expected"].items())
        named = ", ".join(f"{k} {v}/{inj['runs']}" for k, v in inj["named"].items()) or "none"
        ratios = ", ".join(f"{k} {v:.3f}" for k, v in inj["median_ratio"].items())
        lines.append(
            f"| {inj['slowdown']:.0%} | {inj['bps'] / MIB:.1f} MiB/s | {expected} | {inj['runs']} | "
            f"{inj['caught']} ({inj['caught'] / max(inj['runs'], 1):.0%}) | {named} | {ratios} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--aa", type=int, default=20, help="A/A gate runs")
    parser.add_argument("--injected", type=int, default=5, help="gate runs per injected slowdown")
    parser.add_argument("--slowdowns", default="10,25", help="injected slowdowns of total_s, percent")
    parser.add_argument("--spec", type=Path, default=ROOT / "benchmarks" / "gate-calibration.toml")
    parser.add_argument("--accel", default="auto", choices=("auto", "kvm", "tcg"))
    parser.add_argument("--work-dir", type=Path, default=default_work_dir())
    parser.add_argument("--out", type=Path, default=None, help="default RESULTS/calibration/TIME")
    parser.add_argument(
        "--aa-from",
        type=Path,
        default=None,
        help="take the A/A runs of an earlier calibration's output dir (its aa-* folders); run only the rest",
    )
    parser.add_argument("--verbose", action="store_true", help="print every sample's progress")
    args = parser.parse_args(argv)
    if args.aa < 1:
        parser.error("--aa: use 1 or more (the A/A runs give the unthrottled figures)")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or default_results_dir() / "calibration" / stamp
    out.mkdir(parents=True, exist_ok=True)
    slowdowns = [float(s) / 100 for s in args.slowdowns.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="diskbench-calibration-") as tmp:
        repo = clone(Path(tmp) / "repo")
        head = git(repo, "rev-parse", "HEAD")
        aa_runs = [summarize(d) for d in sorted(args.aa_from.glob("aa-*"))] if args.aa_from else []
        for line in aa_runs:
            print(f"A/A (from {args.aa_from}): {line['verdict']} {line['cells']}", flush=True)
        for i in range(len(aa_runs), args.aa):
            aa_runs.append(one_gate(repo, head, head, args, out / f"aa-{i:02d}", seed=1000 + i))
            print(f"A/A {i + 1}/{args.aa}: {aa_runs[-1]['verdict']} {aa_runs[-1]['cells']}", flush=True)
        figures = cell_figures([Path(r["out"]) for r in aa_runs])
        spec = load_gate_spec(args.spec)
        first_cell = spec.cells[0].resolve(load_policy(repo / "policy.toml"))
        unthrottled = figures[first_cell.id]
        rate = unthrottled["bytes"] / MIB / unthrottled["write_s"]
        points = measure_ladder(first_cell, rate, args, out)
        injected = []
        for slowdown in slowdowns:
            bps = throttle_for(points, unthrottled["total_s"], slowdown)
            rev = commit_throttle(repo, head, bps, f"{slowdown:.0%} slower")
            # what the ladder measured at this throttle, by interpolation: the target itself
            expected = {first_cell.id: slowdown}
            runs = []
            for i in range(args.injected):
                runs.append(
                    one_gate(repo, head, rev, args, out / f"inj{slowdown * 100:.0f}-{i:02d}", seed=2000 + i)
                )
                print(
                    f"injected {slowdown:.0%} {i + 1}/{args.injected}: {runs[-1]['verdict']} {runs[-1]['cells']}"
                )
            named: dict[str, int] = {}
            ratios: dict[str, list[float]] = {}
            for run in runs:
                for name, cell in run["cells"].items():
                    if cell["verdict"] == Verdict.REGRESSION.value:
                        named[name] = named.get(name, 0) + 1
                    if cell["ratio"] is not None:
                        ratios.setdefault(name, []).append(cell["ratio"])
            injected.append(
                {
                    "slowdown": slowdown,
                    "bps": bps,
                    "expected": expected,
                    "runs": len(runs),
                    "caught": sum(
                        1 for r in runs if r.get("fails", r["verdict"] == Verdict.REGRESSION.value)
                    ),
                    "named": named,
                    "median_ratio": {k: statistics.median(v) for k, v in ratios.items()},
                    "gates": runs,
                }
            )
    cell_verdicts: dict[str, int] = {}
    for run in aa_runs:
        for cell in run["cells"].values():
            cell_verdicts[cell["verdict"]] = cell_verdicts.get(cell["verdict"], 0) + 1
    # a gate fails on a regression, or on a change of the IO (changed_fails): either is an alarm
    false_alarms = sum(1 for r in aa_runs if r.get("fails", r["verdict"] == Verdict.REGRESSION.value))
    doc = {
        "spec": str(args.spec.relative_to(ROOT) if args.spec.is_relative_to(ROOT) else args.spec),
        "accel": args.accel,
        "head": head,
        "figures": figures,
        "ladder": {str(k): v for k, v in points.items()},
        "aa": {
            "runs": len(aa_runs),
            "false_alarms": false_alarms,
            "false_alarm_rate": false_alarms / max(len(aa_runs), 1),
            "cell_verdicts": cell_verdicts,
            "median_wall_s": statistics.median([r["wall_s"] for r in aa_runs]) if aa_runs else 0.0,
            "gates": aa_runs,
        },
        "injected": injected,
    }
    if aa_runs:
        accel = json.loads((Path(aa_runs[0]["out"]) / "comparison.json").read_text()).get("accel")
        doc["accel"] = accel or args.accel
    write_json_atomic(out / "calibration.json", doc)
    text = render(doc)
    (out / "calibration.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"calibration: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
