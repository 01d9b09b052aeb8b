"""Two samples taken together: base's and head's sample of a gate's pair at the same moment on one CPU.

A gate runs the two sides' samples of a pair in two threads (:mod:`harness.gate.rounds`); they
share a :class:`Pairing`.  Each side gets its subject ready (a replay's qemu-io, a guest at its
ready line) and waits at the barrier for the partner's; both then start at once, on the pair's
CPU alone, so whatever slows the host down then (its disk, the steal and the load on that CPU)
slows both alike and cancels in their ratio.  A side that fails breaks the barrier: the other
says it ran alone and the comparison does not count the pair as taken together.

What sharing one CPU costs: two CPU-bound sides share it, so a slowdown r of one side alone reads
as about r/2 in the pair's ratio (the faster side finishes at twice its own time, the slower runs
its excess alone), less where the slower side waits (IO, a throttle) and leaves the CPU to the
other.  The sample says how long its vCPU waited for a CPU
(:func:`harness.sample.vm.cpu.cpu_times`): the guest's time less that wait is what it would have taken alone (``host.workload_alone_s``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

# how long a side waits for its partner to be ready before it runs alone
PARTNER_WAIT_S = 120.0


def shared_cpu() -> int | None:
    """The CPU a pair's two samples share: the last this process may run on (None: unknown)."""
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError, ValueError):
        return None


@dataclass(frozen=True)
class Pairing:
    """Two samples (base's and head's of a gate's pair) that run at the same moment on one CPU.

    Each starts its subject (a replay pass's qemu-io, a guest's workload) only when the partner's
    is ready too (``barrier``), and both run on ``cpu`` alone (``taskset``, or the affinity QEMU
    starts with): whatever slows the host down then slows both alike and cancels in their ratio.
    Measured on a busy 2-core host (benchmarks/calibrate_replay.py): the A/A log ratio of a
    replayed request's latency quantile varied 13-15 % between pairs run together on any CPU,
    1.4-3 % on one CPU; a dd guest's time 9.8-11.6 % one after the other, 0.4-0.7 % on one CPU.
    """

    barrier: threading.Barrier = field(default_factory=lambda: threading.Barrier(2))
    cpu: int | None = field(default_factory=shared_cpu)

    def prefix(self) -> list[str]:
        """What runs a command on the pair's CPU."""
        return [] if self.cpu is None else ["taskset", "--cpu-list", str(self.cpu)]

    @property
    def cpus(self) -> tuple[int, ...]:
        """The CPUs a side's process may run on (empty: any)."""
        return () if self.cpu is None else (self.cpu,)

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
