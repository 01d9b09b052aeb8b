"""Device-side latency of the disk under test, from QEMU's own accounting.  Pure: no I/O.

QEMU keeps, per drive, a latency histogram of each request type once QMP
``block-latency-histogram-set`` gave it boundaries; ``query-blockstats`` then
reports ``rd_latency_histogram``, ``wr_latency_histogram`` and
``flush_latency_histogram`` as ``{"boundaries": [...], "bins": [...]}`` in
nanoseconds.  With boundaries ``b0 < b1 < ... < bk`` there are k+2 bins:
``[0, b0)``, ``[b0, b1)``, ..., ``[bk, inf)``.  Setting boundaries resets the
counts, so the runner sets them at the guest's ready line and the histograms
hold exactly the workload's requests (and the flush at power-off).

The boundaries (:data:`BOUNDARIES_NS`) are log-spaced, ten per decade from
1 µs to 10 s: a bin spans 26 %, so a percentile read from it is good to a few
per cent.  :meth:`Histogram.quantile_ns` interpolates *geometrically* inside the
bin that holds the wanted rank (the bins are log-spaced, so a log-uniform
spread inside a bin is the natural assumption): with ``f`` the fraction of the
bin's count below the rank, the value is ``lo * (hi / lo) ** f``.  In the first
bin (lower edge 0) it is linear, ``hi * f``; in the last, open bin it is its
lower edge, a lower bound.

:func:`latency_metrics` derives a sample's figures (the names are registered
in :mod:`harness.workloads`): per request type the p50, p90 and p99 of the
histogram and the mean (``*_total_time_ns / *_operations`` of the
blockstats delta, exact), in milliseconds; the read and write request
counts (``dev.read_ops``, ``dev.write_ops``: structural counters, like
``host.flushes``); and the device's IO time
``dev.io_s`` (read + write + flush total time, seconds).  A type with no
request has no figures: absent, not zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from harness.errors import ProtocolError

# ten per decade, 1 µs .. 10 s, in nanoseconds
BOUNDARIES_NS: tuple[int, ...] = tuple(round(1000 * 10 ** (k / 10)) for k in range(71))

# request type of QEMU's accounting -> the word in metric names
OPS: tuple[tuple[str, str], ...] = (("rd", "read"), ("wr", "write"), ("flush", "flush"))
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


def metric_names() -> list[tuple[str, str, str]]:
    """(name, unit, description) of every figure :func:`latency_metrics` can give."""
    names = []
    for _, word in OPS:
        for label, q in QUANTILES:
            names.append(
                (
                    f"dev.{word}_{label}_ms",
                    "ms",
                    f"{q * 100:g}th percentile of the device's {word} latency (QEMU's histogram)",
                )
            )
        names.append(
            (f"dev.{word}_mean_ms", "ms", f"mean {word} latency at the device (QEMU's total time / requests)")
        )
        if word != "flush":
            names.append((f"dev.{word}_ops", "count", f"{word} requests at the device (QEMU's accounting)"))
    names.append(
        ("dev.io_s", "s", "the device's IO time: read + write + flush total time of QEMU's accounting")
    )
    return names


@dataclass(frozen=True)
class Histogram:
    """One latency histogram of QEMU: ``len(bins) == len(boundaries) + 1`` (ns)."""

    boundaries: tuple[int, ...]
    bins: tuple[int, ...]

    @classmethod
    def from_qmp(cls, data: Any, *, what: str) -> Histogram:
        """A histogram from ``query-blockstats`` (or a record); ``what`` names it in errors."""
        if not isinstance(data, Mapping):
            raise ProtocolError(f"{what}: not a histogram object: {data!r:.80}")
        boundaries, bins = data.get("boundaries"), data.get("bins")
        if not isinstance(boundaries, list) or not isinstance(bins, list):
            raise ProtocolError(f"{what}: needs lists 'boundaries' and 'bins'")
        if not all(isinstance(v, int) and v >= 0 for v in [*boundaries, *bins]):
            raise ProtocolError(f"{what}: boundaries and bins must be integers of 0 or more")
        if len(bins) != len(boundaries) + 1:
            raise ProtocolError(f"{what}: {len(bins)} bins for {len(boundaries)} boundaries, need one more")
        if any(a >= b for a, b in pairwise(boundaries)):
            raise ProtocolError(f"{what}: boundaries are not increasing")
        return cls(tuple(boundaries), tuple(bins))

    @property
    def count(self) -> int:
        return sum(self.bins)

    def as_dict(self) -> dict[str, list[int]]:
        return {"boundaries": list(self.boundaries), "bins": list(self.bins)}

    def quantile_ns(self, q: float) -> float | None:
        """The ``q`` quantile (0 < q <= 1), interpolated inside its bin; None when empty."""
        if not 0 < q <= 1:
            raise ValueError(f"quantile {q} outside (0, 1]")
        total = self.count
        if total == 0:
            return None
        target = q * total
        below = 0
        for i, n in enumerate(self.bins):
            if n and below + n >= target:
                fraction = (target - below) / n
                lo = self.boundaries[i - 1] if i > 0 else 0
                if i == len(self.boundaries):
                    return float(lo)  # the open last bin: a lower bound
                hi = self.boundaries[i]
                if lo == 0:
                    return hi * fraction
                return float(lo * (hi / lo) ** fraction)
            below += n
        raise AssertionError("unreachable: the ranks add up to the count")


def histograms_from_blockstats(stats: Mapping[str, Any]) -> dict[str, Histogram]:
    """The read, write and flush histograms of one drive's ``query-blockstats`` stats (those present)."""
    found = {}
    for prefix, word in OPS:
        key = f"{prefix}_latency_histogram"
        if key in stats:
            found[word] = Histogram.from_qmp(stats[key], what=f"query-blockstats {key}")
    return found


def latency_metrics(histograms: Mapping[str, Any], blockstats: Mapping[str, Any]) -> dict[str, float]:
    """The sample's device latency figures (see the module's doc).

    ``histograms``: request type word -> :class:`Histogram` or its dict (as kept
    in a record); ``blockstats``: the delta of ``query-blockstats`` over the workload.
    """
    figures: dict[str, float] = {}
    for prefix, word in OPS:
        data = histograms.get(word)
        if data is not None:
            hist = data if isinstance(data, Histogram) else Histogram.from_qmp(data, what=f"{word} histogram")
            for label, q in QUANTILES:
                value = hist.quantile_ns(q)
                if value is not None:
                    figures[f"dev.{word}_{label}_ms"] = value / 1e6
        ops = int(blockstats.get(f"{prefix}_operations", 0) or 0)
        if prefix != "flush" and f"{prefix}_operations" in blockstats:
            figures[f"dev.{word}_ops"] = float(ops)  # flushes are host.flushes already
        if ops > 0 and f"{prefix}_total_time_ns" in blockstats:
            figures[f"dev.{word}_mean_ms"] = int(blockstats[f"{prefix}_total_time_ns"]) / ops / 1e6
    times = [blockstats[f"{p}_total_time_ns"] for p, _ in OPS if f"{p}_total_time_ns" in blockstats]
    if times:
        figures["dev.io_s"] = sum(int(t) for t in times) / 1e9
    return figures
