"""The gate's verdicts under each test of ``Settings.test``, on the same calibration data and draws.

    # a session of benchmarks/calibrate_io.py (samples.jsonl): gates resampled from its rounds
    .venv/bin/python benchmarks/reanalyse_verdicts.py io OUT --rounds 5,6,8,10,12 --draws 200 \\
        --family-tests 31
    # the output of benchmarks/calibrate_gate.py: every gate run's records compared again
    .venv/bin/python benchmarks/reanalyse_verdicts.py gate OUT

``io`` draws, for every number of rounds ``k`` given, ``--draws`` subsets of ``k`` rounds of the
session (the same subsets for every test: one ``random.Random(--seed)`` per ``k``) and compares
the base arm with every other arm exactly as ``calibrate_io.py analyse`` does (the default gate
spec's metrics and counters, Holm, alpha scaled to a family of ``--family-tests``), once per test.
A draw that fails the gate (regression or changed) is a false alarm on an A/A arm and a catch on
an injected one; a draw whose cell is inconclusive would have asked the gate for more rounds.
For each arm and test it prints the fail rate and the decided rate per ``k``, and the rounds the
gate needs: the smallest ``k`` whose fail rate (injected arms) or decided rate (A/A arms) reaches
``--decide`` (0.9).  ``gate`` recompares every ``aa-*`` and ``inj*`` run's records under each test.
Results go to ``OUT/reanalysis-*.json`` too.

Figures on a 2-core TCG host (fio policy cell, snapshot start), 200 draws per k, the same draws
for both tests: session 1 (``run --rounds 12 --seed 1`` then ``--rounds 18 --seed 2``: 30 rounds
of base, aa, iops5k (``throttling.iops-write=5000``, above the QD1 rate: another A/A), wt
(``cache=writethrough``)); session 2 (``run --rounds 20 --seed 3``: base, aa2, iops3k, iops2k,
bps8m (``throttling.bps-write=8388608``)).  False alarms on aa, iops5k and aa2: 0 of 200 at
every k under both tests, with or without counters.  Catches (fails of 200, mann-whitney →
rank-yuen) with counters: wt k=5 0→47, 6 0→168, 7 0→174, 8+ 200→200; iops2k 5 0→59, 6 0→145,
7 0→173, 8+ 200→200; bps8m 5 0→30, 6 0→144, 7 0→167, 8+ 200→200; iops3k 5 0→11, 6 0→22,
7 0→10, 8 111→112, 10 180→180, 12 200→200.  Rounds to catch 90 %: 8, 8, 8, 10 under both; on
the gated metrics alone (``--no-counters``) iops2k and bps8m need 7 instead of 8.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.compare import Settings, Verdict, compare_family, compare_records  # noqa: E402
from harness.compare.settings import TESTS  # noqa: E402
from harness.gate import GATE_SPEC, load_gate_spec, settings_for  # noqa: E402
from harness.record import CellInfo, Sample, gate_records, scan_records  # noqa: E402
from harness.spec import make_cell  # noqa: E402

# calibrate_io.py's default cell, when the session predates its cell.json
DEFAULT_CELL: dict[str, Any] = {
    "format": "qcow2",
    "interface": "virtio-blk",
    "aio": "threads",
    "workload": "fio",
    "fio_target": "raw",
    "fio_size_mib": 16,
    "fio_ios": 1000,
    "fio_fsync_ios": 100,
}


def fails(verdict: Verdict, settings: Settings) -> bool:
    return verdict is Verdict.REGRESSION or (verdict is Verdict.CHANGED and settings.changed_fails)


def io_settings(args: argparse.Namespace, test: str) -> Settings:
    """The settings calibrate_io.py's ``analyse`` uses, with ``test``."""
    spec = settings_for(load_gate_spec(GATE_SPEC), Settings())
    counters = spec.counters if args.counters else ()
    own = len(spec.metrics) + len(counters)
    scale = own / args.family_tests if args.family_tests else 1.0
    return Settings(
        metrics=spec.metrics,
        counters=counters,
        min_effect=spec.min_effect,
        min_effect_by_metric=spec.min_effect_by_metric,
        alpha=spec.alpha * scale,
        changed_fails=spec.changed_fails,
        bootstrap=args.bootstrap,
        test=test,
    )


