"""Two samples taken together: base's and head's sample of a gate's pair at the same moment.

A gate runs the two sides' samples of a pair in two threads (:mod:`harness.gate.rounds`); they
share a :class:`Pairing`.  Each side gets its subject ready (a replay's qemu-io, a guest at its
ready line) and waits at the barrier for the partner's; both then start at once, so whatever slows
the host down then (its disk, the steal and the load on its CPUs) slows both alike and cancels in
their ratio.  A side that fails breaks the barrier: the other says it ran alone and the comparison
does not count the pair as taken together.  A guest side whose workload is over waits for its
partner's to end too (``ended``) before it shuts its guest down, deletes its image or writes its
record, so that nothing of one side runs while the other is still measured.  While the pair runs,
both QEMU processes run at nice :data:`PAIR_NICE` (and their autogroups), where the host lets us:
the host's other work at normal priority then takes about 1.4 % of the pair's CPUs.

Two ways to share the host (:class:`Mode`):

* ``crossed`` (the gate's guests and replay cells): each side on a CPU of its own, the two swapped every
  :data:`SWAP_S` by a process of its own at a real-time priority (:class:`Crossing`), so that each side has each CPU for
  half its time: a CPU slower than the other (one that serves the host's interrupts, a neighbour
  pinned to it) slows both alike, and neither takes CPU time from the other, so a change reads at
  its size alone, a change that makes the guest wait (a throttle) included.  A replay pass's
  qemu-io starts after the pair met: it joins the swapping once started (:meth:`Pairing.started`).
* ``shared`` (a spec's choice; pairs where the host has a single CPU): both on one CPU.  Two
  CPU-bound sides share it, so a slowdown r of one side alone reads as about r/2 in the pair's
  ratio (the faster side finishes at twice its own time, the slower runs its excess alone), and
  far less where the slower side waits (IO, a throttle): its partner runs meanwhile, and a rate
  limit bites less on a guest that runs at half speed.  The sample says how long its vCPU waited
  for a CPU (:func:`harness.sample.vm.cpu.cpu_times`): the guest's time less that wait is
  ``host.workload_alone_s``.
"""

from __future__ import annotations

import enum
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.sample.swapper import PRIORITY, each_thread

# how long a side waits for its partner to be ready before it runs alone
PARTNER_WAIT_S = 120.0
# how often a crossed pair's two processes swap CPUs: short against a workload's seconds, long
# against what a move costs (a few microseconds, and a cold cache)
SWAP_S = 0.01
# the nice value a pair's QEMU processes run at, where the host lets them (root): the host's other
# work (another job, a build) then takes little of the pair's CPUs while the two samples run
PAIR_NICE = -19
# the swapper of a crossed pair: a process of its own, at a real-time priority where allowed
SWAPPER = Path(__file__).with_name("swapper.py")
# how long a side waits for the kernel to take its autogroup's nice, which it takes at most once per
# 100 ms host-wide from a process without CAP_SYS_ADMIN, and how often it asks
AUTOGROUP_WAIT_S = 2.0
AUTOGROUP_RETRY_S = 0.02
# how long a side that leaves waits for the swapper's account of it
LEAVE_WAIT_S = 5.0


class Mode(enum.Enum):
    """How a pair's two samples share the host (see the module's text)."""

    SHARED = "shared"
    CROSSED = "crossed"


def shared_cpu() -> int | None:
    """The CPU a pair's two samples share: the last this process may run on (None: unknown)."""
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError, ValueError):
        return None


def crossed_cpus() -> tuple[int, int] | None:
    """The two CPUs a crossed pair swaps between: the last two this process may run on (None: fewer)."""
    slots = crossed_slots()
    return slots[0] if slots else None


