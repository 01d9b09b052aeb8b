"""A crossed guest pair's decision: on its measured ratio, unchanged only within the minimum effect
as such a pair reads it at least (a change of the minimum effect alone is never called unchanged),
a regression only beyond it as the pair reads it at most (a change below the minimum alone never
fails), inconclusive between; its size alone said as the interval it stands for."""

from __future__ import annotations

import math
import random

import pytest

from harness.compare import Settings, Verdict, compare_family, compare_metric
from harness.compare.markdown import _change_text
from harness.compare.metric import Alone, alone_range
from harness.compare.rules import reads_of
from harness.errors import UsageError
from harness.record import CellInfo, Sample

METRIC = "host.workload_s"
READS = Settings().crossed_reads


def _pairs(change: float, sd: float, n: int = 10, seed: int = 5) -> tuple[list[float], list[float]]:
    """``n`` pairs whose base varies 30 % from pair to pair and whose log ratio is ``change`` with
    a spread of ``sd``."""
    rng = random.Random(seed)
    base = [rng.uniform(10.0, 13.0) for _ in range(n)]
    return base, [b * (1 + change) * math.exp(rng.gauss(0, sd)) for b in base]


def _judge(change: float, sd: float, *, reads: tuple[float, float] | None) -> Verdict:
    base, head = _pairs(change, sd)
    settings = Settings(metrics=(METRIC,), comparisons=11)
    return compare_metric(
        METRIC, base, head, settings=settings, paired=True, together=True, alone=Alone(reads=reads)
    ).verdict


def test_a_change_of_five_percent_alone_as_a_crossed_pair_may_read_it_is_never_unchanged() -> None:
    # a 5 % change alone can read as little as 1.05 ** 0.35 - 1 = 1.7 % crossed: read at +3 % with
    # a tight interval it is unchanged by the plain band of 5 %; crossed, it is not unchanged, and
    # not a regression either (a change of +2 % alone may read +3 %)
    assert _judge(0.03, 0.003, reads=None) is Verdict.UNCHANGED
    assert _judge(0.03, 0.003, reads=READS) is Verdict.INCONCLUSIVE
    # read at +1 %, it is unchanged only where the interval stays within 1.7 %
    assert _judge(0.01, 0.003, reads=READS) is Verdict.UNCHANGED
    assert _judge(0.01, 0.03, reads=READS) is Verdict.INCONCLUSIVE
    # an A/A pair as tight as the calibrations' (sd 1.8-2.9 %) is unchanged
    assert _judge(0.0, 0.009, reads=READS) is Verdict.UNCHANGED
    # a change read at +8 % is a regression either way: beyond 1.05 ** 1.5 - 1 = 7.6 %
    assert _judge(0.08, 0.01, reads=READS) is Verdict.REGRESSION
    assert _judge(0.08, 0.01, reads=None) is Verdict.REGRESSION


def test_a_change_below_the_minimum_alone_never_fails_and_one_well_beyond_it_does() -> None:
    low, high = READS
    for seed in range(20):
        base, head = _pairs(1.02**high - 1, 0.005, seed=seed)
        settings = Settings(metrics=(METRIC,), comparisons=11)
        # +2 % alone, read at the most a crossed pair reads a change (+3 %): never a regression
        got = compare_metric(
            METRIC, base, head, settings=settings, paired=True, together=True, alone=Alone(reads=READS)
        )
        assert got.verdict is not Verdict.REGRESSION, got.reason
        # +15 % alone, read at 0.77 times (a CPU-bound change's least: +11.4 %): a regression
        base, head = _pairs(1.15**0.77 - 1, 0.005, seed=seed)
        got = compare_metric(
            METRIC, base, head, settings=settings, paired=True, together=True, alone=Alone(reads=READS)
        )
        assert got.verdict is Verdict.REGRESSION, got.reason
    assert low < 1 < high


