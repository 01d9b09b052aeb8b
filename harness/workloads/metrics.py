"""What each figure of a sample is: its unit, its direction and what it measures.  Pure.

Every figure a sample can carry has a :class:`Metric`: the ones every
workload's samples can carry (:data:`COMMON_METRICS`), the ones a workload's
module declares (its ``WorkloadKind.metrics``) and the ones whose names follow
a pattern (the phases, host times, the replay's and fio's figures:
:func:`pattern_metric`).  :func:`harness.workloads.metric_info` looks a name up
in all three.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from harness.workloads.latency import metric_names as latency_metric_names


@dataclass(frozen=True)
class Metric:
    """What one figure of a sample is.

    ``informational`` figures describe the work done (bytes written, files
    unpacked): they should not change between base and head, so a change in
    them is not a regression or an improvement, and they are not gated.
    ``higher_is_better`` is still set for them (False) so that the field is
    never missing.
    """

    name: str
    unit: str
    higher_is_better: bool
    description: str
    informational: bool = False


def seconds(name: str, description: str) -> Metric:
    return Metric(name, "s", False, description)


def info(name: str, unit: str, description: str) -> Metric:
    return Metric(name, unit, False, description, informational=True)


# Figures every workload's samples can carry (set by the runner or the guest's shell).
COMMON_METRICS: tuple[Metric, ...] = (
    seconds("total_s", "guest time of the measured phases (fsck excluded)"),
    seconds("host.boot_s", "QEMU start to the guest's ready line, on the host's clock"),
    seconds("host.overhead_s", "host wall time of the sample minus boot and the guest's total"),
    seconds("host.create_s", "qemu-img create of the disk under test"),
    seconds(
        "host.workload_cpu_s",
        "user and system time of the QEMU process while the workload ran (/proc/PID/stat)",
    ),
    seconds(
        "host.workload_alone_s",
        "host.workload_s less the time the guest's vCPUs waited for a host CPU (schedstat): "
        "the workload's time had it had its CPU to itself (not given where the waits read over "
        "the workload's window come to more than its time)",
    ),
    Metric(
        "host.written_bytes",
        "B",
        False,
        "bytes QEMU wrote to the host while the workload ran (/proc/PID/io wchar or write_bytes)",
    ),
    Metric(
        "host.guest_written_bytes",
        "B",
        False,
        "bytes the guest wrote to its disk device (QMP query-blockstats wr_bytes)",
    ),
    Metric(
        "host.write_amplification",
        "ratio",
        False,
        "host.written_bytes / host.guest_written_bytes: the format's and cache mode's overhead",
    ),
    Metric("host.flushes", "count", False, "flush requests of the guest at its disk device"),
    Metric("host.write_calls", "count", False, "write system calls of QEMU while the workload ran"),
    Metric("mib_per_s", "MiB/s", True, "throughput of the workload's write phase, flush included"),
    info("bytes", "B", "size of the workload's data: dd's file, the installed tree, mkfs's disk"),
    info("files", "count", "regular files the workload left on the disk"),
    info("packages", "count", "Debian packages the install workload unpacked"),
    # the device's latency and request counts from QEMU's accounting (harness.workloads.latency)
    *(Metric(name, unit, False, description) for name, unit, description in latency_metric_names()),
)

# fio's figures, per job of its job file (harness.workloads.fio): name pattern, unit, direction
FIO_PATTERNS: tuple[tuple[str, str, bool, str], ...] = (
    (r"fio\.[a-z0-9_.-]+\.iops", "IOPS", True, "IO operations per second of the fio job"),
    (r"fio\.[a-z0-9_.-]+\.mib_per_s", "MiB/s", True, "bandwidth of the fio job"),
    (r"fio\.[a-z0-9_.-]+\.clat_mean_ms", "ms", False, "mean completion latency of the fio job"),
    (r"fio\.[a-z0-9_.-]+\.clat_p50_ms", "ms", False, "median completion latency of the fio job"),
    (r"fio\.[a-z0-9_.-]+\.clat_p99_ms", "ms", False, "99th percentile completion latency of the fio job"),
)


# Names made of a pattern: the phases of each workload and any host time
# (a rate such as ``*_per_s`` is not a time).
_PATTERNS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Metric]], ...] = (
    (
        re.compile(r"phase\.([a-z0-9_]+)(?<!_per)_s"),
        lambda m: seconds(m.string, f"guest time of the {m.group(1)} phase"),
    ),
    (
        re.compile(r"host\.([a-z0-9_]+)(?<!_per)_s"),
        lambda m: seconds(m.string, f"host time: {m.group(1).replace('_', ' ')}"),
    ),
    # a replay sample's figures (harness.sample.replay): latencies of the replayed requests, its time
    (
        re.compile(r"replay\.(write|read)_(p10|p25|p50|p90|p99|mean)_ms"),
        lambda m: Metric(m.string, "ms", False, f"{m.group(2)} latency of the replayed {m.group(1)}s"),
    ),
    (re.compile(r"replay\.wall_s"), lambda m: seconds(m.string, "qemu-io's time for the whole replay")),
    (
        re.compile(r"replay\.io_s"),
        lambda m: seconds(m.string, "the replayed reads' and writes' own times, summed"),
    ),
    (
        re.compile(r"replay\.(write|read|discard)_ops|replay\.flushes"),
        lambda m: info(m.string, "count", "requests of the replayed stream, by kind"),
    ),
    # fio's figures per job (harness.workloads.fio)
    *(
        (re.compile(pattern), lambda m, u=unit, h=higher, d=description: Metric(m.string, u, h, d))
        for pattern, unit, higher, description in FIO_PATTERNS
    ),
)


def pattern_metric(name: str) -> Metric | None:
    """The metric of a name made of a pattern (``phase.write_s``, ``fio.JOB.iops``...), or None."""
    for pattern, make in _PATTERNS:
        match = pattern.fullmatch(name)
        if match:
            return make(match)
    return None
