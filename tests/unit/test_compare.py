"""The gate's statistics: known distributions give known verdicts; the document and the command."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from recordkit import MACHINE

from harness.cli import main
from harness.compare import (
    ComparedCell,
    Kind,
    Settings,
    Verdict,
    apply_canary,
    axis_sentence,
    bootstrap_ratio_ci,
    build_comparison,
    compare_cell,
    compare_metric,
    compare_records,
    mann_whitney_u,
    needs_more_rounds,
    overall_verdict,
    parse_rule,
    render_markdown,
    validate_comparison,
)
from harness.compare.comparison import load_comparison, write_comparison
from harness.compare.document import Context
from harness.compare.model import Budget, Comparison, DiffEntry, FlatCell, Side
from harness.errors import UsageError
from harness.record import CellInfo, Record, Sample, new_record, write_record
from harness.record.model import MachineInfo
from harness.spec import make_cell

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "comparison.schema.json"


SETTINGS = Settings()


def gauss(seed: int, n: int, mean: float, cv: float) -> list[float]:
    rng = random.Random(seed)
    return [mean * rng.gauss(1.0, cv) for _ in range(n)]


def samples(values: Sequence[float], metric: str = "total_s", **more: Sequence[float]) -> list[Sample]:
    """Ok samples of rounds 0..n-1 carrying ``metric`` (and the ``more`` figures, by round)."""
    out = []
    for index, value in enumerate(values):
        figures = {metric: value} | {name.replace("__", "."): vals[index] for name, vals in more.items()}
        out.append(Sample(index=index, status="ok", metrics=figures))
    return out


def failed(n: int, reason: str = "guest workload failed: dd: write error") -> list[Sample]:
    return [Sample(index=i, status="error", reason=reason) for i in range(n)]


def cell_dict(**axes: Any) -> dict[str, Any]:
    return make_cell(**({"workload": "dd", "dd_mib": 64} | axes)).as_dict()


def cell_info(**axes: Any) -> CellInfo:
    return CellInfo(cell_dict(**axes))


# --- Mann-Whitney ---------------------------------------------------------------------------------


def test_mann_whitney_exact_matches_the_textbook() -> None:
    # all 4 of a below all 4 of b: U = 0, one of C(8,4) = 70 orderings each way
    u, p = mann_whitney_u([1, 2, 3, 4], [5, 6, 7, 8])
    assert u == 0
    assert p == pytest.approx(2 / 70)
    u, p = mann_whitney_u([5, 6, 7, 8], [1, 2, 3, 4])
    assert u == 16
    assert p == pytest.approx(2 / 70)
    # n = 5 each: 2 / C(10,5) = 2/252
    assert mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])[1] == pytest.approx(2 / 252)
    # one swap: U = 1, P(U <= 1) = 2/70, two-sided 4/70
    assert mann_whitney_u([1, 2, 3, 5], [4, 6, 7, 8]) == (1.0, pytest.approx(4 / 70))


def test_mann_whitney_with_ties_uses_the_corrected_normal_approximation() -> None:
    # a = 1 2 2 3, b = 2 3 4 5: U = 0.5 + 0.5 + 1.5 = 2.5; ties 2 (x3) and 3 (x2):
    # var = 4*4/12 * (9 - (24 + 6)/(8*7)) = 11.2857; z = (|2.5 - 8| - 0.5)/3.3594 = 1.4884
    # p = 2 * (1 - Phi(1.4884)) = 0.1367
    u, p = mann_whitney_u([1, 2, 2, 3], [2, 3, 4, 5])
    assert u == 2.5
    assert p == pytest.approx(0.1367, abs=1e-4)


def test_mann_whitney_all_tied_or_empty_is_no_evidence() -> None:
    assert mann_whitney_u([3, 3, 3], [3, 3, 3]) == (4.5, 1.0)
    assert mann_whitney_u([], [1, 2])[1] == 1.0


def test_mann_whitney_large_samples_use_the_approximation() -> None:
    a = [float(i) for i in range(30)]
    b = [float(i) + 0.5 for i in range(30)]
    _u, p = mann_whitney_u(a, b)
    assert 0.5 < p < 1.0
    _u, p = mann_whitney_u(a, [x + 100 for x in a])
    assert p < 1e-9


# --- bootstrap ------------------------------------------------------------------------------------


def test_bootstrap_is_deterministic_and_contains_the_true_ratio() -> None:
    base = gauss(1, 8, 100.0, 0.03)
    head = gauss(2, 8, 120.0, 0.03)
    first = bootstrap_ratio_ci(base, head, confidence=0.95, n=2000, seed=7, paired=False)
    again = bootstrap_ratio_ci(base, head, confidence=0.95, n=2000, seed=7, paired=False)
    assert first == again
    lo, hi = first
    assert lo < 1.2 < hi
    assert hi - lo < 0.12


def test_paired_bootstrap_cancels_a_host_that_drifts_between_rounds() -> None:
    # the host speeds up 30% over the rounds; head is 10% slower than base in every round
    drift = [1.0 - 0.04 * k for k in range(8)]
    jitter = gauss(3, 8, 1.0, 0.005)
    base = [100.0 * d for d in drift]
    head = [110.0 * d * j for d, j in zip(drift, jitter, strict=True)]
    paired = bootstrap_ratio_ci(base, head, confidence=0.95, n=2000, seed=0, paired=True)
    unpaired = bootstrap_ratio_ci(base, head, confidence=0.95, n=2000, seed=0, paired=False)
    assert paired[0] < 1.10 < paired[1]
    assert paired[1] - paired[0] < (unpaired[1] - unpaired[0]) / 3
    assert paired[0] > 1.05


def test_bootstrap_of_zero_medians_does_not_divide_by_zero() -> None:
    assert bootstrap_ratio_ci([0, 0, 0, 0], [0, 0, 0, 0], confidence=0.95, n=200, seed=0, paired=True) == (
        1.0,
        1.0,
    )
    lo, hi = bootstrap_ratio_ci([0, 0, 0, 1], [0, 0, 1, 1], confidence=0.95, n=200, seed=0, paired=False)
    assert lo <= hi


# --- one metric -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_a_20_percent_slowdown_with_3_percent_noise_at_n8_is_a_regression(seed: int) -> None:
    base = gauss(seed, 8, 100.0, 0.03)
    head = gauss(seed + 1000, 8, 120.0, 0.03)
    result = compare_metric("total_s", base, head, settings=SETTINGS, paired=True)
    assert result.verdict is Verdict.REGRESSION
    assert result.ratio is not None and 1.12 < result.ratio < 1.28
    assert result.ci_low is not None and result.ci_low > 1.0
    assert result.p_value is not None and result.p_value < 0.05
    assert result.reason.startswith("worse by +")


def test_identical_distributions_rarely_raise_a_false_alarm() -> None:
    # TCG-like noise (10 %), n = 8: over 200 seeds, at most alpha (5 %) plus slack
    settings = Settings(bootstrap=500)
    alarms = 0
    for seed in range(200):
        base = gauss(seed, 8, 100.0, 0.10)
        head = gauss(seed + 10_000, 8, 100.0, 0.10)
        verdict = compare_metric("total_s", base, head, settings=settings, paired=True).verdict
        alarms += verdict is Verdict.REGRESSION
    assert alarms <= 200 * 0.05 + 5


@pytest.mark.parametrize("seed", range(5))
def test_a_10_percent_shift_with_2_percent_noise_at_n6_is_a_regression(seed: int) -> None:
    base = gauss(seed, 6, 50.0, 0.02)
    head = gauss(seed + 1000, 6, 55.0, 0.02)
    assert compare_metric("total_s", base, head, settings=SETTINGS, paired=True).verdict is Verdict.REGRESSION


def test_falling_throughput_is_a_regression_and_rising_an_improvement() -> None:
    base = gauss(4, 8, 1500.0, 0.02)
    slower = gauss(5, 8, 1200.0, 0.02)
    result = compare_metric("mib_per_s", base, slower, settings=SETTINGS, paired=True)
    assert result.higher_is_better
    assert result.verdict is Verdict.REGRESSION
    assert result.ratio is not None and result.ratio < 1.0
    assert "(higher is better)" in result.reason
    faster = compare_metric("mib_per_s", slower, base, settings=SETTINGS, paired=True)
    assert faster.verdict is Verdict.IMPROVEMENT


def test_a_faster_time_is_an_improvement() -> None:
    base = gauss(6, 8, 100.0, 0.02)
    head = gauss(7, 8, 80.0, 0.02)
    assert (
        compare_metric("total_s", base, head, settings=SETTINGS, paired=True).verdict is Verdict.IMPROVEMENT
    )


def test_significant_but_smaller_than_the_minimum_effect_is_inconclusive_and_says_why() -> None:
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 100.8, 99.2]
    head = [103.0, 104.5, 101.5, 103.5, 102.0, 106.5, 101.8, 107.0]
    result = compare_metric("total_s", base, head, settings=SETTINGS, paired=True)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert "smaller than the minimum effect 5%, and the interval reaches it" in result.reason
    # with a 2% rule the same change is a regression
    ruled = Settings(min_effect_by_metric={"total_s": 0.02})
    assert compare_metric("total_s", base, head, settings=ruled, paired=True).verdict is Verdict.REGRESSION


def test_a_small_steady_change_inside_the_minimum_effect_is_unchanged() -> None:
    base = gauss(8, 8, 100.0, 0.005)
    head = gauss(9, 8, 101.0, 0.005)
    result = compare_metric("total_s", base, head, settings=SETTINGS, paired=True)
    assert result.verdict is Verdict.UNCHANGED
    assert "within the minimum effect ±5%" in result.reason


def test_too_noisy_is_inconclusive_with_the_interval() -> None:
    base = [100.0, 60.0, 140.0, 90.0, 120.0, 70.0]
    head = [110.0, 75.0, 150.0, 95.0, 130.0, 80.0]
    result = compare_metric("total_s", base, head, settings=SETTINGS, paired=False)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.reason.startswith("too noisy:")
    assert "±" in result.reason


def test_too_few_samples_are_inconclusive() -> None:
    result = compare_metric("total_s", [1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], settings=SETTINGS, paired=False)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.reason == "n too small: base 3, head 4 samples, need 4 each"
    assert result.p_value is None and result.ci_low is None


def test_equal_constant_counters_are_unchanged_even_at_zero() -> None:
    for value in (0.0, 240.0):
        result = compare_metric("host.flushes", [value] * 6, [value] * 6, settings=SETTINGS, paired=True)
        assert result.verdict is Verdict.UNCHANGED
        assert result.ratio == 1.0
        assert result.reason.startswith("identical constant samples")


def test_a_counter_rising_from_zero_is_a_regression_with_a_json_safe_ratio() -> None:
    result = compare_metric("host.flushes", [0.0] * 6, [5.0] * 6, settings=SETTINGS, paired=True)
    assert result.verdict is Verdict.REGRESSION
    assert result.ratio is None and result.head_over_base == math.inf
    data = result.to_json()
    assert data["ratio"] is None and data["change_pct"] is None
    json.dumps(data, allow_nan=False)


def test_parse_rule_and_effect_for() -> None:
    assert parse_rule("total_s:5%") == ("total_s", 0.05)
    assert parse_rule("host.flushes:1%") == ("host.flushes", 0.01)
    assert parse_rule("phase.unpack_s:+2.5") == ("phase.unpack_s", 0.025)
    with pytest.raises(UsageError, match=r"rule 'total_s': write METRIC:PERCENT, e.g. total_s:5%"):
        parse_rule("total_s")
    with pytest.raises(
        UsageError,
        match=r"rule 'total_s:fast': 'fast' is not a percentage of 0 or more: write e.g. total_s:5%",
    ):
        parse_rule("total_s:fast")
    with pytest.raises(UsageError, match=r"rule 'speed:5%': unknown metric 'speed'"):
        parse_rule("speed:5%")
    settings = Settings(min_effect_by_metric={"total_s": 0.03})
    assert settings.effect_for("total_s") == 0.03
    assert settings.effect_for("host.flushes") == 0.02
    assert settings.effect_for("phase.mkfs_s") == 0.05


def test_bad_settings_are_usage_errors() -> None:
    with pytest.raises(UsageError, match=r"alpha 1\.5: use a value between 0 and 1"):
        Settings(alpha=1.5)
    with pytest.raises(UsageError, match="min_samples 1"):
        Settings(min_samples=1)


# --- one cell -------------------------------------------------------------------------------------


def test_counters_explain_a_time_regression() -> None:
    base = samples(gauss(10, 8, 100.0, 0.02), host__write_amplification=gauss(11, 8, 1.001, 0.0003))
    head = samples(gauss(12, 8, 125.0, 0.02), host__write_amplification=gauss(13, 8, 1.027, 0.0003))
    result = compare_cell(cell_info(), base, head, settings=SETTINGS)
    assert result.verdict is Verdict.REGRESSION
    assert result.kind is Kind.METRIC
    # the counter moved beyond its threshold (changed), but a time regression outranks it
    assert result.counter_verdict is Verdict.CHANGED
    assert result.counters[0].verdict is Verdict.REGRESSION
    assert [c.metric for c in result.counters] == ["host.write_amplification"]
    assert result.note.startswith("explained by: host.write_amplification +2.")
    assert "(1.001 → 1.027)" in result.note
    assert result.metrics[0].paired


def test_a_counter_change_under_steady_time_is_a_structural_change() -> None:
    base = samples(gauss(14, 8, 100.0, 0.005), host__flushes=[200.0] * 8)
    head = samples(gauss(15, 8, 100.0, 0.005), host__flushes=[100.0] * 8)
    result = compare_cell(cell_info(), base, head, settings=SETTINGS)
    # never folded into unchanged or inconclusive: the IO changed
    assert result.verdict is Verdict.CHANGED
    assert result.kind is Kind.COUNTER
    assert result.time_verdict is Verdict.UNCHANGED
    assert result.counter_verdict is Verdict.CHANGED
    assert result.counters[0].verdict is Verdict.IMPROVEMENT
    assert result.reason.startswith("the IO changed: host.flushes -50.0% (200 → 100): better by")
    assert "time: unchanged" in result.reason
    assert result.note == "structural change: host.flushes -50.0% (200 → 100)"
    assert not needs_more_rounds(result)


def test_both_sides_failed_is_an_error_never_unchanged() -> None:
    result = compare_cell(cell_info(), failed(4), failed(4), settings=SETTINGS)
    assert result.verdict is Verdict.ERROR
    assert result.kind is Kind.BOTH_FAILED
    assert result.reason.startswith("both sides failed: base failed 4 of 4 samples")
    assert not needs_more_rounds(result)


def test_head_failing_where_base_works_is_a_regression_of_its_own_kind() -> None:
    base = samples([10.0] * 4)
    head = samples([10.0]) + failed(3, reason="qemu-img check says corrupt (exit 2)")
    result = compare_cell(cell_info(), base, head, settings=SETTINGS)
    assert result.verdict is Verdict.REGRESSION
    assert result.kind is Kind.FAILURE
    assert "head failed 3 of 4 samples (first: qemu-img check says corrupt (exit 2))" in result.reason
    assert (result.head_ok, result.head_failed) == (1, 3)
    assert not needs_more_rounds(result)


def test_base_failing_is_an_error() -> None:
    result = compare_cell(cell_info(), failed(4), samples([10.0] * 4), settings=SETTINGS)
    assert (result.verdict, result.kind) == (Verdict.ERROR, Kind.BASE_FAILED)


def test_a_minority_of_failed_samples_is_compared_and_mentioned() -> None:
    base = samples(gauss(16, 8, 100.0, 0.02))
    head = samples(gauss(17, 7, 130.0, 0.02)) + failed(1)
    head[-1] = replace(head[-1], index=7)
    result = compare_cell(cell_info(), base, head, settings=SETTINGS)
    assert result.verdict is Verdict.REGRESSION
    assert result.kind is Kind.METRIC
    assert "head failed 1 of 8 samples" in result.reason
    assert not result.metrics[0].paired  # round 7 of head has no figure


def test_inconclusive_for_noise_asks_for_more_rounds() -> None:
    base = samples([100.0, 60.0, 140.0, 90.0, 120.0, 70.0])
    head = samples([110.0, 75.0, 150.0, 95.0, 130.0, 80.0])
    result = compare_cell(cell_info(), base, head, settings=SETTINGS)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert needs_more_rounds(result)


def test_cell_axes_are_flattened() -> None:
    cell = cell_dict(interface="ide", cache="none") | {"gate_name": "ide-dd"}
    result = compare_cell(CellInfo(cell), samples([1.0] * 4), samples([1.0] * 4), settings=SETTINGS)
    assert result.cell.to_json() == {
        "format": "qcow2",
        "preallocation": "off",
        "cluster_size": 65536,
        "cache": "none",
        "aio": "threads",
        "interface": "ide",
        "workload": "dd-64m-2m-ext4",
        "cache_state": "fresh",
        "gate_name": "ide-dd",
    }


# --- many cells -----------------------------------------------------------------------------------


def regressed_cell(seed: int = 20, **axes: Any) -> ComparedCell:
    return compare_cell(
        cell_info(**axes),
        samples(gauss(seed, 8, 100.0, 0.02)),
        samples(gauss(seed + 1, 8, 120.0, 0.02)),
        settings=SETTINGS,
    )


def steady_cell(seed: int = 30, **axes: Any) -> ComparedCell:
    return compare_cell(
        cell_info(**axes),
        samples(gauss(seed, 8, 100.0, 0.005)),
        samples(gauss(seed + 1, 8, 100.0, 0.005)),
        settings=SETTINGS,
    )


def later(rows: list[Sample]) -> list[Sample]:
    """``rows`` as samples of other rounds than base's (head's, taken after base's)."""
    return [replace(row, index=(row.index or 0) + 100) for row in rows]


