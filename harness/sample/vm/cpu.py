"""What a QEMU process has had of the CPU: its user and system time, its vCPU threads' waits.

Read from ``/proc`` (the process's ``stat``, each vCPU thread's ``schedstat``): the time a vCPU
was runnable but waited for a CPU is what another process on its CPU (a gate's partner, a
neighbour) cost the guest (:mod:`harness.sample.pairing`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# the name QEMU gives a vCPU thread: "CPU 0/TCG", "CPU 1/KVM"
VCPU_PREFIX = "CPU "


@dataclass(frozen=True)
class CpuTimes:
    """What a process's threads have had of the CPU so far, in seconds."""

    #: user + system time of the whole process (/proc/PID/stat)
    cpu_s: float
    #: time its vCPU threads were runnable but waited for a CPU (/proc/PID/task/TID/schedstat)
    vcpu_wait_s: float
    #: time its vCPU threads ran
    vcpu_run_s: float


def cpu_times(pid: int, proc: Path = Path("/proc")) -> CpuTimes | None:
    """The CPU times of process ``pid``; None where the kernel does not tell them."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        stat = (proc / str(pid) / "stat").read_text()
        # the fields after the command name, which may hold spaces: utime is the 14th field
        after = stat[stat.rindex(")") + 2 :].split()
        cpu_s = (int(after[11]) + int(after[12])) / tick
        wait_ns = run_ns = 0
        for task in (proc / str(pid) / "task").iterdir():
            try:
                if not (task / "comm").read_text().startswith(VCPU_PREFIX):
                    continue
                ran, waited, _slices = (task / "schedstat").read_text().split()[:3]
            except (OSError, ValueError):
                continue  # a thread that ended meanwhile
            run_ns += int(ran)
            wait_ns += int(waited)
    except (OSError, ValueError, IndexError):
        return None
    return CpuTimes(cpu_s=cpu_s, vcpu_wait_s=wait_ns / 1e9, vcpu_run_s=run_ns / 1e9)


def alone_s(workload_s: float, vcpu_wait_s: float) -> float | None:
    """The workload's time less the time its vCPU waited for a CPU meanwhile: what it would have
    taken with a CPU of its own, between 0 and ``workload_s``.

    ``vcpu_wait_s`` must be read over the workload's window: the first reading before the host sends
    the workload (the guest idles until then), the second after the guest powered off.  The kernel
    adds a wait when it ends, so a wait that began before the first reading can land in the window;
    where the waits then come to more than the workload's time, or less than nothing, the figure
    cannot be measured: None.
    """
    if not 0.0 <= vcpu_wait_s <= workload_s:
        return None
    return workload_s - vcpu_wait_s