def io(args: argparse.Namespace) -> dict[str, Any]:
    out: Path = args.out
    entries = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    arms = [a.partition(":")[0] for a in json.loads((out / "arms.json").read_text())]
    by_arm: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in arms}
    for e in entries:
        by_arm.setdefault(e["arm"], {})[e["round"]] = e
    rounds = sorted(set.intersection(*(set(by_arm[a]) for a in arms)))
    cell_file = out / "cell.json"
    cell = CellInfo(
        make_cell(**(json.loads(cell_file.read_text()) if cell_file.exists() else DEFAULT_CELL)).as_dict()
    )
    base = arms[0]
    ks = [k for k in (int(x) for x in args.rounds.split(",")) if k <= len(rounds)]
    settings = {test: io_settings(args, test) for test in TESTS}
    some = settings[TESTS[0]]
    print(
        f"{out}: {len(rounds)} complete rounds of arms {', '.join(arms)}; base {base}; "
        f"{args.draws} draws per k (seed {args.seed}), alpha {some.alpha:.4g} "
        f"(0.01 over a family of {args.family_tests or 'this cell'}), metrics {', '.join(some.metrics)}, "
        f"counters {', '.join(some.counters) or 'none'}",
        flush=True,
    )
    result: dict[str, Any] = {"rounds": len(rounds), "arms": arms, "draws": args.draws, "by_arm": {}}
    for name in arms[1:]:
        per_test: dict[str, dict[int, dict[str, int]]] = {test: {} for test in TESTS}
        for k in ks:
            rng = random.Random(f"{args.seed}-{k}")
            for test in TESTS:
                per_test[test][k] = {"fails": 0, "decided": 0}
            for _ in range(args.draws):
                picks = sorted(rng.sample(rounds, k))

                def side(arm: str, picks: list[int] = picks) -> list[Sample]:
                    return [
                        Sample(index=i, status=by_arm[arm][r]["status"], metrics=by_arm[arm][r]["metrics"])
                        for i, r in enumerate(picks)
                    ]

                for test in TESTS:
                    (cell_result,) = compare_family([(cell, side(base), side(name))], settings=settings[test])
                    tally = per_test[test][k]
                    tally["fails"] += fails(cell_result.verdict, settings[test])
                    tally["decided"] += cell_result.verdict is not Verdict.INCONCLUSIVE
        result["by_arm"][name] = {test: {str(k): v for k, v in per_test[test].items()} for test in TESTS}
        aa = name.startswith("aa")
        print(f"\n{name} ({'A/A: fails are false alarms' if aa else 'injected: fails are catches'})")
        for test in TESTS:
            cells = [
                f"k={k} fail {v['fails']}/{args.draws} decided {v['decided']}/{args.draws}"
                for k, v in per_test[test].items()
            ]
            key = "decided" if aa else "fails"
            need = next((k for k, v in per_test[test].items() if v[key] >= args.decide * args.draws), None)
            result["by_arm"][name][test]["rounds_needed"] = need
            print(
                f"  {test:13s} " + "; ".join(cells) + f" | rounds to {key} {args.decide:.0%}: {need or '>'}"
            )
    return result


def gate(args: argparse.Namespace) -> dict[str, Any]:
    spec = load_gate_spec(args.spec)
    result: dict[str, Any] = {}
    for run in sorted([*args.out.glob("aa-*"), *args.out.glob("inj*")]):
        sides = {
            side: list(scan_records(gate_records(run, side).directory).values()) for side in ("base", "head")
        }
        line = {}
        for test in TESTS:
            settings = settings_for(spec, Settings(test=test))
            cells = compare_records(sides["base"], sides["head"], settings=settings)
            line[test] = {
                "fails": any(fails(c.verdict, settings) for c in cells),
                "cells": {c.cell_id: c.verdict.value for c in cells},
            }
        result[run.name] = line
        print(f"{run.name}: " + "; ".join(f"{t} {'FAIL' if v['fails'] else 'pass'}" for t, v in line.items()))
    for prefix in sorted({name.rsplit("-", 1)[0] for name in result}):
        runs = [v for k, v in result.items() if k.rsplit("-", 1)[0] == prefix]
        print(
            f"{prefix}: "
            + ", ".join(f"{t} fails {sum(r[t]['fails'] for r in runs)}/{len(runs)}" for t in TESTS)
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    i = sub.add_parser("io", help="resample a calibrate_io.py session into gates, under each test")
    i.add_argument("out", type=Path)
    i.add_argument("--rounds", default="5,6,8,10,12", help="gate sizes k to draw (comma-separated)")
    i.add_argument("--draws", type=int, default=200)
    i.add_argument("--seed", type=int, default=1)
    i.add_argument("--bootstrap", type=int, default=500, help="bootstrap resamples per comparison")
    i.add_argument("--family-tests", type=int, default=31, help="scale alpha to a family of N tests")
    i.add_argument("--no-counters", dest="counters", action="store_false")
    i.add_argument("--decide", type=float, default=0.9, help="the rate at which a k decides an arm")
    g = sub.add_parser("gate", help="recompare the gate runs of a calibrate_gate.py output")
    g.add_argument("out", type=Path)
    g.add_argument("--spec", type=Path, default=ROOT / "benchmarks" / "gate-calibration.toml")
    args = parser.parse_args()
    t0 = time.monotonic()
    result = io(args) if args.command == "io" else gate(args)
    name = f"reanalysis-{args.command}{'' if getattr(args, 'counters', True) else '-no-counters'}.json"
    (args.out / name).write_text(json.dumps({"argv": sys.argv[1:], **result}, indent=2))
    print(f"\n{args.out / name} ({time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
