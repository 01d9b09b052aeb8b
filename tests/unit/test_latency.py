"""QEMU's latency histograms: parsing, percentiles inside a bin, a sample's device figures."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from harness.compare import format_value
from harness.errors import ProtocolError
from harness.workloads import metric_info
from harness.workloads.latency import (
    BOUNDARIES_NS,
    Histogram,
    histograms_from_blockstats,
    latency_metrics,
    metric_names,
)


def hist(boundaries: list[int], bins: list[int]) -> Histogram:
    return Histogram.from_qmp({"boundaries": boundaries, "bins": bins}, what="test")


def test_boundaries_are_log_spaced_from_a_microsecond_to_ten_seconds() -> None:
    assert BOUNDARIES_NS[0] == 1_000
    assert BOUNDARIES_NS[-1] == 10_000_000_000
    assert len(BOUNDARIES_NS) == 71  # ten per decade, seven decades
    steps = {round(b / a, 2) for a, b in pairwise(BOUNDARIES_NS)}
    assert steps <= {1.25, 1.26, 1.27}


def test_a_quantile_is_interpolated_geometrically_inside_its_bin() -> None:
    h = hist([10, 100, 1000], [0, 10, 0, 0])
    assert h.quantile_ns(0.5) == pytest.approx(10 * 10**0.5)  # halfway in log between 10 and 100
    assert h.quantile_ns(1.0) == pytest.approx(100)
    assert h.quantile_ns(0.1) == pytest.approx(10 * 10**0.1)


def test_the_rank_picks_the_bin_by_cumulative_count() -> None:
    h = hist([10, 100, 1000], [0, 9, 1, 0])
    assert h.quantile_ns(0.9) == pytest.approx(100)  # the 9th of 10 is the top of the first full bin
    assert h.quantile_ns(0.95) == pytest.approx(100 * 10**0.5)
    assert h.quantile_ns(0.5) < h.quantile_ns(0.9) < h.quantile_ns(0.99)  # type: ignore[operator]


def test_first_bin_is_linear_from_zero_and_the_open_last_bin_gives_its_lower_edge() -> None:
    assert hist([10, 100], [4, 0, 0]).quantile_ns(0.5) == pytest.approx(5)
    assert hist([10, 100], [0, 0, 3]).quantile_ns(0.99) == 100


def test_an_empty_histogram_has_no_quantile() -> None:
    assert hist([10], [0, 0]).quantile_ns(0.5) is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"boundaries": [10, 100], "bins": [1, 2]}, "2 bins for 2 boundaries"),
        ({"boundaries": [100, 10], "bins": [1, 2, 3]}, "not increasing"),
        ({"boundaries": [10], "bins": [1, -2]}, "integers of 0 or more"),
        ({"bins": [1]}, "needs lists"),
        ([1, 2], "not a histogram object"),
    ],
)
def test_malformed_histograms_are_protocol_errors(data: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        Histogram.from_qmp(data, what="wr_latency_histogram")


def test_histograms_are_read_from_blockstats_by_request_type() -> None:
    stats = {
        "wr_latency_histogram": {"boundaries": [1000, 2000], "bins": [0, 3, 1]},
        "flush_latency_histogram": {"boundaries": [1000, 2000], "bins": [2, 0, 0]},
        "wr_operations": 4,
    }
    found = histograms_from_blockstats(stats)
    assert sorted(found) == ["flush", "write"]
    assert found["write"].count == 4
    assert histograms_from_blockstats({"wr_operations": 1}) == {}


def test_latency_metrics_from_histograms_and_blockstats() -> None:
    histograms = {
        "write": {"boundaries": [1_000_000, 10_000_000], "bins": [0, 10, 0]},
        "flush": hist([1_000_000], [0, 0]),
    }
    blockstats = {
        "wr_operations": 10,
        "wr_total_time_ns": 31_000_000,
        "rd_operations": 0,
        "rd_total_time_ns": 0,
        "flush_operations": 0,
        "flush_total_time_ns": 0,
    }
    figures = latency_metrics(histograms, blockstats)
    assert figures["dev.write_p50_ms"] == pytest.approx(math.sqrt(10))
    assert figures["dev.write_p99_ms"] == pytest.approx(10**0.99)
    assert figures["dev.write_mean_ms"] == pytest.approx(3.1)
    assert figures["dev.write_ops"] == 10
    assert figures["dev.read_ops"] == 0
    assert figures["dev.io_s"] == pytest.approx(0.031)
    # no request of a type: no latency figure of it (absent, not zero)
    assert not [k for k in figures if k.startswith(("dev.flush_", "dev.read_p", "dev.read_mean"))]


def test_every_latency_figure_is_a_registered_cost() -> None:
    for name, unit, _ in metric_names():
        info = metric_info(name)
        assert info.unit == unit
        assert not info.higher_is_better
        assert not info.informational
    assert metric_info("dev.write_p90_ms").unit == "ms"
    assert format_value(3.1512, "ms") == "3.15 ms"
    assert format_value(18.43, "ms") == "18.4 ms"