def crossed_slots(cpus: Iterable[int] | None = None) -> list[tuple[int, int]]:
    """The CPU pairs on which crossed guest pairs can run at once (``cpus``: those this process may
    run on): two CPUs each, from the last down.  On two CPUs the one pair takes both; on more the
    first CPU (the one that most often serves the host's interrupts) is left to the host's other
    work, the harness and the swappers: 4 CPUs give one pair, 8 three, 16 seven."""
    try:
        usable = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    except (AttributeError, OSError, ValueError):
        return []
    if len(usable) > 2:
        usable = usable[1:]
    return [(usable[-2 - 2 * i], usable[-1 - 2 * i]) for i in range(len(usable) // 2)]


def raise_priority(pid: int, nice: int, proc: Path = Path("/proc")) -> bool:
    """Every thread of process ``pid`` at ``nice``, and its session's autogroup too (the scheduler
    weighs autogroups against each other before the tasks in them); threads it starts later
    inherit it.  False where the host does not let us (not root) or the process is gone."""
    ok = each_thread(pid, lambda tid: os.setpriority(os.PRIO_PROCESS, tid, nice), proc)
    deadline = time.monotonic() + AUTOGROUP_WAIT_S
    while True:
        try:
            (proc / str(pid) / "autogroup").write_text(str(nice))
        except FileNotFoundError:
            return ok  # a kernel without autogroups: the threads' nice is what counts
        except BlockingIOError:
            # without CAP_SYS_ADMIN (a container) the kernel takes one autogroup's nice per
            # 100 ms, host-wide: the partner's side was set a moment ago, this one's turn is next
            if time.monotonic() < deadline:
                time.sleep(AUTOGROUP_RETRY_S)
                continue
            return False
        except OSError:
            return False
        return ok


@dataclass(frozen=True)
class Crossed:
    """What a crossed pair's swapping gave one side: how long it ran on each CPU of the pair, how
    many swaps, whether every move took."""

    cpus: tuple[int, int]
    on_cpu_s: tuple[float, float]
    swaps: int
    ok: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "cpus": list(self.cpus),
            "on_cpu_s": [round(s, 4) for s in self.on_cpu_s],
            "swaps": self.swaps,
            "moves_ok": self.ok,
        }


class Crossing:
    """Swaps the processes of a pair between two CPUs every ``swap_s`` from the moment both have
    met until both have left: a swapper process per pair (:mod:`harness.sample.swapper`)."""

    def __init__(self, cpus: tuple[int, int], swap_s: float = SWAP_S) -> None:
        self.cpus = cpus
        self.swap_s = swap_s
        self._lock = threading.Lock()
        self._pids: list[int] = []
        self._swapper: subprocess.Popen[bytes] | None = None

    def reset(self) -> None:
        """Ready for the next pair (the last one's swapper ended)."""
        with self._lock:
            swapper, self._swapper, self._pids = self._swapper, None, []
        if swapper is not None:
            _end(swapper)

    def join(self, pid: int) -> None:
        """``pid`` takes part in the pair (before the barrier)."""
        with self._lock:
            if pid not in self._pids:
                self._pids.append(pid)

    def start(self) -> None:
        """Both have met: swapping begins (the barrier's action, in one of the two threads)."""
        with self._lock:
            if self._swapper is not None or len(self._pids) != 2:
                return
            a, b = self._pids
            self._swapper = subprocess.Popen(
                [sys.executable, str(SWAPPER), *map(str, self.cpus), repr(self.swap_s), str(a), str(b)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            try:  # real-time from its first instruction, not only once it set itself so
                os.sched_setscheduler(self._swapper.pid, os.SCHED_FIFO, os.sched_param(PRIORITY))
            except (AttributeError, OSError):
                pass  # not root: it runs at the harness's priority

    def leave(self, pid: int) -> Crossed | None:
        """``pid``'s workload is over: what its swapping gave it (None: it never started)."""
        with self._lock:
            swapper = self._swapper
            if swapper is None or pid not in self._pids or swapper.stdin is None or swapper.stdout is None:
                if pid in self._pids:
                    self._pids.remove(pid)
                return None
            try:
                swapper.stdin.write(f"leave {pid}\n".encode())
                swapper.stdin.flush()
                ready, _, _ = select.select([swapper.stdout], [], [], LEAVE_WAIT_S)
                line = swapper.stdout.readline() if ready else b""
                got = json.loads(line) if line else None
            except (OSError, ValueError):
                got = None
            self._pids.remove(pid)
        if not isinstance(got, dict) or got.get("pid") != pid:
            return Crossed(self.cpus, (0.0, 0.0), 0, False)
        on = got.get("on_cpu_s") or [0.0, 0.0]
        return Crossed(
            self.cpus, (float(on[0]), float(on[1])), int(got.get("swaps", 0)), got.get("moves_ok") is True
        )

    def end_if_left(self) -> None:
        """The swapper ended once every process of the pair has left (the next pair starts its own)."""
        with self._lock:
            if self._pids:
                return
            swapper, self._swapper = self._swapper, None
        if swapper is not None:
            _end(swapper)


def _end(swapper: subprocess.Popen[bytes]) -> None:
    """A swapper's input closed (it exits), waited for; killed if it does not."""
    try:
        if swapper.stdin is not None:
            swapper.stdin.close()
        swapper.wait(timeout=LEAVE_WAIT_S)
    except (OSError, subprocess.TimeoutExpired):
        swapper.kill()
        swapper.wait()
    finally:
        if swapper.stdout is not None:
            swapper.stdout.close()


@dataclass(frozen=True)
class Pairing:
    """Two samples (base's and head's of a gate's pair) that run at the same moment.

    Each starts its subject (a replay pass's qemu-io, a guest's workload) only when the partner's
    is ready too (``barrier``).  ``shared``: both run on ``cpu`` alone (the affinity qemu-io or
    QEMU starts with).  ``crossed``: each on a CPU of ``cross`` of its own, swapped every
    :data:`SWAP_S` (:class:`Crossing`).  Whatever slows the host down then slows both
    alike and cancels in their ratio.  Measured on a busy 2-core host
    (benchmarks/calibrate_replay.py, benchmarks/calibrate_guest_pairs.py): the A/A log ratio of a
    replayed request's latency quantile varied 13-15 % between pairs run together on any CPU,
    1.4-3 % on one CPU; a dd guest's time 4-25 % one after the other (load 2.5-10), 0.4 % on one
    CPU, 0.9-1.4 % crossed (load 2.5-4; 6-12 % before the priority, the end barrier and the 2 ms
    power-off poll).
    """

    mode: Mode = Mode.SHARED
    barrier: threading.Barrier = field(init=False)
    # both sides' workloads are over: neither shuts its guest down, deletes its image or writes its
    # record (an fsync) while the partner's workload still runs, which would slow the partner alone
    ended: threading.Barrier = field(init=False, default_factory=lambda: threading.Barrier(2))
    cpu: int | None = field(default_factory=shared_cpu)
    cross: tuple[int, int] | None = field(default_factory=crossed_cpus)
    swap_s: float = SWAP_S
    nice: int = PAIR_NICE
    crossing: Crossing | None = field(init=False)

    def __post_init__(self) -> None:
        crossing = None
        if self.mode is Mode.CROSSED and self.cross is not None:
            crossing = Crossing(self.cross, self.swap_s)
        object.__setattr__(self, "crossing", crossing)
        object.__setattr__(
            self, "barrier", threading.Barrier(2, action=crossing.start if crossing is not None else None)
        )

    @property
    def how(self) -> Mode:
        """How the pair shares the host: crossed where asked and two CPUs are there, else shared."""
        return Mode.CROSSED if self.crossing is not None else Mode.SHARED

    def prefix(self) -> list[str]:
        """What runs a command on the pair's CPU (a shared pair's)."""
        return [] if self.cpu is None else ["taskset", "--cpu-list", str(self.cpu)]

    @property
    def cpus(self) -> tuple[int, ...]:
        """The CPUs a side's process may run on until the workloads start (empty: any)."""
        if self.crossing is not None:
            return self.crossing.cpus
        return () if self.cpu is None else (self.cpu,)

    def reset(self) -> None:
        """Ready for the next pair."""
        if self.crossing is not None:
            self.crossing.reset()
        self.barrier.reset()
        self.ended.reset()

    def abort(self) -> None:
        """A side is done or failed: its partner is not kept waiting."""
        self.barrier.abort()
        self.ended.abort()

    def end(self, *, timeout_s: float) -> bool:
        """This side's workload is over: wait (at most ``timeout_s``) until the partner's is too;
        False when the partner failed, gave up or was late."""
        if self.ended.broken:
            return False
        try:
            self.ended.wait(timeout_s)
        except threading.BrokenBarrierError:
            return False
        return True

    def join(self, pid: int | None) -> bool:
        """A side's process takes part: at the pair's priority (:data:`PAIR_NICE`), and a crossed
        pair swaps it once both have met.  Whether its priority could be raised."""
        if pid is None:
            return False
        if self.crossing is not None:
            self.crossing.join(pid)
        return raise_priority(pid, self.nice) if self.nice else True

    def leave(self, pid: int | None) -> Crossed | None:
        """A side's workload is over; what the crossing gave it (None: not crossed)."""
        if self.crossing is None or pid is None:
            return None
        return self.crossing.leave(pid)

    def started(self, pid: int) -> None:
        """A side's process started after the pair met (a replay pass's qemu-io): at the pair's
        priority, and a crossed pair's swapping begins once both sides' processes have started."""
        self.join(pid)
        if self.crossing is not None:
            self.crossing.start()

    def finished(self, pid: int | None) -> Crossed | None:
        """:meth:`leave` for a process that :meth:`started`; a crossed pair's swapper ends once
        both sides' processes are over."""
        got = self.leave(pid)
        if self.crossing is not None:
            self.crossing.end_if_left()
        return got

    def meet(self, *, timeout_s: float = PARTNER_WAIT_S) -> bool:
        """Wait for the partner to be ready; False when it broke the barrier or was late."""
        return meet(self, timeout_s=timeout_s)


def meet(together: Pairing | None, *, timeout_s: float = PARTNER_WAIT_S) -> bool:
    """Wait for the partner's side to be ready; False when there is none or it broke the barrier."""
    if together is None or together.barrier.broken:
        return False
    try:
        together.barrier.wait(timeout_s)
    except threading.BrokenBarrierError:
        return False
    return True
