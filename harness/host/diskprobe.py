"""What a host disk model's own path can do, measured as it is built (:mod:`harness.host.hostdisk`),
and the priority its processes run at.

A model serves every request through a loop device, a FUSE export and the daemon behind it (with a
tracer stopping the daemon's system calls): that path has a ceiling of its own, set by the host's
CPUs, and a profile above it cannot be reached however the throttle is set. :func:`ceiling` times
it before the throttle holds it; :func:`flush_p50_ms` times a flush through the mounted model.

The model's processes (the daemon and its tracer) run above the host's other work
(:func:`raise_in_child`): a disk does not slow down because the host's CPUs are busy.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

#: fdatasync calls timed to measure what a flush costs on the model's path before its delay is set
FLUSH_PROBES = 24
#: the real-time priority (SCHED_FIFO) of a model's processes: above every ordinary task, a pair's
#: QEMU at nice -19 included, and below the kernel's own real-time threads (50 and up)
FIFO_PRIORITY = 10
#: where SCHED_FIFO is refused (no CAP_SYS_NICE), the nice value of the processes and their autogroup
FALLBACK_NICE = -19
#: how long each of the ceiling's four measurements runs, and how many times the four are taken
#: at most while a figure falls short (each figure's best counts: a moment's stall of the host,
#: one sequential read at 4 MiB/s among 600-2500, is no ceiling of the path)
PROBE_S = 0.5
PROBE_TRIES = 6
SMALL = 4096
LARGE = 1 << 20


def raise_in_child() -> None:
    """In a model's child before exec: a session (and so an autogroup) of its own, then SCHED_FIFO
    at :data:`FIFO_PRIORITY`, or nice :data:`FALLBACK_NICE` for it and its autogroup where the host
    refuses real time. Threads it starts later inherit either."""
    with contextlib.suppress(OSError):
        os.setsid()
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
        return
    except (OSError, AttributeError):
        pass
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, FALLBACK_NICE)
    with contextlib.suppress(OSError):
        Path("/proc/self/autogroup").write_text(str(FALLBACK_NICE))


def priority_of(pid: int) -> str:
    """What process ``pid`` runs at, in words: ``SCHED_FIFO 10``, ``nice -19`` or ``nice 0``."""
    with contextlib.suppress(OSError):
        if os.sched_getscheduler(pid) == os.SCHED_FIFO:
            return f"SCHED_FIFO {os.sched_getparam(pid).sched_priority}"
        return f"nice {os.getpriority(os.PRIO_PROCESS, pid)}"
    return "gone"


@dataclass(frozen=True)
class Ceiling:
    """What the model's path served at queue depth 1, O_DIRECT, before any throttle (or through
    it, where ``throttled``): 4 KiB random requests a second and 1 MiB sequential MiB/s."""

    randread_iops: float
    randwrite_iops: float
    seq_read_mib_s: float
    seq_write_mib_s: float
    throttled: bool = False

    @property
    def iops(self) -> float:
        return min(self.randread_iops, self.randwrite_iops)

    @property
    def mib_s(self) -> float:
        return min(self.seq_read_mib_s, self.seq_write_mib_s)

    def words(self) -> str:
        how = "through its throttle" if self.throttled else "unthrottled"
        return (
            f"{self.randread_iops:.0f} random 4 KiB reads/s, {self.randwrite_iops:.0f} writes/s, "
            f"{self.seq_read_mib_s:.0f} MiB/s sequential read, {self.seq_write_mib_s:.0f} MiB/s write "
            f"(queue depth 1, {how}, measured now)"
        )

    def best(self, other: Ceiling) -> Ceiling:
        """Each figure the higher of the two measurements (a dip is the host's load, not the path)."""
        return Ceiling(
            randread_iops=max(self.randread_iops, other.randread_iops),
            randwrite_iops=max(self.randwrite_iops, other.randwrite_iops),
            seq_read_mib_s=max(self.seq_read_mib_s, other.seq_read_mib_s),
            seq_write_mib_s=max(self.seq_write_mib_s, other.seq_write_mib_s),
            throttled=self.throttled,
        )

    def as_dict(self) -> dict[str, float | bool]:
        return {
            "randread_iops": round(self.randread_iops, 1),
            "randwrite_iops": round(self.randwrite_iops, 1),
            "seq_read_mib_s": round(self.seq_read_mib_s, 1),
            "seq_write_mib_s": round(self.seq_write_mib_s, 1),
            "throttled": self.throttled,
        }


def _rate(fd: int, buf: mmap.mmap, offsets: list[int], *, write: bool, duration_s: float) -> float:
    """Requests a second of ``buf`` at ``offsets`` in turn (one at a time) for ``duration_s``."""
    done = 0
    start = time.perf_counter()
    while True:
        offset = offsets[done % len(offsets)]
        if write:
            os.pwritev(fd, [buf], offset)
        else:
            os.preadv(fd, [buf], offset)
        done += 1
        elapsed = time.perf_counter() - start
        if elapsed >= duration_s:
            return done / elapsed


def ceiling(device: str, start: int, size: int, *, throttled: bool = False) -> Ceiling:
    """The path's ceiling, measured on ``device`` between byte ``start`` and ``start + size``
    (a scratch area no file system uses: it is overwritten)."""
    draw = random.Random(0)
    small = [start + draw.randrange(size // SMALL) * SMALL for _ in range(4096)]
    large = [start + i * LARGE for i in range(size // LARGE)]
    buf_small = mmap.mmap(-1, SMALL)
    buf_large = mmap.mmap(-1, LARGE)
    buf_large.write(b"\x5a" * LARGE)
    fd = os.open(device, os.O_RDWR | os.O_DIRECT)
    try:
        seq_write = _rate(fd, buf_large, large, write=True, duration_s=PROBE_S)
        seq_read = _rate(fd, buf_large, large, write=False, duration_s=PROBE_S)
        rand_write = _rate(fd, buf_small, small, write=True, duration_s=PROBE_S)
        rand_read = _rate(fd, buf_small, small, write=False, duration_s=PROBE_S)
    finally:
        os.close(fd)
    return Ceiling(
        randread_iops=rand_read,
        randwrite_iops=rand_write,
        seq_read_mib_s=seq_read * LARGE / (1 << 20),
        seq_write_mib_s=seq_write * LARGE / (1 << 20),
        throttled=throttled,
    )


def flush_p50_ms(directory: Path) -> float:
    """The median time of fdatasync after a 4 KiB O_DIRECT overwrite, as fio's flush check times it."""
    path = directory / ".diskbench-flush-probe"
    buf = mmap.mmap(-1, SMALL)
    buf.write(b"\xa5" * SMALL)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
    try:
        os.pwrite(fd, buf, 0)
        os.fdatasync(fd)
        times = []
        for _ in range(FLUSH_PROBES):
            os.pwrite(fd, buf, 0)
            begin = time.perf_counter()
            os.fdatasync(fd)
            times.append(time.perf_counter() - begin)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return statistics.median(times) * 1000


#: how far above a profile's figure the path's unthrottled ceiling must be for the throttle to
#: hold the figure (a busier moment costs the path some of it); through the throttle, the
#: ceiling must reach the figure less the checks' tolerance
HEADROOM = 1.25
TOLERANCE = 0.10


def out_of_reach(
    *,
    seq_mib_s: float,
    random_iops: float,
    ceiling_found: Ceiling | None,
    flush_ms: float | None = None,
    flush_path_ms: float | None = None,
) -> list[str]:
    """What of a profile (its sequential MiB/s, random IOPS, flush ms) the path cannot reach, in
    words: empty where it can. The flush is out of reach where the path's own flush costs more."""
    short: list[str] = []
    if ceiling_found is not None:
        need = 1 - TOLERANCE if ceiling_found.throttled else HEADROOM
        if ceiling_found.iops < random_iops * need:
            short.append(f"{random_iops:g} random IOPS (the path: {ceiling_found.iops:.0f})")
        if ceiling_found.mib_s < seq_mib_s * need:
            short.append(f"{seq_mib_s:g} MiB/s (the path: {ceiling_found.mib_s:.0f})")
    if flush_ms is not None and flush_path_ms is not None and flush_path_ms > flush_ms * (1 + TOLERANCE):
        short.append(f"a {flush_ms:g} ms flush (the path's own: {flush_path_ms:.2f} ms)")
    return short
