"""Verdicts that fit the gate's size: a clear change is decided at the family's level, an A/A pair
is not, and an undecided metric says what limited it."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

import pytest

from harness.compare import (
    Settings,
    Verdict,
    build_comparison,
    compare_family,
    compare_metric,
    judge_family,
    render_markdown,
)
from harness.compare.evidence import RANK_GUARD, figures, holm_levels, t_share
from harness.compare.model import Side
from harness.compare.stats import mann_whitney_u, rank_test
from harness.compare.yuen import Trimmed, student_t_two_sided, trimmed, yuen_test
from harness.record import CellInfo, MachineInfo, Sample
from harness.spec import make_cell

FIO = "fio.raw-rand-write-qd1.clat_p50_ms"
# fio's QD1 medians come from its histogram's bins: 8 rounds in three bins
BINNED = [0.234496, 0.242688, 0.234496, 0.25088, 0.242688, 0.234496, 0.25088, 0.242688]


def samples(values: list[float], metric: str = FIO) -> list[Sample]:
    return [Sample(index=i, status="ok", metrics={metric: v}) for i, v in enumerate(values)]


def family_of_31(head_of_first: list[float], *, test: str = "rank-yuen", rounds: int = 8) -> list[Any]:
    """31 cells of one gated metric (31 tests, Holm at 0.01): the first with ``head_of_first``,
    the other 30 an A/A pair each."""
    rng = random.Random(5)
    base = BINNED[:rounds]
    groups = [(CellInfo(make_cell(workload="dd", dd_mib=2).as_dict()), samples(base), samples(head_of_first))]
    for i in range(30):
        b = [rng.choice(BINNED) for _ in range(rounds)]
        h = [rng.choice(BINNED) for _ in range(rounds)]
        groups.append(
            (CellInfo(make_cell(workload="dd", dd_mib=2 * i + 4).as_dict()), samples(b), samples(h))
        )
    settings = Settings(metrics=(FIO,), counters=(), test=test)
    family = judge_family(groups, settings=settings)
    doc = build_comparison(
        family.cells,
        settings=family.settings,
        base=Side(),
        head=Side(),
        machine=MachineInfo(),
        created_at="x",
    ).to_json()
    assert doc["settings"]["comparisons"] == 31
    return family.cells


def test_a_x4_change_with_complete_separation_and_ties_is_a_regression_in_a_family_of_31() -> None:
    head = [v * 4 for v in BINNED]
    cells = family_of_31(head)
    first = cells[0].metrics[0]
    assert cells[0].verdict is Verdict.REGRESSION
    assert first.verdict is Verdict.REGRESSION
    assert first.reason.startswith("worse by +300.0%")
    # the exact rank test with ties: every head above every base is 2/C(16,8), below 0.01/31
    assert first.p_value == pytest.approx(2 / math.comb(16, 8))
    assert first.p_adjusted is not None and first.p_adjusted < 0.01
    # the normal approximation under ties said 8.0e-4 here: never below 0.01/31
    assert mann_whitney_u(head, BINNED)[1] == pytest.approx(8.0e-4, rel=0.01)


def test_an_aa_pair_with_the_same_ties_is_no_regression() -> None:
    head = [BINNED[i] for i in (3, 0, 7, 1, 6, 2, 5, 4)]
    cells = family_of_31(head)
    assert all(c.verdict is not Verdict.REGRESSION for c in cells)
    first = cells[0].metrics[0]
    assert first.p_value == 1.0
    # the interval of the medians crosses the edge of 5%: more rounds, not the floor
    assert first.reason.startswith("needs more rounds: +0.0%")
    assert "cannot go below" not in first.reason


def test_before_the_floor_stopped_it_and_the_reason_says_so_with_the_rounds() -> None:
    cells = family_of_31([v * 4 for v in BINNED], test="mann-whitney")
    first = cells[0].metrics[0]
    assert first.verdict is Verdict.INCONCLUSIVE
    assert first.reason.startswith("needs more rounds for the family's level: +300.0%")
    assert "lies beyond the minimum effect 5%" in first.reason
    assert "at 8+8 rounds the rank test cannot go below p=0.0008 with these ties" in first.reason
    assert "about 9 rounds would reach it" in first.reason
    assert "too noisy" not in first.reason


def test_below_the_rank_floor_the_t_test_on_logs_takes_the_level() -> None:
    # 6 rounds: the rank test cannot go below 2/C(12,6) = 2.2e-3, far above 0.01/31
    head = [v * 4 for v in BINNED[:6]]
    first = family_of_31(head, rounds=6)[0].metrics[0]
    assert first.verdict is Verdict.REGRESSION
    assert "(Yuen t on logs)" in first.reason
    before = family_of_31(head, rounds=6, test="mann-whitney")[0].metrics[0]
    assert before.verdict is Verdict.INCONCLUSIVE
    assert "at 6+6 rounds the rank test cannot go below p=0.0043 with these ties" in before.reason


def test_the_t_route_only_gets_the_level_the_rank_test_leaves() -> None:
    settings = Settings(comparisons=31, test="rank-yuen")
    levels = holm_levels(settings, family=True)
    assert levels[0] == pytest.approx(0.01 / 31) and levels[-1] == 0.01
    fig = figures(BINNED, [v * 4 for v in BINNED], settings)
    # at 8 + 8 (ties within the sides only) the rank test can say 1.6e-4 below 3.2e-4, then
    # 1.1e-3: the t test gets what the rank test leaves at each level, the least over the levels
    assert fig.attainable[:2] == pytest.approx([2 / 12870, 14 / 12870])
    share = t_share(fig, levels[0], levels)
    assert 0 < share <= levels[0] - 2 / 12870
    # at 6 + 6 the rank test's floor is above every level up to 0.01/5: all of it goes to t
    six = figures(BINNED[:6], [v * 4 for v in BINNED[:6]], settings)
    assert t_share(six, levels[0], levels) == pytest.approx(levels[0])
    assert RANK_GUARD == 0.05


def test_a_metric_beyond_its_minimum_effect_in_a_decided_cell_says_what_it_is() -> None:
    # the gate as it decided before, at 0.01/31: total_s (no ties) regressed at the rank test's
    # floor 1.6e-4, the binned fio median moved x4 with p = 8.0e-4 (ties): not significant alone
    base = samples([10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.01], "total_s")
    head = samples([13.0, 13.1, 12.9, 13.05, 12.95, 13.02, 12.98, 13.01], "total_s")
    for side, values in ((base, BINNED), (head, [v * 4 for v in BINNED])):
        side[:] = [replace(s, metrics={**s.metrics, FIO: v}) for s, v in zip(side, values, strict=True)]
    settings = Settings(
        metrics=("total_s", FIO), counters=(), comparisons=31, correction="bonferroni", test="mann-whitney"
    )
    cells = compare_family(
        [(CellInfo(make_cell(workload="dd", dd_mib=2).as_dict()), base, head)], settings=settings
    )
    fio = next(m for m in cells[0].metrics if m.metric == FIO)
    assert cells[0].verdict is Verdict.REGRESSION
    assert fio.verdict is Verdict.INCONCLUSIVE
    doc = build_comparison(
        cells, settings=settings, base=Side(), head=Side(), machine=MachineInfo(), created_at="x"
    )
    rows = [line for line in render_markdown(doc).splitlines() if line.startswith("| ")]
    fio_row = next(line for line in rows if FIO in line)
    assert fio_row.endswith("| worse beyond 5%, not yet significant alone |")
    assert next(line for line in rows if "total_s" in line).endswith("| regression |")
    # with the new test both are regressions
    now = compare_family(
        [(CellInfo(make_cell(workload="dd", dd_mib=2).as_dict()), base, head)],
        settings=Settings(metrics=("total_s", FIO), counters=(), comparisons=31, correction="bonferroni"),
    )
    assert [m.verdict for m in now[0].metrics] == [Verdict.REGRESSION, Verdict.REGRESSION]


def test_too_noisy_only_when_the_interval_is_wide_against_the_minimum_effect() -> None:
    settings = Settings()
    narrow = compare_metric(
        "total_s",
        [100.0, 101.0, 99.0, 100.5, 99.5, 100.2],
        [104.0, 106.0, 103.0, 107.0, 105.0, 108.5],
        settings=Settings(comparisons=1000, correction="bonferroni"),
        paired=False,
    )
    assert narrow.verdict is Verdict.INCONCLUSIVE
    assert narrow.reason.startswith("needs more rounds")
    wide = compare_metric(
        "total_s",
        [100.0, 60.0, 140.0, 90.0, 120.0, 70.0],
        [110.0, 75.0, 150.0, 95.0, 130.0, 80.0],
        settings=settings,
        paired=False,
    )
    assert wide.reason.startswith("too noisy:")
    assert "wider than the band of the minimum effect ±5%" in wide.reason


# --- the tests themselves -------------------------------------------------------------------------


def test_the_exact_rank_test_with_ties_counts_every_split() -> None:
    # a = [1, 2, 2], b = [2, 3]: midranks 1, 3, 3, 3, 5; a's sum 7 is 2 from the mean 9; of the
    # 10 splits of three values, 3 give 7 ({1} and two 2s) and 3 give 11 (two 2s and {3})
    p, attainable = rank_test([1, 2, 2], [2, 3])
    assert p == pytest.approx(6 / 10)
    assert attainable == pytest.approx((0.6, 1.0))
    assert rank_test([1, 2, 3, 4], [5, 6, 7, 8])[0] == pytest.approx(2 / 70)
    assert rank_test([3, 3, 3], [3, 3, 3]) == (1.0, (1.0,))


def test_student_t_matches_the_tables() -> None:
    assert student_t_two_sided(2.228139, 10) == pytest.approx(0.05, abs=1e-6)
    assert student_t_two_sided(3.169273, 10) == pytest.approx(0.01, abs=1e-6)
    assert student_t_two_sided(12.706205, 1) == pytest.approx(0.05, abs=1e-6)
    assert student_t_two_sided(1.959964, 1e7) == pytest.approx(0.05, abs=1e-5)
    assert student_t_two_sided(0.0, 5) == 1.0


def test_trimming_keeps_the_middle_for_the_mean_and_winsorizes_the_ends_for_the_variance() -> None:
    # a fifth of 5 values is 1 at each end: the mean of 2, 3, 4; the variance of 2, 2, 3, 4, 4
    assert trimmed([100.0, 3.0, 1.0, 4.0, 2.0], 0.2) == Trimmed(3.0, 1.0, kept=3, n=5)
    # nothing trimmed: the mean and the sample variance
    assert trimmed([1.0, 2.0, 6.0], 0.2) == Trimmed(3.0, 7.0, kept=3, n=3)


def test_yuen_on_logs_sees_a_ratio_and_a_constant_side_keeps_its_binning() -> None:
    x4 = yuen_test(BINNED, [v * 4 for v in BINNED])
    assert x4.logs and x4.t > 0 and x4.p < 1e-10
    same = yuen_test(BINNED, list(reversed(BINNED)))
    assert same.p == 1.0
    # one constant against another: only the bins' width is the spread, t = 6 at 8 + 8
    constant = yuen_test([99.0] * 8, [0.0] * 8)
    assert not constant.logs and constant.t == pytest.approx(-6.0)
