"""The gate's error rates on the IO path, from long interleaved sessions resampled into many gates.

    # run: every round measures each arm once, in a random order (one guest at a time)
    .venv/bin/python benchmarks/calibrate_io.py run --rounds 20 --out OUT \\
        base aa "bps10:throttling.bps-write=..." "wt:cache=writethrough" ...
    # derive gate verdicts: base against every other arm, on random subsets of the rounds
    .venv/bin/python benchmarks/calibrate_io.py analyse OUT --gate-rounds 8 --draws 200

An *arm* is ``NAME`` or ``NAME:KEY=VALUE,...``: ``cache=MODE`` sets the cell's cache mode,
any other key is a ``-drive`` option of the disk under test (``throttling.bps-write=N``,
``throttling.iops-write=N``), as a policy's ``[drive.options]`` would pass it.  The first arm
is the base; an arm with no option other than the base's is an A/A arm.

``run`` measures the gate's policy cell (qcow2, virtio-blk, cache=none, fio on the raw disk;
``--cell`` changes it) from a restored snapshot (``--start``) once per
arm per round, arms shuffled in each round, and appends every sample to ``OUT/samples.jsonl``
(it can be stopped and resumed).  ``analyse`` checks that the rounds are exchangeable (no trend:
the Spearman rank correlation of each arm's values with the round index, and a permutation p
value), then draws ``--draws`` subsets of ``--gate-rounds`` rounds and compares base with each
arm on them exactly as the gate does (:func:`harness.compare.compare_family`, the default gate
spec's metrics and counters, Holm).  A draw that fails (regression or changed) is a false alarm
for an A/A arm and a catch for an injected one.  ``--family-tests`` makes alpha that of a family
of that many tests (the default gate's five cells have 25; this one cell has 5) by scaling it by
5/N: at least as strict as Holm in the bigger family.  Draws overlap (they share rounds), so
their verdicts are not independent: the rates describe these sessions, their spread is wider
than a binomial's.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.compare import Settings, Verdict, compare_family
from harness.gate import GATE_SPEC, load_gate_spec, settings_for
from harness.guest import build_guest
from harness.record import CellInfo, Sample
from harness.rounds.cell import new_run_id
from harness.sample.guest_sampler import RunOptions, run_sample
from harness.spec import make_cell
from harness.subject.binaries import Binaries

# the default gate spec's policy cell (qcow2, virtio-blk, cache=none), fio on the raw disk
CELL: dict[str, Any] = {
    "format": "qcow2",
    "interface": "virtio-blk",
    "aio": "threads",
    "workload": "fio",
    "fio_target": "raw",
    "fio_size_mib": 16,
    "fio_ios": 1000,
    "fio_fsync_ios": 100,
}
FIGURES = (
    "total_s",
    "dev.write_p90_ms",
    "dev.write_mean_ms",
    "fio.raw-rand-write-qd1.clat_mean_ms",
    "fio.raw-rand-write-qd1.clat_p50_ms",
    "fio.raw-fsync-write.clat_mean_ms",
    "fio.raw-rand-read-qd1.clat_mean_ms",
    "fio.raw-rand-read-qd1.clat_p50_ms",
    "fio.raw-fsync-write.clat_p50_ms",
    "host.flushes",
)


def parse_cell(text: str) -> dict[str, Any]:
    """``KEY=VALUE,...`` over :data:`CELL` (numbers become integers): ``workload=dd,dd_mib=64``."""
    cell = dict(CELL)
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--cell {text!r}: write KEY=VALUE,..., e.g. workload=dd,dd_mib=64")
        cell[key] = int(value) if value.isdigit() else value
    return cell


def parse_arm(text: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """``NAME[:KEY=VALUE,...]`` -> (name, cache, drive options)."""
    name, _, rest = text.partition(":")
    cache = "none"
    options = []
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"arm {text!r}: write KEY=VALUE, e.g. throttling.bps-write=52428800")
        if key == "cache":
            cache = value
        else:
            options.append((key, value))
    return name, cache, tuple(options)


def run(args: argparse.Namespace) -> None:
    arms = [parse_arm(a) for a in args.arms]
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = out / "samples.jsonl"
    done = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    (out / "arms.json").write_text(json.dumps(args.arms))
    base_cell = parse_cell(args.cell)
    (out / "cell.json").write_text(json.dumps(base_cell))
    guest = build_guest(log=lambda _m: None)
    rng = random.Random(args.seed)
    first = max((d["round"] for d in done), default=-1) + 1
    with tempfile.TemporaryDirectory(prefix="diskbench-calio-", dir="/var/tmp") as tmp:
        for number in range(first, first + args.rounds):
            order = list(arms)
            rng.shuffle(order)
            t0 = time.monotonic()
            for name, cache, options in order:
                cell = make_cell(**{**base_cell, "cache": cache})
                opts = RunOptions(
                    binaries=Binaries.on_path(),
                    accel="tcg",
                    accel_reason="calibration",
                    work_dir=Path(tmp) / "work",
                    results_dir=Path(tmp) / "results",
                    run_id=new_run_id(),
                    drive_options=options,
                    start=args.start,
                )
                opts.work_dir.mkdir(parents=True, exist_ok=True)
                sample = run_sample(cell, guest, opts, number, Path(tmp) / "logs" / f"{number}-{name}")
                entry = {
                    "round": number,
                    "arm": name,
                    "status": sample.status,
                    "reason": sample.reason,
                    "metrics": dict(sample.metrics),
                }
                with log.open("a") as fh:
                    fh.write(json.dumps(entry) + "\n")
            print(f"round {number}: {time.monotonic() - t0:.0f} s", flush=True)


def ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float], *, permutations: int = 2000) -> tuple[float, float]:
    """Spearman's rho and a two-sided permutation p value."""

    def rho(a: list[float], b: list[float]) -> float:
        ma, mb = statistics.fmean(a), statistics.fmean(b)
        num = sum((p - ma) * (q - mb) for p, q in zip(a, b, strict=True))
        den = math.sqrt(sum((p - ma) ** 2 for p in a) * sum((q - mb) ** 2 for q in b))
        return num / den if den else 0.0

    rx, ry = ranks(x), ranks(y)
    observed = rho(rx, ry)
    rng = random.Random(0)
    shuffled = list(ry)
    extreme = 0
    for _ in range(permutations):
        rng.shuffle(shuffled)
        if abs(rho(rx, shuffled)) >= abs(observed) - 1e-12:
            extreme += 1
    return observed, (extreme + 1) / (permutations + 1)