def unpaired_regressed_cell(seed: int = 20) -> ComparedCell:
    """A cell whose head is slower by about 20 %, its samples taken in rounds of their own."""
    return compare_cell(
        cell_info(),
        samples(gauss(seed, 8, 100.0, 0.02)),
        later(samples(gauss(seed + 1, 8, 120.0, 0.02))),
        settings=SETTINGS,
    )


def test_a_moving_canary_turns_a_regression_inconclusive() -> None:
    cells = [unpaired_regressed_cell(), steady_cell()]
    assert cells[0].verdict is Verdict.REGRESSION and not cells[0].metrics[0].paired
    # total_s about +20% on samples taken apart from base's: a host 25% slower could explain it
    out, canary = apply_canary(cells, before_mib_s=1500.0, after_mib_s=1200.0, settings=SETTINGS)
    assert canary.to_json() == {
        "before_mib_s": 1500.0,
        "after_mib_s": 1200.0,
        "change": 0.8,
        "moved": True,
        "voided": [cells[0].cell_id],
        "kept": [],
    }
    assert out[0].verdict is Verdict.INCONCLUSIVE
    assert out[0].kind is Kind.CANARY
    assert out[0].reason.startswith(
        "the host's own disk moved by -20.0% during the run (canary 1500 → 1200 MiB/s)"
    )
    assert out[1] == cells[1]
    assert not needs_more_rounds(out[0])
    steady, canary = apply_canary(cells, before_mib_s=1500.0, after_mib_s=1480.0, settings=SETTINGS)
    assert steady == cells and canary.to_json()["moved"] is False


