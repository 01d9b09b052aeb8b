"""Tests of samples taken together: the signed-rank test and the trimmed t of the pairs' log ratios."""

from __future__ import annotations

import math
import random

import pytest

from harness.compare import Settings, Verdict, compare_metric
from harness.compare.paired import log_ratios, signed_rank_test, trimmed_paired_test
from harness.record import CellInfo, Sample


def test_the_signed_rank_test_is_exact() -> None:
    # every pair higher on head: one sign pattern of 2^n at each end
    base = [1.0, 2.0, 3.0, 4.0, 5.0]
    p, attainable = signed_rank_test(base, [v * 1.1 for v in base])
    assert p == pytest.approx(2 / 32) and attainable[0] == pytest.approx(2 / 32)
    p, _ = signed_rank_test([1.0] * 12, [1.0 + 0.01 * (k + 1) for k in range(12)])
    assert p == pytest.approx(2 / 4096)
    # the smallest ratio down, the rest up: W+ = 15 - 1 of 15; P(W+ >= 14 or <= 1) = 4/32
    head = [0.99, 2.04, 3.09, 4.16, 5.25]
    assert signed_rank_test(base, head)[0] == pytest.approx(4 / 32)
    # no pair differs: nothing to test
    assert signed_rank_test(base, base) == (1.0, (1.0,))


def test_ties_share_a_midrank_and_equal_pairs_carry_no_sign() -> None:
    base = [1.0, 1.0, 1.0, 1.0, 1.0]
    head = [1.1, 1.1, 1.1, 1.1, 1.0]  # four tied ratios up, one pair equal (left out)
    p, attainable = signed_rank_test(base, head)
    assert p == pytest.approx(2 / 16)
    assert min(attainable) == pytest.approx(2 / 16)


def test_the_trimmed_t_of_the_pairs_follows_the_ratio_not_each_sides_spread() -> None:
    rng = random.Random(4)
    base = [rng.uniform(0.5, 2.0) for _ in range(12)]  # the host: x4 from pair to pair
    head = [b * 1.10 * math.exp(rng.gauss(0, 0.02)) for b in base]  # +10 %, 2 % of its own
    test = trimmed_paired_test(base, head)
    assert test.t > 0 and test.p < 1e-6 and test.logs and test.df == 12 - 2 * 2 - 1
    diffs, logs = log_ratios(base, head)
    assert logs and all(0.03 < d < 0.15 for d in diffs)


def test_a_pair_that_ran_together_is_judged_on_its_ratio() -> None:
    rng = random.Random(7)
    settings = Settings(metrics=("replay.write_p50_ms",), comparisons=56)
    base = [rng.uniform(0.08, 0.3) for _ in range(12)]
    slower = [b * 1.10 * math.exp(rng.gauss(0, 0.015)) for b in base]
    same = [b * math.exp(rng.gauss(0, 0.015)) for b in base]
    args = {"settings": settings, "paired": True}
    # on each side's values the host's spread hides +10 %; on the pairs' ratios it is clear
    apart = compare_metric("replay.write_p50_ms", base, slower, p_adjusted=None, **args)
    assert apart.verdict is Verdict.INCONCLUSIVE
    together = compare_metric("replay.write_p50_ms", base, slower, together=True, **args)
    assert together.verdict is Verdict.REGRESSION, together.reason
    aa = compare_metric("replay.write_p50_ms", base, same, together=True, **args)
    assert aa.verdict is Verdict.UNCHANGED, aa.reason


def _samples(values: list[float], *, together: bool) -> list[Sample]:
    return [
        Sample(
            index=i,
            status="ok",
            metrics={"replay.write_p50_ms": v},
            replay={"pass_wall_s": [0.5], "passes_together": 1 if together else 0},
        )
        for i, v in enumerate(values)
    ]


def test_a_family_uses_the_pairs_test_only_where_every_sample_ran_together() -> None:
    from harness.compare import compare_family

    rng = random.Random(11)
    base = [rng.uniform(0.08, 0.3) for _ in range(12)]
    head = [b * 1.12 * math.exp(rng.gauss(0, 0.01)) for b in base]
    settings = Settings(metrics=("replay.write_p50_ms",), counters=())
    cell = CellInfo({"id": "c.replay"})
    (together,) = compare_family(
        [(cell, _samples(base, together=True), _samples(head, together=True))], settings=settings
    )
    assert together.verdict is Verdict.REGRESSION, together.reason
    (apart,) = compare_family(
        [(cell, _samples(base, together=True), _samples(head, together=False))], settings=settings
    )
    assert apart.verdict is Verdict.INCONCLUSIVE


def test_the_host_canary_never_voids_a_metric_judged_on_pairs_taken_together() -> None:
    from dataclasses import replace as copy

    from harness.compare.canary import explainable

    rng = random.Random(3)
    base = [rng.uniform(0.08, 0.3) for _ in range(12)]
    head = [b * 1.12 for b in base]
    settings = Settings(metrics=("replay.write_p50_ms",))
    together = compare_metric(
        "replay.write_p50_ms", base, head, settings=settings, paired=True, together=True
    )
    assert together.together and together.to_json()["together"] is True
    # the host 30 % slower would explain +12 % on two samples; not on pairs taken together
    assert not explainable(together, 0.7)
    assert not explainable(copy(together, together=False), 0.7)  # paired by round: nor then
    assert explainable(copy(together, together=False, paired=False), 0.7)


def test_the_axis_sentence_never_names_the_bus_of_replayed_cells() -> None:
    from harness.compare.axis import axis_sentence
    from harness.compare.model import ComparedCell, FlatCell
    from harness.compare.verdict import Kind

    def cell(name: str, interface: str, measure: str, verdict: Verdict) -> ComparedCell:
        axes = FlatCell(format="qcow2", cache="none", interface=interface, measure=measure)
        return ComparedCell(cell_id=name, cell=axes, verdict=verdict, kind=Kind.METRIC, reason="")

    cells = [
        cell("a.replay", "virtio-blk", "replay", Verdict.REGRESSION),
        cell("b.replay", "virtio-blk", "replay", Verdict.REGRESSION),
        cell("c", "ide", "guest", Verdict.INCONCLUSIVE),
        cell("d", "virtio-blk", "guest", Verdict.INCONCLUSIVE),
    ]
    # the bus is never named; that the regressed cells are the replayed ones is
    assert axis_sentence(cells) == (
        "Every regressed cell has measure=replay (2 of 2 such cells regressed, 0 of 2 others)."
    )
    # guest cells that regressed on one bus are still named
    guests = [
        cell("e", "ide", "guest", Verdict.REGRESSION),
        cell("f", "ide", "guest", Verdict.REGRESSION),
        *cells[2:],
    ]
    assert "interface=ide" in (axis_sentence(guests) or "")
