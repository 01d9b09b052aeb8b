"""The replay cells' error rates, from long interleaved replay runs resampled into many gates.

    # run: every round replays the stream once per arm, arms in a random order
    .venv/bin/python benchmarks/calibrate_replay.py run --stream STREAM.json --rounds 60 \\
        --passes 4 --out OUT base aa "thr10:throttling.bps-total=N" "wt:cache=writethrough" \\
        "d10:delay_us=N" ...
    # derive gate verdicts: base against every other arm, on random subsets of the rounds
    .venv/bin/python benchmarks/calibrate_replay.py analyse OUT --gate-rounds 24 --draws 400

An *arm* is ``NAME`` or ``NAME:KEY=VALUE,...``: ``cache=MODE`` sets the cell's cache mode,
``spin_us=N`` waits N microseconds on the clock (the CPU kept) and
``delay_us=N`` sleeps N microseconds before every read, write and flush qemu-io's block layer sends
to the host (a preloaded shim around ``pread``/``pwrite``/``preadv``/``pwritev``/
``fdatasync``/``fsync``: what a device-mapper ``delay`` target under the work dir would do
with ``cache=none``, where every request reaches the device; this host has no device-mapper
in its kernel), any other key is a ``-drive`` option of the disk (``throttling.bps-total=N``),
applied by the replay as the policy's would be (a throttle filter node).  The first arm is
the base; an arm with no option is an A/A arm.

``run`` replays ``--stream`` (a recorded stream file, ``RESULTS/streams/KEY.json``) on the
cell ``--cell`` (default: qcow2, cache=none, aio=threads, the stream's disk size) through
:func:`harness.sample.replay.replay.replay`, the very code a replay sample runs, ``--passes`` passes
per sample (each a fresh image and a qemu-io of its own), and appends every sample with each
pass's wall time to ``OUT/samples.jsonl`` (resumable).  ``analyse`` reports, per figure, the
A/A spread of the log ratio (paired by round) for 1 and for all passes, each arm's effect
over the whole run, and then draws ``--draws`` subsets of ``--gate-rounds`` rounds (without
replacement inside a draw) and compares base with each arm on them as the gate does
(:func:`harness.compare.compare_metric`, paired by round, the default gate spec's minimum
effect for the figure, alpha at the strictest Holm level of the default gate's family): the
share of regressions (false alarms for A/A arms, catches for the others), of ``unchanged``,
and the median of what the draw could have seen.  Draws share rounds: their verdicts are not
independent, the rates describe this run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.compare import Settings, Verdict, compare_metric
from harness.compare.power import could_see
from harness.gate import GATE_SPEC, load_gate_spec, settings_for
from harness.sample.pairing import Mode
from harness.sample.replay.replay import Pairing, Replayer, replay
from harness.sample.replay.stream import parse_stream
from harness.spec import make_cell
from harness.subject.binaries import QEMU_IMG

FIGURES = (
    "replay.wall_s",
    "replay.io_s",
    "replay.write_mean_ms",
    "replay.write_p50_ms",
    "replay.write_p25_ms",
    "replay.write_p10_ms",
    "replay.read_p10_ms",
    "replay.read_p50_ms",
)

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
static long delay_ns, spin_ns;
__attribute__((constructor)) static void init(void) {
    const char *v = getenv("DISKBENCH_DELAY_US");
    const char *w = getenv("DISKBENCH_SPIN_US");
    delay_ns = v ? atol(v) * 1000L : 0;
    spin_ns = w ? atol(w) * 1000L : 0;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}
static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
static void pause_(void) {
    if (spin_ns > 0) {
        long until = now_ns() + spin_ns;
        while (now_ns() < until) {
        }
    }
    if (delay_ns > 0) {
        struct timespec t = {delay_ns / 1000000000L, delay_ns % 1000000000L};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
    }
}
#define WRAP(ret, name, params, args) \
    ret name params { static ret (*real) params; if (!real) real = dlsym(RTLD_NEXT, #name); \
                      pause_(); return real args; }
WRAP(ssize_t, pread64, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
WRAP(ssize_t, pwrite64, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
WRAP(ssize_t, preadv64, (int fd, const struct iovec *v, int c, off_t o), (fd, v, c, o))
WRAP(ssize_t, pwritev64, (int fd, const struct iovec *v, int c, off_t o), (fd, v, c, o))
WRAP(int, fdatasync, (int fd), (fd))
WRAP(int, fsync, (int fd), (fd))
"""


def parse_arm(text: str) -> tuple[str, dict[str, str]]:
    name, _, rest = text.partition(":")
    options = dict(part.split("=", 1) for part in rest.split(",") if part)
    return name, options