def test_a_canary_explains_no_change_of_samples_taken_in_the_same_rounds() -> None:
    # base and head ran in each round (order drawn): a host 25 % slower hit both alike
    cells = [regressed_cell()]
    assert cells[0].metrics[0].paired
    out, canary = apply_canary(cells, before_mib_s=1500.0, after_mib_s=1200.0, settings=SETTINGS)
    assert out == cells and canary.moved is True
    assert canary.voided == () and canary.kept == (cells[0].cell_id,)


def test_a_canary_explains_only_a_change_its_way() -> None:
    # the host got 25 % faster: it cannot explain a head 20 % slower
    cells = [unpaired_regressed_cell()]
    out, canary = apply_canary(cells, before_mib_s=1200.0, after_mib_s=1500.0, settings=SETTINGS)
    assert out == cells and canary.voided == ()


def test_a_canary_move_smaller_than_the_change_voids_nothing() -> None:
    cells = [unpaired_regressed_cell()]
    # the host moved -10%, total_s +20%: the host cannot explain it
    out, canary = apply_canary(cells, before_mib_s=1500.0, after_mib_s=1350.0, settings=SETTINGS)
    assert canary.to_json()["moved"] is True
    assert out == cells
    assert canary.to_json()["voided"] == [] and canary.to_json()["kept"] == [cells[0].cell_id]


