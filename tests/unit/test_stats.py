from __future__ import annotations

import math

from harness.compare.samplestats import Stats


def test_median_and_spread() -> None:
    stats = Stats.of([10.0, 12.0, 11.0])
    assert stats.n == 3
    assert stats.median == 11.0
    assert math.isclose(stats.stdev, 1.0)
    assert math.isclose(stats.cv_pct, 100.0 / 11.0)
    assert stats.format("s") == "11.00 s ± 9.1%"
    assert stats.as_dict()["max"] == 12.0


def test_one_sample_says_it_has_no_spread() -> None:
    assert Stats.of([4.2]).format("s") == "4.20 s (n=1)"


def test_no_samples() -> None:
    assert Stats.of([]).format("s") == "-"
    assert math.isnan(Stats.of([]).median)
