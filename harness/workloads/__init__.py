"""Workloads on the host side: what each metric means, and parsers of guest output.

Each workload is one module here that declares ``WORKLOAD``: its parameters,
checks, what the guest is told and its output parser
(:mod:`~harness.workloads.params`); :mod:`~harness.workloads.registry` lists
them, built-in and registered.

Pure: no I/O.  Every figure a sample can carry has a :class:`Metric`
(:mod:`~harness.workloads.metrics`), so comparisons and reports know its unit
and whether higher or lower is better without guessing from the name;
:func:`metric_info` looks one up.

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

from collections.abc import Mapping

from harness.errors import ProtocolError, UsageError
from harness.workloads.metrics import COMMON_METRICS, FIO_PATTERNS, Metric, info, pattern_metric, seconds
from harness.workloads.params import OutputParser, Parsed, expect_keys
from harness.workloads.registry import kind, metric_table, names


def all_metrics() -> dict[str, Metric]:
    """Every metric with a fixed name (``phase.*_s`` and ``host.*_s`` are patterns)."""
    return dict(metric_table())


def metric_info(name: str) -> Metric:
    """What ``name`` measures, its unit and direction; :class:`UsageError` if unknown.

    An unknown name is a mistake in a comparison rule or a record from a newer
    harness: guessing its direction could turn a regression into an improvement.
    """
    found = metric_table().get(name) or pattern_metric(name)
    if found is not None:
        return found
    import difflib

    close = difflib.get_close_matches(name, list(metric_table()), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "`diskbench show RECORDS --all` lists a run's"
    raise UsageError(f"unknown metric {name!r}: {hint}")


def parse_outputs(workload: str, outputs: Mapping[str, str]) -> Parsed:
    """Figures and record fields from the raw outputs of ``workload``'s guest report.

    Returns ``(metrics, fields)``: ``metrics`` join the sample's figures,
    ``fields`` go into the sample as they are (``bonnie_csv``, ``too_fast``...).
    Raises :class:`ProtocolError` for an unknown workload or output it cannot read.
    """
    if workload not in names():
        raise ProtocolError(f"no parser for the outputs of workload {workload!r}")
    return kind(workload).parser()(outputs)


__all__ = [
    "COMMON_METRICS",
    "FIO_PATTERNS",
    "Metric",
    "OutputParser",
    "Parsed",
    "all_metrics",
    "expect_keys",
    "info",
    "metric_info",
    "parse_outputs",
    "seconds",
]