def test_a_moving_canary_never_voids_a_changed_counter() -> None:
    changed = compare_cell(
        cell_info(),
        samples(gauss(14, 8, 100.0, 0.005), host__flushes=[200.0] * 8),
        samples(gauss(15, 8, 100.0, 0.005), host__flushes=[0.0] * 8),
        settings=SETTINGS,
    )
    assert changed.verdict is Verdict.CHANGED
    out, canary = apply_canary([changed], before_mib_s=1500.0, after_mib_s=500.0, settings=SETTINGS)
    assert out == [changed]
    assert canary.to_json()["voided"] == []


def test_a_moving_canary_leaves_failures_alone() -> None:
    failure = compare_cell(cell_info(), samples([1.0] * 4), failed(4), settings=SETTINGS)
    out, _ = apply_canary([failure], before_mib_s=1500.0, after_mib_s=1000.0, settings=SETTINGS)
    assert out[0] is failure


def test_axis_sentence_names_the_shared_interface() -> None:
    cells = [
        regressed_cell(20, interface="ide"),
        regressed_cell(22, interface="ide", cache="none"),
        steady_cell(30),
        steady_cell(32, cache="none"),
        steady_cell(34, interface="nvme"),
    ]
    assert [c.verdict for c in cells[:2]] == [Verdict.REGRESSION] * 2
    assert axis_sentence(cells) == (
        "Every regressed cell has interface=ide (2 of 2 such cells regressed, 0 of 3 others)."
    )
    assert axis_sentence([cells[0], *cells[2:]]) is None  # one changed cell is no pattern
    assert axis_sentence(cells[2:]) is None