def analyse(args: argparse.Namespace) -> None:
    out: Path = args.out
    entries = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    arm_names = [parse_arm(a)[0] for a in json.loads((out / "arms.json").read_text())]
    by_arm: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in arm_names}
    for e in entries:
        by_arm.setdefault(e["arm"], {})[e["round"]] = e
    rounds = sorted(set.intersection(*(set(v) for v in by_arm.values())))
    failed = [e for e in entries if e["status"] != "ok"]
    print(f"{len(rounds)} complete rounds, {len(entries)} samples, {len(failed)} failed")
    print("\nper arm: median (min..max) and trend over the rounds (Spearman rho vs round, permutation p)")
    for name in arm_names:
        parts = []
        for figure in FIGURES:
            values = [by_arm[name][r]["metrics"].get(figure) for r in rounds]
            pairs = [(r, v) for r, v in zip(rounds, values, strict=True) if v is not None]
            if len(pairs) < 3:
                continue
            xs, vs = [p[0] for p in pairs], [float(p[1]) for p in pairs]
            rho, p = spearman(xs, vs)
            parts.append(
                f"{figure} {statistics.median(vs):.3g} ({min(vs):.3g}..{max(vs):.3g}) rho {rho:+.2f} p {p:.2f}"
            )
        print(f"  {name}: " + "; ".join(parts))
    spec_settings = settings_for(load_gate_spec(GATE_SPEC), Settings())
    metrics = tuple(args.metrics.split(",")) if args.metrics else spec_settings.metrics
    counters = spec_settings.counters if args.counters else ()
    own = len(metrics) + len(counters)  # the tests of this one cell
    scale = own / args.family_tests if args.family_tests else 1.0
    settings = Settings(
        metrics=metrics,
        counters=counters,
        min_effect=spec_settings.min_effect,
        min_effect_by_metric=spec_settings.min_effect_by_metric,
        alpha=spec_settings.alpha * scale,
        changed_fails=spec_settings.changed_fails,
        bootstrap=args.bootstrap,
    )
    base = arm_names[0]
    cell_file = out / "cell.json"
    cell_values = json.loads(cell_file.read_text()) if cell_file.exists() else dict(CELL)
    rng = random.Random(args.seed)
    k = min(args.gate_rounds, len(rounds))
    print(
        f"\n{args.draws} gates of {k} rounds drawn from {len(rounds)} (alpha {settings.alpha:.4g}, "
        f"metrics {', '.join(settings.metrics)}, Holm): base {base} against"
    )
    summary = {}
    for name in arm_names[1:]:
        verdicts: dict[str, int] = {}
        fails = 0
        for _ in range(args.draws):
            picks = sorted(rng.sample(rounds, k))

            def side(arm: str, picks: list[int] = picks) -> list[Sample]:
                return [
                    Sample(index=i, status=by_arm[arm][r]["status"], metrics=by_arm[arm][r]["metrics"])
                    for i, r in enumerate(picks)
                ]

            cell = CellInfo(make_cell(**cell_values).as_dict())
            (result,) = compare_family([(cell, side(base), side(name))], settings=settings)
            verdicts[result.verdict.value] = verdicts.get(result.verdict.value, 0) + 1
            if result.verdict is Verdict.REGRESSION or (
                result.verdict is Verdict.CHANGED and settings.changed_fails
            ):
                fails += 1
        size = {}
        for figure in settings.metrics:
            b = [by_arm[base][r]["metrics"].get(figure) for r in rounds]
            h = [by_arm[name][r]["metrics"].get(figure) for r in rounds]
            b_ok = [float(v) for v in b if v is not None]
            h_ok = [float(v) for v in h if v is not None]
            if b_ok and h_ok:
                size[figure] = statistics.median(h_ok) / statistics.median(b_ok) - 1
        summary[name] = {"fails": fails, "draws": args.draws, "verdicts": verdicts, "effect": size}
        tally = ", ".join(f"{v} {n}" for n, v in sorted(verdicts.items()))
        effect = ", ".join(f"{f} {v:+.0%}" for f, v in size.items())
        print(f"  {name} (over all rounds: {effect}): fails {fails} of {args.draws} ({tally})")
    (out / f"analysis-k{k}-f{args.family_tests or own}.json").write_text(json.dumps(summary, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run interleaved rounds of every arm")
    r.add_argument("arms", nargs="+", help="NAME or NAME:KEY=VALUE,...; the first is the base")
    r.add_argument("--rounds", type=int, default=10)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--start", default="auto", choices=("cold", "snapshot", "auto"))
    r.add_argument(
        "--cell", default="", help="KEY=VALUE,... over the default cell (fio on qcow2, virtio-blk)"
    )
    a = sub.add_parser("analyse", help="derive gate verdicts from the rounds")
    a.add_argument("out", type=Path)
    a.add_argument("--gate-rounds", type=int, default=8)
    a.add_argument("--draws", type=int, default=200)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--bootstrap", type=int, default=500, help="bootstrap resamples per comparison")
    a.add_argument(
        "--metrics",
        default="",
        help="gate on these metrics (comma-separated) instead of the gate spec's",
    )
    a.add_argument(
        "--no-counters",
        dest="counters",
        action="store_false",
        help="no counters: what the metrics catch alone",
    )
    a.add_argument("--family-tests", type=int, default=0, help="scale alpha to a family of N tests")
    args = parser.parse_args()
    if args.command == "run":
        run(args)
    else:
        analyse(args)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
