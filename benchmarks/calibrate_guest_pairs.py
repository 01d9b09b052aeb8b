"""Guest cells taken in pairs: the A/A spread of each figure's pair ratio in each mode, and the
size an injected slowdown reads as, from long runs resampled into many gates.

    # run: every round takes, for each arm, a pair (base, arm) in each mode
    .venv/bin/python benchmarks/calibrate_guest_pairs.py run --cell workload=dd --rounds 12 [--host-disk period-hdd] \\
        --modes apart,together --out OUT aa "thr:throttling.bps-write=N"
    # the spreads, the effects and the verdicts of gates drawn from the rounds (8 pairs, then one
    # more while unclear up to 12, as the gate's rounds and max_rounds)
    .venv/bin/python benchmarks/calibrate_guest_pairs.py analyse OUT --gate-rounds 8 \\
        --max-gate-rounds 12 --draws 200

An *arm* is ``NAME[@MODE+MODE]`` or ``NAME[@MODES]:KEY=VALUE,...`` (its own modes, else
``--modes``) as in ``benchmarks/calibrate_io.py`` (``cache=MODE``, ``aio=MODE``, a cell's own
size key such as ``dd_mib=142``, ``spin_us=N`` or ``delay_us=N`` for a shim preloaded into the
arm's QEMU that spins or sleeps before every read, write and flush its IO threads send, or a
``-drive`` option of the disk under test); an arm with no option is an A/A arm.  Each pair is
base's sample and the arm's, taken

* ``apart``: one after the other, the order drawn (each sample alone on the host, as the
  gate's interleaved rounds take them): the arm's size *alone*;
* ``together``: at the same moment on one CPU (:class:`harness.sample.pairing.Pairing`, the very
  code a gate's guest pair runs: both QEMU pinned, the workload sent when both guests are ready);
* ``crossed``: at the same moment, each on a CPU of its own, the two swapped every few
  milliseconds (``Mode.CROSSED``).

``analyse`` prints per mode and figure the standard deviation of the pairs' log ratio for the A/A
arms (what a paired test works with), every arm's median pair ratio per mode (the shrink of an
effect taken together against its size alone), and then draws ``--draws`` subsets of
``--gate-rounds`` pairs and judges them as the gate judges a cell (:func:`harness.compare.compare_metric`,
the pairs' tests for ``together``, Holm's strictest level of a family of ``--family-tests``): the
share of regressions and unchanged.  Draws share pairs: the rates describe this run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness.compare import Settings, Verdict, compare_metric
from harness.compare.metric import Alone
from harness.compare.paired import bootstrap_pairs_ci, pairs_ratio
from harness.compare.rules import OWN_CPU_FIGURES, taken_together
from harness.guest import build_guest
from harness.host import diskgroups, hostdisk, workdir
from harness.rounds.cell import new_run_id
from harness.sample.guest_sampler import RunOptions, run_sample
from harness.sample.pairing import PAIR_NICE, SWAP_S, Mode, Pairing
from harness.spec import make_cell
from harness.subject.binaries import QEMU, QEMU_IMG, Binaries

sys.path.insert(0, str(Path(__file__).parent))
from calibrate_replay import delayed_qemu_io

CELL: dict[str, Any] = {
    "format": "qcow2",
    "cache": "writeback",
    "interface": "ide",
    "aio": "threads",
    "workload": "dd",
    "dd_mib": 128,
}
# the gate's fio parameters, for --cell workload=fio
FIO = {"fio_target": "raw", "fio_size_mib": 16, "fio_ios": 1000, "fio_fsync_ios": 100}
FIGURES = (
    "total_s",
    "host.workload_s",
    "host.workload_alone_s",
    "host.workload_cpu_s",
    "dev.write_p90_ms",
    "fio.raw-rand-write-qd1.clat_p50_ms",
    "fio.raw-rand-read-qd1.clat_p50_ms",
    "fio.raw-fsync-write.clat_p50_ms",
)
MODES = ("apart", "together", "crossed")


def parse_cell(text: str) -> dict[str, Any]:
    cell = dict(CELL)
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--cell {text!r}: write KEY=VALUE,..., e.g. workload=dd,dd_mib=64")
        cell[key] = int(value) if value.isdigit() else value
    if cell["workload"] == "fio":
        cell = {**{k: v for k, v in cell.items() if k != "dd_mib"}, **FIO, **cell}
        cell.pop("dd_mib", None)
    return cell


# keys of an arm that change the cell itself (its workload or its drive's aio), not a drive option
CELL_KEYS = ("dd_mib", "fio_ios", "fio_size_mib", "aio")
# keys of an arm that preload a shim into its QEMU: every read, write and flush its IO threads send
# to the host first sleeps (a wait) or spins (CPU time) this many microseconds
SHIM_KEYS = ("delay_us", "spin_us")


def parse_arm(text: str, cache: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """``NAME[@MODES]:KEY=VALUE,...`` -> (name, cache, options): ``cache=MODE``, a cell's own
    key (``dd_mib=141``: a larger workload, a slowdown the guest's CPU pays) or a drive option."""
    name, _, rest = text.partition(":")
    name = name.partition("@")[0]
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


def arm_cell(base_cell: dict[str, Any], cache: str, options: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    own = {k: int(v) if v.isdigit() else v for k, v in options if k in CELL_KEYS}
    return {**base_cell, "cache": cache, **own}


def drive_options(options: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in options if k not in CELL_KEYS + SHIM_KEYS)


def arm_binaries(options: tuple[tuple[str, str], ...], tools: Path) -> Binaries:
    """The QEMU an arm runs: the one on PATH, or it with the delay shim preloaded (``SHIM_KEYS``)."""
    shim = {k: int(v) for k, v in options if k in SHIM_KEYS}
    if not shim:
        return Binaries.on_path()
    qemu = shutil.which(QEMU) or QEMU
    wrapper = delayed_qemu_io(tools, qemu, shim.get("delay_us", 0), shim.get("spin_us", 0))
    return Binaries(qemu=wrapper, qemu_img=QEMU_IMG)


def run(args: argparse.Namespace) -> None:
    base_cell = parse_cell(args.cell)
    arms = [parse_arm(a, str(base_cell["cache"])) for a in args.arms]
    modes = [m for m in args.modes.split(",") if m]
    for mode in modes:
        if mode not in MODES:
            raise SystemExit(f"--modes {args.modes!r}: use {', '.join(MODES)}")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = out / "samples.jsonl"
    done = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    (out / "cell.json").write_text(json.dumps(base_cell))
    guest = build_guest(log=lambda _m: None)
    rng = random.Random(args.seed + len(done))
    first = max((d["round"] for d in done), default=-1) + 1
    lock = threading.Lock()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="diskbench-calpairs-", dir="/var/tmp"))
        (Path(tmp) / "work").mkdir()
        # the shim's wrappers where QEMU's own account can run them
        tools = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="diskbench-calshim-", dir="/var/tmp"))
        )
        tools.chmod(0o755)
        # the work dir on the host disk model (built for the run, torn down after it): each
        # guest's image lies on it, each QEMU with a disk of the model to itself, as in a gate
        stack.enter_context(
            workdir.hold(Path(tmp) / "results", Path(tmp) / "work", host_disk=args.host_disk, progress=print)
        )
        # the samples' images: on the model's mount point (the work dir itself for native)
        images_dir = hostdisk.model_dir(Path(tmp) / "work", args.host_disk)
        if (args.host_disk != hostdisk.NATIVE) != (diskgroups.model_device(images_dir) is not None):
            raise SystemExit(f"--host-disk {args.host_disk}: the images' dir is not on the model")

        def sample(
            number: int,
            arm: str,
            cache: str,
            options: tuple[tuple[str, str], ...],
            mode: str,
            together: Pairing | None,
        ) -> None:
            cell = cells[(cache, options)]
            opts = RunOptions(
                binaries=arm_binaries(options, tools),
                accel="tcg",
                accel_reason="calibration",
                work_dir=images_dir,
                results_dir=Path(tmp) / "results",
                run_id=new_run_id(),
                drive_options=drive_options(options),
                start="auto",
            )
            opts.work_dir.mkdir(parents=True, exist_ok=True)
            try:
                s = run_sample(
                    cell,
                    guest,
                    opts,
                    number,
                    Path(tmp) / "logs" / f"{number}-{mode}-{arm}",
                    together=together,
                )
            finally:
                if together is not None:
                    together.abort()
            entry = {
                "round": number,
                "arm": arm,
                "mode": mode,
                "status": s.status,
                "reason": s.reason,
                "together": taken_together(s),
                "metrics": {k: v for k, v in s.metrics.items() if k in FIGURES},
                "cpu": s.host.get("cpu"),
                "crossed": (s.host.get("together") or {}).get("crossed"),
            }
            with lock, log.open("a") as fh:
                fh.write(json.dumps(entry) + "\n")

        base = ("base", str(base_cell["cache"]), ())
        # made here, not in the pair's threads: the workload registry loads on first use
        cells = {(c, o): make_cell(**arm_cell(base_cell, c, o)) for _n, c, o in [base, *arms]}
        for number in range(first, first + args.rounds):
            t0 = time.monotonic()
            jobs = [
                (arm, mode)
                for arm, text in zip(arms, args.arms, strict=True)
                for mode in arm_modes(text, modes)
            ]
            rng.shuffle(jobs)
            for arm, mode in jobs:
                pair = [base, arm]
                rng.shuffle(pair)
                if mode == "apart":
                    for name, cache, options in pair:
                        sample(number, f"{arm[0]}/{name}", cache, options, mode, None)
                    continue
                pairing = Pairing(
                    mode=Mode.CROSSED if mode == "crossed" else Mode.SHARED,
                    swap_s=args.swap_ms / 1000,
                    nice=args.nice,
                )
                threads = [
                    threading.Thread(target=sample, args=(number, f"{arm[0]}/{n}", c, o, mode, pairing))
                    for n, c, o in pair
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            print(f"round {number}: {time.monotonic() - t0:.0f} s", flush=True)


def arm_modes(text: str, modes: list[str]) -> list[str]:
    """The modes an arm runs in: ``NAME@MODE+MODE:...`` names its own, else ``--modes``."""
    name = text.partition(":")[0]
    if "@" not in name:
        return modes
    own = name.partition("@")[2].split("+")
    for mode in own:
        if mode not in MODES:
            raise SystemExit(f"arm {text!r}: mode {mode!r}: use {', '.join(MODES)}")
    return own


def pairs(entries: list[dict[str, Any]], arm: str, mode: str, figure: str) -> tuple[list[float], list[float]]:
    """Base's and the arm's values of ``figure``, paired by round (rounds where both are ok)."""
    got: dict[int, dict[str, float]] = {}
    for e in entries:
        if e["mode"] != mode or not e["arm"].startswith(f"{arm}/") or e["status"] != "ok":
            continue
        if mode != "apart" and not e["together"]:
            continue
        value = e["metrics"].get(figure)
        if isinstance(value, (int, float)) and value > 0:
            got.setdefault(e["round"], {})[e["arm"].split("/", 1)[1]] = float(value)
    rounds = sorted(r for r, v in got.items() if "base" in v and len(v) == 2)
    other = [k for r in rounds for k in got[r] if k != "base"]
    name = other[0] if other else arm
    return [got[r]["base"] for r in rounds], [got[r][name] for r in rounds]


def analyse(args: argparse.Namespace) -> None:
    entries = [json.loads(line) for line in (args.out / "samples.jsonl").read_text().splitlines()]
    arms = sorted({e["arm"].split("/", 1)[0] for e in entries})
    modes = [m for m in MODES if any(e["mode"] == m for e in entries)]
    failed = [e for e in entries if e["status"] != "ok"]
    print(f"{len(entries)} samples, {len(failed)} failed; arms {', '.join(arms)}; modes {', '.join(modes)}")
    for e in failed[:5]:
        print(f"  failed: {e['arm']} {e['mode']} round {e['round']}: {e['reason']}")
    print("\nper arm, mode, figure: pairs, median pair ratio (%), sd of the log ratio (%)")
    for arm in arms:
        for mode in modes:
            for figure in args.figures.split(","):
                b, h = pairs(entries, arm, mode, figure)
                if len(b) < 2:
                    continue
                logs = [math.log(y / x) for x, y in zip(b, h, strict=True)]
                print(
                    f"  {arm:>8} {mode:>8} {figure:<36} n={len(b):>2} "
                    f"{(math.exp(statistics.median(logs)) - 1) * 100:+6.1f} % sd {statistics.stdev(logs) * 100:5.1f} %"
                )
    settings = Settings(metrics=("total_s",), comparisons=args.family_tests)
    if args.crossed_reads:
        low, _, high = args.crossed_reads.partition(",")
        settings = dataclasses.replace(settings, crossed_reads=(float(low), float(high)))
    rng = random.Random(args.seed)
    most = max(args.gate_rounds, args.max_gate_rounds)
    print(
        f"\ngates of {args.gate_rounds}-{most} pairs (one more while unclear), {args.draws} draws, "
        f"a family of {args.family_tests} tests: regression / unchanged / other"
    )
    for arm in arms:
        for mode in modes:
            for figure in args.figures.split(","):
                b, h = pairs(entries, arm, mode, figure)
                if len(b) < args.gate_rounds:
                    continue
                tally = {Verdict.REGRESSION: 0, Verdict.UNCHANGED: 0}
                other = 0
                taken: list[int] = []
                reported: list[float] = []
                most = min(max(args.gate_rounds, args.max_gate_rounds), len(b))
                for _ in range(args.draws):
                    picks = rng.sample(range(len(b)), most)
                    # as the gate: judged after its first rounds, then one pair more while unclear
                    for n in range(args.gate_rounds, most + 1):
                        r = compare_metric(
                            figure,
                            [b[i] for i in picks[:n]],
                            [h[i] for i in picks[:n]],
                            settings=settings,
                            paired=True,
                            together=mode != "apart",
                            alone=Alone(
                                args.shrink if mode == "together" and figure not in OWN_CPU_FIGURES else 1.0,
                                # a crossed pair: unchanged only where 5 % alone could not hide
                                settings.crossed_reads if mode == "crossed" else None,
                            ),
                        )
                        if r.verdict in tally:
                            break
                    taken.append(n)
                    reported.append(r.ratio)
                    if r.verdict in tally:
                        tally[r.verdict] += 1
                    else:
                        other += 1
                print(
                    f"  {arm:>8} {mode:>8} {figure:<36} {tally[Verdict.REGRESSION]:>4} / "
                    f"{tally[Verdict.UNCHANGED]:>4} / {other:>4}; pairs {min(taken)}-{max(taken)} "
                    f"(mean {statistics.mean(taken):.1f}); reported {(min(reported) - 1) * 100:+.1f} … "
                    f"{(max(reported) - 1) * 100:+.1f} % (median {(statistics.median(reported) - 1) * 100:+.1f} %)"
                )


def sizes(args: argparse.Namespace, entries: list[dict[str, Any]], arms: list[str]) -> None:
    """Each arm's size alone (its pairs taken apart) beside what the gate reports of it together
    (the pairs' ratio scaled by the shrink) and the bound: between the measured change and it."""
    print("\nsize alone (apart, 95 % CI) against the size reported together (measured, x shrink)")
    for arm in arms:
        for figure in args.figures.split(","):
            apart = pairs(entries, arm, "apart", figure)
            if len(apart[0]) < 2:
                continue
            alone = pairs_ratio(*apart)
            lo, hi = bootstrap_pairs_ci(*apart, confidence=0.95, n=2000, seed=1)
            for mode in ("together", "crossed"):
                together = pairs(entries, arm, mode, figure)
                if len(together[0]) < 2:
                    continue
                measured = pairs_ratio(*together)
                k = args.shrink if mode == "together" and figure not in OWN_CPU_FIGURES else 1.0
                reported = math.exp(math.log(measured) * k)
                print(
                    f"  {arm:>8} {figure:<36} alone {(alone - 1) * 100:+6.1f} % ({(lo - 1) * 100:+.1f} … "
                    f"{(hi - 1) * 100:+.1f}), n={len(apart[0])}; {mode} {(measured - 1) * 100:+6.1f} %, "
                    f"reported {(reported - 1) * 100:+6.1f} %, n={len(together[0])}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--cell", default="")
    r.add_argument("--rounds", type=int, default=10)
    r.add_argument("--modes", default="apart,together")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--nice", type=int, default=PAIR_NICE, help="a pair's QEMU processes' nice value")
    r.add_argument("--swap-ms", type=float, default=SWAP_S * 1000, help="a crossed pair's swap period")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--host-disk", default="native", help="the host disk model the images lie on")
    r.add_argument("arms", nargs="+")
    a = sub.add_parser("analyse")
    a.add_argument("out", type=Path)
    a.add_argument("--gate-rounds", type=int, default=8)
    a.add_argument(
        "--max-gate-rounds",
        type=int,
        default=0,
        help="as the gate's max_rounds: a draw still unclear after --gate-rounds pairs takes one more, up to this",
    )
    a.add_argument("--draws", type=int, default=200)
    a.add_argument(
        "--crossed-reads",
        default="",
        metavar="LO,HI",
        help="a spec's crossed_reads (default: the default gate's)",
    )
    a.add_argument("--family-tests", type=int, default=16)
    a.add_argument("--shrink", type=float, default=2.0)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--figures", default=",".join(FIGURES))
    args = parser.parse_args()
    if args.command == "run":
        run(args)
    else:
        analyse(args)
        entries = [json.loads(line) for line in (args.out / "samples.jsonl").read_text().splitlines()]
        sizes(args, entries, sorted({e["arm"].split("/", 1)[0] for e in entries}))


if __name__ == "__main__":
    main()