def test_overall_verdict_order() -> None:
    reg, steady = regressed_cell(), steady_cell()
    err = compare_cell(cell_info(), failed(4), failed(4), settings=SETTINGS)
    assert overall_verdict([steady, err, reg]) is Verdict.REGRESSION
    assert overall_verdict([steady, err]) is Verdict.ERROR
    assert overall_verdict([steady]) is Verdict.UNCHANGED
    assert overall_verdict([]) is Verdict.UNCHANGED


def record(cell: Mapping[str, Any], sample_list: list[Sample], **machine: Any) -> Record:
    rec = new_record(
        cell=dict(cell),
        machine=MACHINE | machine,
        subject={"guest": {"recipe_hash": "abc"}},
        vm={"accel": "kvm", "mem_mib": 256, "smp": 1},
        run_id="gate",
    )
    return replace(rec, samples=tuple(sample_list))


def test_compare_records_joins_records_of_a_cell_and_reports_missing_cells() -> None:
    a, b = cell_dict(), cell_dict(format="raw")
    base = [record(a, samples([1.0, 1.0])), record(a, samples([1.0, 1.0])), record(b, samples([2.0] * 4))]
    head = [record(a, samples([1.0] * 4))]
    cells = compare_records(base, head, settings=SETTINGS)
    by_id = {c.cell_id: c for c in cells}
    assert by_id[a["id"]].base_ok == 4
    assert by_id[a["id"]].verdict is Verdict.UNCHANGED
    assert not by_id[a["id"]].metrics[0].paired  # base has rounds 0, 1 twice
    missing = by_id[b["id"]]
    assert (missing.verdict, missing.kind) == (Verdict.ERROR, Kind.MISSING)
    assert missing.reason.startswith("no head record of this cell")


# --- the document ---------------------------------------------------------------------------------

