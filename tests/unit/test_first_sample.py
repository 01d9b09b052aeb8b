"""A cell whose first sample differs from the rest is warned of, with what to do (as hyperfine
warns of a first run slower than the rest and offers a warm-up)."""

from __future__ import annotations

from recordkit import tcg_record

from harness.record import Record, Sample
from harness.report.summary import render_summary
from harness.spec import make_cell


def dd(rates: list[float]) -> Record:
    rec = tcg_record(make_cell(format="raw", workload="dd", dd_mib=16, size="256M").as_dict())
    for i, rate in enumerate(rates):
        rec = rec.with_sample(Sample(index=i, status="ok", metrics={"mib_per_s": rate, "total_s": 16 / rate}))
    return rec


def test_a_first_sample_far_from_the_rest_is_warned_of_with_what_to_do() -> None:
    text = render_summary([dd([6.9, 123.4])])
    assert all(len(line) <= 100 for line in text.splitlines())
    start = text.index("warning: ")
    line = " ".join(text[start:].split("\n\n")[0].split())
    assert "first sample's mib_per_s (6.9 MiB/s)" in line and "(123.4 MiB/s;" in line
    assert "17.9x off" in line and "--repeat" in line and "--cache-state warm" in line
    # three samples: the first against the others' median
    assert "warning: " in render_summary([dd([40.0, 100.0, 104.0])])


def test_samples_that_agree_raise_no_warning() -> None:
    for rates in ([100.0, 104.0, 98.0], [100.0], [90.0, 120.0, 101.0]):
        assert "warning: " not in render_summary([dd(rates)])