def test_the_band_and_the_size_alone_are_written() -> None:
    base, head = _pairs(0.03, 0.003)
    settings = Settings(metrics=(METRIC,), comparisons=11)
    result = compare_metric(
        METRIC, base, head, settings=settings, paired=True, together=True, alone=Alone(reads=READS)
    )
    figures = result
    assert figures.crossed_effect == pytest.approx(1.05**0.35 - 1, abs=1e-6)
    assert figures.alone_low_pct is not None and figures.alone_high_pct is not None
    measured = figures.change_pct
    assert measured is not None and 2.5 < measured < 3.5
    # the interval alone: its low end read at 1.5 times, its high end at 0.35 times
    lo, hi = figures.ci_low_pct, figures.ci_high_pct
    assert lo is not None and hi is not None and lo < measured < hi
    assert figures.alone_low_pct == pytest.approx(((1 + lo / 100) ** (1 / 1.5) - 1) * 100, abs=1e-3)
    assert figures.alone_high_pct == pytest.approx(((1 + hi / 100) ** (1 / 0.35) - 1) * 100, abs=1e-3)
    assert "0.35-1.5 times its size alone" in result.reason
    assert "a crossed pair reads it as 1.7% to 7.6%" in result.reason
    # what it could see: nothing below the edge of a regression as a crossed pair reads it
    assert figures.could_see_pct == pytest.approx((1.05**1.5 - 1) * 100, abs=0.01)
    text = _change_text(figures)
    assert text.startswith(f"{measured:+.1f}% (") and text.endswith("% alone)")
    as_json = figures.to_json()
    assert {"alone_low_pct", "alone_high_pct", "crossed_effect"} <= set(as_json)
    # a figure not crossed writes none of them
    plain = compare_metric(METRIC, base, head, settings=settings, paired=True, together=True)
    assert not {"alone_low_pct", "alone_high_pct", "crossed_effect"} & set(plain.to_json())


def test_a_fall_reads_as_a_range_of_falls() -> None:
    low, high = alone_range(0.97, (0.4, 1.5))
    assert low == pytest.approx(0.97 ** (1 / 0.4)) and high == pytest.approx(0.97 ** (1 / 1.5))
    assert alone_range(1.0, (0.4, 1.5)) == (1.0, 1.0)


def _sample(i: int, value: float, mode: str | None, written: float = 1e8) -> Sample:
    together = {"cpu": 1, "met": True} | ({"mode": mode} if mode else {})
    return Sample(
        index=i,
        status="ok",
        metrics={METRIC: value, "host.guest_written_bytes": written},
        host={"together": together},
    )


def test_only_a_crossed_guest_pairs_timed_figures_take_the_band() -> None:
    settings = Settings(metrics=(METRIC,))
    crossed = [_sample(0, 1.0, "crossed")]
    assert reads_of(METRIC, crossed, settings) == READS
    assert reads_of("host.guest_written_bytes", crossed, settings) is None  # a counter: the IO itself
    assert reads_of(METRIC, [_sample(0, 1.0, "shared")], settings) is None
    assert reads_of(METRIC, [_sample(0, 1.0, None)], settings) is None
    assert reads_of(METRIC, [Sample(index=0, status="ok", metrics={METRIC: 1.0})], settings) is None


def test_a_cell_of_crossed_pairs_is_judged_with_the_band() -> None:
    base, head = _pairs(0.03, 0.003)
    settings = Settings(metrics=(METRIC,), counters=())
    cell = CellInfo({"id": "c.dd"})
    base, head = _pairs(0.01, 0.003)
    for mode, verdict in (("crossed", Verdict.UNCHANGED), ("shared", Verdict.UNCHANGED)):
        (result,) = compare_family(
            [
                (
                    cell,
                    [_sample(i, v, mode) for i, v in enumerate(base)],
                    [_sample(i, v, mode) for i, v in enumerate(head)],
                )
            ],
            settings=settings,
        )
        assert result.verdict is verdict, (mode, result.reason)
    base, head = _pairs(0.03, 0.003)
    for mode in ("crossed", "shared"):
        (result,) = compare_family(
            [
                (
                    cell,
                    [_sample(i, v, mode) for i, v in enumerate(base)],
                    [_sample(i, v, mode) for i, v in enumerate(head)],
                )
            ],
            settings=settings,
        )
        # +3 %: crossed, between the 1.7 % and 7.6 % a pair reads 5 % alone as; shared, x2 on logs: +6 %
        expected = Verdict.INCONCLUSIVE if mode == "crossed" else Verdict.REGRESSION
        assert result.verdict is expected, (mode, result.reason)
        assert ("a crossed pair reads it" in result.reason) is (mode == "crossed")


