"""Workloads on the host side: what each metric means, and parsers of guest output.

Each workload is one module here that declares ``WORKLOAD``: its parameters,
checks, what the guest is told and its output parser
(:mod:`~harness.workloads.params`); :mod:`~harness.workloads.registry` lists
them, built-in and registered.

Pure: no I/O.  Every figure a sample can carry has a :class:`Metric` here,
so comparisons and reports know its unit and whether higher or lower is
better without guessing from the name; :func:`metric_info` looks one up.

The guest sends two kinds of workload data in its report: ``metrics``, figures
its shell computed (``bytes``, ``mib_per_s``), and ``outputs``, the raw text
of tools whose output is easier to parse in Python (bonnie++'s CSV line,
mke2fs's messages).  :func:`parse_outputs` turns ``outputs`` into more
figures plus record fields, dispatching to the workload's module
(:mod:`~harness.workloads.bonnie`, :mod:`~harness.workloads.mkfs`,
:mod:`~harness.workloads.dd`, :mod:`~harness.workloads.install`, :mod:`~harness.workloads.fio`,
or one :mod:`~harness.workloads.registry` was given); output it
cannot read raises :class:`~harness.errors.ProtocolError`, so a sample fails
instead of carrying a made-up number.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import ProtocolError, UsageError
from harness.workloads.latency import metric_names as latency_metric_names

# (extra figures, extra record fields) parsed from a report's outputs
Parsed = tuple[dict[str, float], dict[str, Any]]
OutputParser = Callable[[Mapping[str, str]], Parsed]


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


@functools.cache
def _registry() -> dict[str, Metric]:
    from harness.workloads import registry

    metrics = {m.name: m for m in COMMON_METRICS}
    for kind in registry.kinds():
        for metric in kind.metrics:
            if metric.name in metrics and metrics[metric.name] != metric:
                raise AssertionError(f"metric {metric.name} is defined twice, differently")
            metrics[metric.name] = metric
    return metrics


def forget_metrics() -> None:
    """Drop the metric table: the registry calls it when a workload is added or removed."""
    _registry.cache_clear()


def all_metrics() -> dict[str, Metric]:
    """Every metric with a fixed name (``phase.*_s`` and ``host.*_s`` are patterns)."""
    return dict(_registry())


def metric_info(name: str) -> Metric:
    """What ``name`` measures, its unit and direction; :class:`UsageError` if unknown.

    An unknown name is a mistake in a comparison rule or a record from a newer
    harness: guessing its direction could turn a regression into an improvement.
    """
    found = _registry().get(name)
    if found is not None:
        return found
    for pattern, make in _PATTERNS:
        match = pattern.fullmatch(name)
        if match:
            return make(match)
    raise UsageError(f"unknown metric {name!r}: see harness.workloads.all_metrics() for the known ones")


def parse_outputs(workload: str, outputs: Mapping[str, str]) -> Parsed:
    """Figures and record fields from the raw outputs of ``workload``'s guest report.

    Returns ``(metrics, fields)``: ``metrics`` join the sample's figures,
    ``fields`` go into the sample as they are (``bonnie_csv``, ``too_fast``...).
    Raises :class:`ProtocolError` for an unknown workload or output it cannot read.
    """
    from harness.workloads import registry

    if workload not in registry.names():
        raise ProtocolError(f"no parser for the outputs of workload {workload!r}")
    return registry.kind(workload).parser()(outputs)


def expect_keys(workload: str, outputs: Mapping[str, str], required: tuple[str, ...]) -> None:
    """Check that ``outputs`` has exactly the ``required`` keys: guest and host agree."""
    missing = [k for k in required if k not in outputs]
    extra = sorted(set(outputs) - set(required))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        raise ProtocolError(f"{workload} report outputs: {'; '.join(parts)}")