def delayed_qemu_io(out: Path, qemu_io: str, delay_us: int, spin_us: int = 0) -> str:
    """A wrapper that runs ``qemu_io`` (or any QEMU binary) with the delay shim preloaded (built
    once in ``out``): ``delay_us`` sleeps, ``spin_us`` waits on the clock without giving the CPU
    up, before every read, write and flush it sends to the host."""
    tools = out / "tools"
    tools.mkdir(mode=0o755, exist_ok=True)
    shim = tools / "delay2.so"
    if not shim.exists():
        source = tools / "delay.c"
        source.write_text(SHIM)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(source), "-ldl"], check=True)
    wrapper = tools / f"{Path(qemu_io).name}-delay-{delay_us}-spin-{spin_us}"
    wrapper.write_text(
        f"#!/bin/sh\nLD_PRELOAD={shim} DISKBENCH_DELAY_US={delay_us} DISKBENCH_SPIN_US={spin_us} "
        f'exec {qemu_io} "$@"\n'
    )
    wrapper.chmod(0o755)
    for path in (out, tools, shim):
        path.chmod(path.stat().st_mode | 0o755)
    return str(wrapper)


def run(args: argparse.Namespace) -> None:
    stream = parse_stream(args.stream.read_text(), source=str(args.stream))
    args.out.mkdir(parents=True, exist_ok=True)
    args.out.chmod(0o755)
    base_values = {
        "format": "qcow2",
        "cache": "none",
        "aio": "threads",
        "workload": "dd",
        "size": str(stream.disk_bytes),
        "measure": "replay",
        **dict(part.split("=", 1) for part in args.cell.split(",") if part),
    }
    arms = [parse_arm(a) for a in args.arms]
    plans = {}
    for name, options in arms:
        opts = dict(options)
        cache = opts.pop("cache", base_values["cache"])
        delay = int(opts.pop("delay_us", "0"))
        spin = int(opts.pop("spin_us", "0"))
        cell = make_cell(**{**base_values, "cache": cache})
        qemu_io = delayed_qemu_io(args.out, args.qemu_io, delay, spin) if delay or spin else args.qemu_io
        plans[name] = (cell, qemu_io, tuple(opts.items()))
    (args.out / "arms.json").write_text(json.dumps([name for name, _ in arms]))
    samples = args.out / "samples.jsonl"
    done = (
        {(d["round"], d["arm"]) for d in map(json.loads, samples.read_text().splitlines())}
        if samples.exists()
        else set()
    )
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="calrep-", dir=args.work_dir))
    work.chmod(0o755)
    started = time.monotonic()
    base_name = arms[0][0]

    def play(name: str, together: Pairing | None) -> dict[str, Any]:
        cell, qemu_io, drive_options = plans[name]
        try:
            got = replay(
                stream,
                cell,
                replayer=Replayer(qemu_io, QEMU_IMG, work, drive_options),
                passes=args.passes,
                together=together,
            )
        finally:
            if together is not None:
                together.barrier.abort()
        return {
            "figures": got.figures,
            "pass_wall_s": got.pass_wall_s,
            "together": got.passes_together,
            "crossed": got.crossed,
        }

    for number in range(1, args.rounds + 1):
        order = list(plans)
        rng.shuffle(order)
        for name in order:
            if (number, name) in done or (args.together and name == base_name):
                continue
            if not args.together:
                line = {"round": number, "arm": name, **play(name, None)}
            else:
                # the arm and a base sample of its own at the same moment, pass by pass
                barrier = Pairing(mode=Mode.CROSSED if args.crossed else Mode.SHARED)
                got: dict[str, dict[str, Any]] = {}

                def side(
                    label: str,
                    arm: str,
                    barrier: Pairing = barrier,
                    got: dict[str, dict[str, Any]] = got,
                ) -> None:
                    got[label] = play(arm, barrier)

                threads = [
                    threading.Thread(target=side, args=("base", base_name)),
                    threading.Thread(target=side, args=("arm", name)),
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                line = {"round": number, "arm": name, **got["arm"], "base": got["base"]}
            with samples.open("a") as fh:
                fh.write(json.dumps(line) + "\n")
        elapsed = time.monotonic() - started
        print(f"round {number}/{args.rounds}: {elapsed:.0f} s", file=sys.stderr, flush=True)


def _load(out: Path) -> tuple[list[str], dict[str, dict[int, dict[str, Any]]]]:
    by_arm: dict[str, dict[int, dict[str, Any]]] = {}
    order: list[str] = []
    for line in (out / "samples.jsonl").read_text().splitlines():
        data = json.loads(line)
        if data["arm"] not in by_arm:
            order.append(data["arm"])
        by_arm.setdefault(data["arm"], {})[data["round"]] = data
    # the run's own order of arms (its first is the base), else a "base" arm first
    listed = out / "arms.json"
    if listed.exists():
        names = json.loads(listed.read_text())
        # (a together run has no lines of the base arm's own: they sit in each arm's line)
        order = [arm for arm in names if arm in by_arm or arm == names[0]]
    elif "base" in order:
        order = ["base", *(arm for arm in order if arm != "base")]
    return order, by_arm


def _value(sample: dict[str, Any], figure: str, passes: int) -> float:
    """``figure`` of a sample over its first ``passes`` passes (only wall times can be cut)."""
    if passes and figure == "replay.wall_s":
        return float(sum(sample["pass_wall_s"][:passes]))
    return float(sample["figures"][figure])


def analyse(args: argparse.Namespace) -> None:
    order, by_arm = _load(args.out)
    base = order[0]
    # a together run: each arm's line holds the base sample taken at the same moment
    together = any("base" in line for lines in by_arm.values() for line in lines.values())
    spec = load_gate_spec(GATE_SPEC)
    settings = settings_for(spec, Settings(bootstrap=args.bootstrap, seed=args.seed))
    family = len(spec.cells) * len(settings.metrics)
    settings = replace(settings, comparisons=family)
    rng = random.Random(args.seed)
    some = next(iter(next(iter(by_arm.values())).values()))
    passes_all = len(some["pass_wall_s"])
    how = "each arm with a base sample at the same moment" if together else "one after the other"
    print(f"arms {order}; base {base}; {passes_all} passes a sample ({how}); family of {family} tests")
    variants = [("replay.wall_s", 1), *((f, 0) for f in FIGURES)]
    for figure, passes in variants:
        label = f"{figure} ({passes or passes_all} pass{'es' if (passes or passes_all) > 1 else ''})"
        m = settings.effect_for(figure)
        print(f"\n## {label}, minimum effect {m * 100:g}%")
        for arm in order[1:]:
            if together:
                rounds = sorted(by_arm.get(arm, {}))
                b = [_value(by_arm[arm][r]["base"], figure, passes) for r in rounds]
            else:
                rounds = sorted(set(by_arm[base]) & set(by_arm[arm]))
                b = [_value(by_arm[base][r], figure, passes) for r in rounds]
            h = [_value(by_arm[arm][r], figure, passes) for r in rounds]
            logs = [math.log(y / x) for x, y in zip(b, h, strict=True)]
            effect = statistics.median(h) / statistics.median(b) - 1
            sd = statistics.stdev(logs)
            regress = unchanged = 0
            seen: list[float] = []
            n = min(args.gate_rounds, len(rounds))
            for _ in range(args.draws):
                picks = rng.sample(range(len(rounds)), n)
                result = compare_metric(
                    figure,
                    [b[i] for i in picks],
                    [h[i] for i in picks],
                    settings=settings,
                    paired=True,
                    together=together,
                )
                regress += result.verdict is Verdict.REGRESSION
                unchanged += result.verdict is Verdict.UNCHANGED
                seen.append(could_see(result, settings))
            print(
                f"{arm:>8}: {len(rounds)} rounds, effect {effect * 100:+.1f}%, sd of log ratio "
                f"{sd * 100:.1f}%; {args.draws} draws of {n}: regression {regress}/{args.draws}, "
                f"unchanged {unchanged}/{args.draws}, could see >= {statistics.median(seen) * 100:.1f}%"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("arms", nargs="+", help="NAME or NAME:KEY=VALUE,...; the first is the base")
    r.add_argument("--stream", type=Path, required=True)
    r.add_argument("--rounds", type=int, default=40)
    r.add_argument("--passes", type=int, default=4)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--cell", default="", help="cell values over the default, KEY=VALUE,...")
    r.add_argument("--qemu-io", default="/usr/bin/qemu-io")
    r.add_argument("--work-dir", default=os.environ.get("TMPDIR", "/var/tmp"))
    r.add_argument("--seed", type=int, default=1)
    r.add_argument(
        "--together",
        action="store_true",
        help="run each arm with a base sample of its own at the same moment on one CPU, pass by pass "
        "(as the gate's pairs)",
    )
    r.add_argument(
        "--crossed",
        action="store_true",
        help="with --together: each qemu-io of a pair on a CPU of its own, the two swapped every 10 ms",
    )
    a = sub.add_parser("analyse")
    a.add_argument("out", type=Path)
    a.add_argument("--gate-rounds", type=int, default=24)
    a.add_argument("--draws", type=int, default=400)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--bootstrap", type=int, default=500)
    args = parser.parse_args()
    (run if args.command == "run" else analyse)(args)


if __name__ == "__main__":
    main()