KNOWN_KEYWORDS = {
    "$schema",
    "$id",
    "$defs",
    "$ref",
    "title",
    "description",
    "type",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
}

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def validate(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], where: str = "$") -> list[str]:
    """The subset of JSON Schema 2020-12 that docs/comparison.schema.json uses."""
    errors: list[str] = []
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        errors += validate(value, root["$defs"][ref.removeprefix("#/$defs/")], root, where)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](value) for t in types):
            return [*errors, f"{where}: {value!r} is not {types}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and TYPES["number"](value) and value < schema["minimum"]:
        errors.append(f"{where}: {value!r} < {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: lacks {key!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                errors += validate(item, props[key], root, f"{where}.{key}")
            elif extra is False:
                errors.append(f"{where}: unexpected {key!r}")
            elif isinstance(extra, dict):
                errors += validate(item, extra, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += validate(item, schema["items"], root, f"{where}[{i}]")
    return errors


def keywords(schema: Any, found: set[str]) -> set[str]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key in ("properties", "$defs"):
                for sub in value.values():
                    keywords(sub, found)
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                keywords(value, found)
    return found


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    assert data["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    unknown = keywords(data, set()) - KNOWN_KEYWORDS
    assert not unknown, f"the test's validator does not check {unknown}"
    return data


def sample_document(accel: str = "kvm") -> Comparison:
    cells = [
        regressed_cell(20, interface="ide"),
        regressed_cell(22, interface="ide", cache="none"),
        steady_cell(30),
        compare_cell(
            cell_info(format="raw"),
            samples([1.0] * 4),
            failed(4, reason="guest workload failed: dd | tee: No space left on device"),
            settings=SETTINGS,
        ),
        compare_cell(cell_info(cache="none"), failed(4), failed(4), settings=SETTINGS),
        compare_cell(
            cell_info(interface="nvme"),
            samples(gauss(40, 8, 100.0, 0.005), host__flushes=[200.0] * 8),
            samples(gauss(41, 8, 100.0, 0.005), host__flushes=[100.0] * 8),
            settings=SETTINGS,
        ),
    ]
    cells, canary = apply_canary(cells, before_mib_s=1500.0, after_mib_s=1490.0, settings=SETTINGS)
    return build_comparison(
        cells,
        settings=SETTINGS,
        base=Side.from_json({"label": "base", "rev": "abc123", "subject": {"policy": {"name": "default"}}}),
        head=Side.from_json({"label": "head", "rev": "def456", "subject": {}}),
        machine=MachineInfo(MACHINE | {"accel": accel}),
        created_at="2025-01-01T00:00:00+00:00",
        context=Context(canary=canary, budget=Budget.from_json({"minutes": 30, "spent_min": 12.5})),
    )


def test_a_gate_documents_policy_reach_is_valid_against_its_schema(schema: dict[str, Any]) -> None:
    from harness.compare.document import with_policy_reach
    from harness.gate.reach import policy_reach
    from harness.gate.spec import GATE_SPEC, load_gate_spec
    from harness.subject.policy import parse_policy

    own = (Path(__file__).resolve().parents[2] / "policy.toml").read_text()
    base = parse_policy(own)
    head = parse_policy(own.replace('aio = "threads"', 'aio = "native"'))
    value = sample_document()
    aio = DiffEntry(what="aio", base="threads", head="native")
    value = replace(value, summary=replace(value.summary, subject_diff=(aio,)))
    reach = policy_reach(load_gate_spec(GATE_SPEC), base, head)
    doc = with_policy_reach(value, [], reach).to_json()
    assert doc["summary"]["subject_diff"][0]["reach"]["applied"]
    assert len(doc["summary"]["policy_held"]) == 4
    assert validate(doc, schema, schema) == []


def test_the_document_is_valid_against_its_schema(schema: dict[str, Any]) -> None:
    doc = sample_document().to_json()
    json.dumps(doc, allow_nan=False)
    assert validate(doc, schema, schema) == []
    assert doc["verdict"] == "regression"
    assert doc["accel"] == "kvm"
    assert doc["summary"]["counts"] == {
        "regression": 3,
        "improvement": 0,
        "unchanged": 1,
        "inconclusive": 0,
        "error": 1,
        "changed": 1,
    }
    assert doc["summary"]["changed"] == [
        {
            "cell_id": doc["cells"][-1]["cell_id"],
            "name": doc["cells"][-1]["cell_id"],
            "counters": ["host.flushes -50.0% (200 → 100)"],
        }
    ]
    assert doc["summary"]["fails"] is True
    assert doc["summary"]["structural_changes"] == [
        {"cell_id": doc["cells"][-1]["cell_id"], "note": "structural change: host.flushes -50.0% (200 → 100)"}
    ]
    nulls = build_comparison(
        [],
        settings=SETTINGS,
        base=Side.from_json({}),
        head=Side.from_json({}),
        machine=MachineInfo(),
        created_at="x",
    ).to_json()
    assert validate(nulls, schema, schema) == [
        "$.base: lacks 'label'",
        "$.base: lacks 'rev'",
        "$.base: lacks 'subject'",
        "$.head: lacks 'label'",
        "$.head: lacks 'rev'",
        "$.head: lacks 'subject'",
    ]


def test_the_validator_catches_a_broken_document(schema: dict[str, Any]) -> None:
    doc = sample_document().to_json()
    doc["cells"][0]["verdict"] = "slower"
    del doc["cells"][1]["metrics"][0]["p_value"]
    doc["summary"]["extra"] = 1
    errors = validate(doc, schema, schema)
    assert (
        "$.cells[0].verdict: 'slower' not in ['regression', 'changed', 'improvement', 'unchanged', 'inconclusive', 'error']"
        in errors
    )
    assert "$.cells[1].metrics[0]: lacks 'p_value'" in errors
    assert "$.summary: unexpected 'extra'" in errors


def test_markdown_has_the_table_escapes_pipes_and_says_tcg_loudly() -> None:
    doc = sample_document(accel="tcg")
    text = render_markdown(doc)
    first = text.splitlines()[0]
    assert first.startswith("## diskbench: REGRESSION (and changed: host.flushes -50.0% in qcow2-")
    assert "**under TCG (emulation): times are about QEMU's emulation, not the disk**" in first
    assert "| cell | metric | base | head | change (95% CI) | verdict |" in text
    reg = doc.cells[0]
    # one row per cell, its short name; the full id only in the cell's fold under the table
    row = next(line for line in text.splitlines() if line.startswith("| qcow2 writeback ide · dd 64M | "))
    assert row.startswith("| qcow2 writeback ide · dd 64M | total_s | ")
    assert row.endswith("| regression |")
    assert "+" in row and "%" in row
    fold = text.split("<details><summary>qcow2 writeback ide · dd 64M: ")[1].split("</details>")[0]
    assert f"\n<code>{reg.cell_id}</code>\n" in fold
    assert text.index(f"<code>{reg.cell_id}</code>") > text.index(row)
    assert "dd \\| tee: No space left on device" in text
    assert "dd | tee" not in text
    assert "regression (failure)" in text
    assert "error (both-failed)" in text
    assert "<details><summary>1 cell unchanged (their figures)</summary>" in text
    assert doc.summary.axis_sentence is None  # the failed raw cell is on virtio-blk
    assert "structural change: host.flushes -50.0% (200 → 100)" in text
    assert "Host canary: 1500 → 1490 MiB/s (-0.7%): steady" in text
    assert "Machine: hostname runner-1, cpu AMD EPYC, accel tcg, qemu_version 7.2.0" in text
    assert render_markdown(sample_document()).splitlines()[0].endswith(" — under KVM")


def test_a_pipe_in_a_table_cell_does_not_break_the_row() -> None:
    odd = cell_dict() | {"id": "odd|cell"}
    cell = compare_cell(
        CellInfo(odd), samples(gauss(1, 8, 10.0, 0.01)), samples(gauss(2, 8, 15.0, 0.01)), settings=SETTINGS
    )
    doc = build_comparison(
        [cell], settings=SETTINGS, base=Side(), head=Side(), machine=MachineInfo(MACHINE), created_at="x"
    )
    doc = replace(doc, cells=(replace(doc.cells[0], title="odd|name"),))
    text = render_markdown(doc)
    row = next(line for line in text.splitlines() if line.startswith("| odd"))
    assert row.startswith("| odd\\|name | total_s | ")
    assert row.replace("\\|", "").count("|") == 7
    # the id, in the cell's fold, is escaped too
    assert "\n<code>odd\\|cell</code>\n" in text


def test_validate_and_load_comparison_say_what_to_do(tmp_path: Path) -> None:
    value = sample_document()
    doc = value.to_json()
    path = tmp_path / "comparison.json"
    write_comparison(path, value)
    assert load_comparison(path).to_json() == json.loads(json.dumps(doc))
    path.write_text(json.dumps(doc)[:200])
    with pytest.raises(UsageError, match=r"is not valid JSON \(truncated\?"):
        load_comparison(path)
    with pytest.raises(UsageError, match="is not a diskbench comparison"):
        validate_comparison({"schema": "diskbench-record"}, source="x.json")
    with pytest.raises(UsageError, match="has version 0, this diskbench reads version 2"):
        validate_comparison(doc | {"version": 0}, source="x.json")
    with pytest.raises(UsageError, match="lacks 'cells'"):
        validate_comparison({k: v for k, v in doc.items() if k != "cells"}, source="x.json")
    with pytest.raises(UsageError, match="does not exist"):
        load_comparison(tmp_path / "nothing.json")


# --- diskbench compare ----------------------------------------------------------------------------


def write_side(directory: Path, scale: float, *, seed: int, cells: int = 2, **machine: Any) -> Path:
    for k in range(cells):
        cell = cell_dict(dd_mib=64 * (k + 1))
        values = gauss(seed + k, 6, 10.0 * scale, 0.01)
        write_record(directory / f"{cell['id']}.json", record(cell, samples(values), **machine))
    return directory


def regressed_sides(tmp_path: Path) -> tuple[Path, Path]:
    """``tmp_path / "base"`` and ``tmp_path / "head"``: two cells each, head's times 30 % longer."""
    return write_side(tmp_path / "base", 1.0, seed=1), write_side(tmp_path / "head", 1.3, seed=50)


def test_cli_exits_1_on_a_regression_and_writes_both_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = regressed_sides(tmp_path)
    out = base / "comparison"
    assert main(["compare", str(base), str(head), "--out", str(out), "--output-format", "markdown"]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("## diskbench: REGRESSION — under KVM")
    doc = load_comparison(out / "comparison.json")
    assert doc.verdict == "regression"
    assert doc.base.label == str(base) and doc.base.records == 2
    assert (out / "summary.md").read_text() == render_markdown(doc)
    # comparison.json inside a side is passed over, not read as a record
    assert main(["compare", str(base), str(head)]) == 1


def test_cli_exits_0_when_base_and_head_are_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_side(tmp_path / "a", 1.0, seed=1)
    other = write_side(tmp_path / "b", 1.0, seed=70)
    assert main(["compare", str(base), str(other), "--seed", "3", "--output-format", "markdown"]) == 0
    assert "<details><summary>2 cells unchanged (their figures)</summary>" in capsys.readouterr().out


def test_cli_empty_dir_is_a_usage_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    head = write_side(tmp_path / "head", 1.0, seed=1)
    assert main(["compare", str(empty), str(head)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"diskbench: error: {empty}: no records found (*.json, searched recursively): "
        "pass a record file or a directory of diskbench records"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rule", "total_s"], "--rule 'total_s': write METRIC:PERCENT"),
        (["--rule", "nope:5%"], "--rule 'nope:5%': unknown metric 'nope'"),
        (["--min-effect", "five"], "--min-effect 'five' is not a percentage"),
        (["--metric", "bytes"], "--metric 'bytes': metric 'bytes' describes the work done"),
        (["--alpha", "2"], "alpha 2: use a value between 0 and 1"),
    ],
)
def test_cli_bad_options_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    side = write_side(tmp_path / "a", 1.0, seed=1)
    assert main(["compare", str(side), str(side), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_cli_warns_loudly_when_the_machines_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_side(tmp_path / "a", 1.0, seed=1)
    head = write_side(tmp_path / "b", 1.0, seed=70, qemu_version="8.2.0")
    assert (
        main(["compare", str(base), str(head), "--out", str(tmp_path / "out"), "--output-format", "markdown"])
        == 0
    )
    captured = capsys.readouterr()
    assert (
        "diskbench: WARNING: base and head come from DIFFERENT MACHINES, their times are not comparable "
        "(qemu_version: 7.2.0 vs 8.2.0)" in captured.err
    )
    assert "**WARNING: base and head come from DIFFERENT MACHINES" in captured.out
    assert load_comparison(tmp_path / "out" / "comparison.json").warnings


def test_cli_compares_single_record_files(tmp_path: Path) -> None:
    base = write_side(tmp_path / "a", 1.0, seed=1, cells=1)
    head = write_side(tmp_path / "b", 1.5, seed=9, cells=1)
    (a,) = base.glob("*.json")
    (b,) = head.glob("*.json")
    assert main(["compare", str(a), str(b)]) == 1


def test_axis_sentence_names_every_value_the_regressed_cells_share() -> None:
    # the gate's two writeback-ide cells regressed; a replayed writeback cell and an ide cell did not
    def cell(name: str, cache: str, interface: str, verdict: Verdict, measure: str = "guest") -> ComparedCell:
        axes = FlatCell(format="raw", cache=cache, interface=interface, measure=measure)
        return ComparedCell(cell_id=name, cell=axes, verdict=verdict, kind=Kind.METRIC, reason="")

    cells = [
        cell("wb-ide-dd", "writeback", "ide", Verdict.REGRESSION),
        cell("wb-ide-fio", "writeback", "ide", Verdict.REGRESSION),
        cell("none-ide-dd", "none", "ide", Verdict.UNCHANGED),
        cell("wb-replay", "writeback", "virtio-blk", Verdict.UNCHANGED, "replay"),
        cell("none-virtio", "none", "virtio-blk", Verdict.UNCHANGED),
    ]
    assert axis_sentence(cells) == (
        "Every regressed cell has cache=writeback (2 of 3 such cells regressed) and interface=ide "
        "(2 of 3 such cells regressed); no other cell has all of them."
    )
    # two values that only the regressed cells have: both named, and said to go together
    exact = [*cells[:2], cell("none-virtio-2", "none", "virtio-blk", Verdict.UNCHANGED), cells[4]]
    assert axis_sentence(exact) == (
        "Every regressed cell has cache=writeback and interface=ide (2 of 2 such cells regressed, "
        "0 of 2 others). The cells cannot tell cache=writeback and interface=ide apart: they go "
        "together in every cell."
    )