def test_the_settings_refuse_a_range_that_is_no_range() -> None:
    with pytest.raises(UsageError, match=r"crossed reads 1\.2-1\.5"):
        Settings(crossed_reads=(1.2, 1.5))
    assert Settings().used().to_json()["crossed_reads"] == [0.35, 1.5]


def test_the_gate_spec_sets_the_range_and_refuses_one_that_is_not() -> None:
    from harness.errors import SpecError
    from harness.gate import parse_gate_spec
    from harness.gate.spec import load_gate_spec, settings_for
    from harness.paths import package_data

    cells = '[[cells]]\nname = "dd"\nworkload = "dd"\n'
    assert parse_gate_spec(cells, source="g.toml").crossed_reads == READS
    own = parse_gate_spec("crossed_reads = [0.6, 1.2]\n" + cells, source="g.toml")
    assert settings_for(own, Settings()).crossed_reads == (0.6, 1.2)
    for bad in ("[1.5, 0.4]", "[0.4]", '["a", 1]', "0.4", "[0, 1.5]"):
        with pytest.raises(SpecError, match=r"g.toml: crossed_reads = .*: use \[low, high\]"):
            parse_gate_spec(f"crossed_reads = {bad}\n" + cells, source="g.toml")
    # the default spec says the range it was calibrated at
    assert load_gate_spec(package_data("gate.toml")).crossed_reads == READS


def test_no_change_reads_as_no_range() -> None:
    from harness.compare.model import Figures

    still = Figures(
        metric=METRIC,
        verdict=Verdict.UNCHANGED,
        change_pct=-0.004,
        alone_low_pct=-0.01,
        alone_high_pct=-0.003,
    )
    assert _change_text(still) == "-0.0%"


def test_the_rounds_to_decide_a_crossed_pair_aim_at_its_band() -> None:
    from dataclasses import dataclass

    from harness.compare.power import rounds_to_decide

    @dataclass
    class Interval:
        ratio: float
        ci_low: float
        ci_high: float
        n_base: int = 8
        n_head: int = 8
        min_effect: float = 0.05
        crossed_effect: float | None = None

    settings = Settings(metrics=(METRIC,), comparisons=11)
    read = 1.05**0.35 - 1
    # +1 %, interval -3 ... +5 %: the crossed edge of 1.7 % takes more rounds than the plain one of 5 %
    plain = rounds_to_decide(Interval(1.01, 0.97, 1.05), settings)
    crossed = rounds_to_decide(Interval(1.01, 0.97, 1.05, crossed_effect=read), settings)
    assert plain is not None and crossed is not None and crossed > 4 * plain
    # +3.5 %, interval 0 ... +7 %: beyond the crossed edge, a regression in reach; plainly inside
    beyond = rounds_to_decide(Interval(1.035, 1.0, 1.07, crossed_effect=read), settings)
    assert beyond is not None and beyond < 40


def test_a_change_between_the_edges_is_said_to_be_beyond_the_reach_of_more_rounds() -> None:
    from harness.compare.pointers import BETWEEN, out_of_reach

    base, head = _pairs(0.03, 0.003)
    settings = Settings(metrics=(METRIC,), comparisons=11)
    got = compare_metric(
        METRIC, base, head, settings=settings, paired=True, together=True, alone=Alone(reads=READS)
    )
    assert got.verdict is Verdict.INCONCLUSIVE and got.rounds_to_decide is None
    assert "may lie within the minimum alone" in got.reason
    kind, words = out_of_reach(got)
    assert kind == BETWEEN and "both sides of the minimum effect" in words
    # the same change not crossed is unchanged: the edges are the minimum itself
    plain = compare_metric(METRIC, base, head, settings=settings, paired=True, together=True)
    assert plain.verdict is Verdict.UNCHANGED
