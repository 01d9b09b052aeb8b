"""A crossed pair's swapper, a process of its own: two processes swapped between two CPUs.

    python -m harness.sample.swapper CPU_A CPU_B PERIOD_S PID_A PID_B

Every ``PERIOD_S`` it moves every thread of ``PID_A`` onto one CPU and every thread of ``PID_B``
onto the other, the other way round the next time.  A line ``leave PID`` on its input ends that
process's part: it answers with one line of JSON, what the swapping gave it (the time on each
CPU, the swaps, whether every move took), and swaps the other on alone; it exits when both have
left or its input ends.  It runs under SCHED_FIFO where the host lets it (root), and in a process
of its own, so that no thread of the harness (holding Python's lock while the pair's QEMU, at a
higher priority than the harness, takes the CPUs) can hold a swap back.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path

# its real-time priority where allowed: a swap comes on time however busy the CPUs are (a swap
# takes microseconds, then it sleeps)
PRIORITY = 10


def each_thread(pid: int, act: Callable[[int], object], proc: Path = Path("/proc")) -> bool:
    """``act`` on every thread of process ``pid``; False when it failed on one (the thread may not
    be ours to change) or the process is gone.  A thread that ended meanwhile is no failure."""
    try:
        tids = [int(t.name) for t in (proc / str(pid) / "task").iterdir()]
    except (OSError, ValueError):
        return False
    ok = True
    for tid in tids:
        try:
            act(tid)
        except ProcessLookupError:
            continue
        except OSError:
            ok = False
    return ok


def pin_process(pid: int, cpu: int, proc: Path = Path("/proc")) -> bool:
    """Every thread of process ``pid`` onto ``cpu`` (see :func:`each_thread`)."""
    return each_thread(pid, lambda tid: os.sched_setaffinity(tid, (cpu,)), proc)


def swap(cpus: tuple[int, int], period_s: float, pids: tuple[int, int]) -> None:
    """Swap ``pids`` between ``cpus`` until both have left (``leave PID`` lines on stdin)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
    except (AttributeError, OSError):
        pass  # not root: its swaps may come late on a busy CPU
    on = {pid: [0.0, 0.0] for pid in pids}
    swaps = dict.fromkeys(pids, 0)
    ok = dict.fromkeys(pids, True)
    running = list(pids)
    placed: dict[int, int] = {}
    turn = 0
    last = time.monotonic()
    pending = b""
    stdin = sys.stdin.fileno()
    while running:
        now = time.monotonic()
        for pid, slot in placed.items():
            if pid in running:
                on[pid][slot] += now - last
        last = now
        # the first moved lands on the CPU its partner still holds and waits there until the
        # partner is moved too: first one side, then the other, so that neither always waits
        for pid in running if turn % 2 == 0 else reversed(running):
            slot = (pids.index(pid) + turn) % 2
            ok[pid] = pin_process(pid, cpus[slot]) and ok[pid]
            swaps[pid] += 1
            placed[pid] = slot
        turn += 1
        ready, _, _ = select.select([stdin], [], [], period_s)
        if not ready:
            continue
        chunk = os.read(stdin, 4096)
        if not chunk:
            return  # the harness is gone
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            word, _, arg = line.decode("ascii", "replace").partition(" ")
            if word != "leave" or not arg.strip().isdigit() or int(arg) not in running:
                continue
            pid = int(arg)
            now = time.monotonic()
            on[pid][placed.get(pid, 0)] += now - last if pid in placed else 0.0
            running.remove(pid)
            report = {"pid": pid, "on_cpu_s": on[pid], "swaps": swaps[pid], "moves_ok": ok[pid]}
            sys.stdout.write(json.dumps(report) + "\n")
            sys.stdout.flush()


def main(argv: list[str]) -> int:
    try:
        cpu_a, cpu_b, period, pid_a, pid_b = argv
        swap((int(cpu_a), int(cpu_b)), float(period), (int(pid_a), int(pid_b)))
    except ValueError:
        sys.stderr.write("usage: python -m harness.sample.swapper CPU_A CPU_B PERIOD_S PID_A PID_B\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
