"""The hand-written statistics of harness/compare checked against scipy.stats, over random cases
with ties (values on a coarse grid) and equal pairs: every test and interval the comparison uses.

stats: Mann-Whitney (exact and normal), the exact rank test with ties, the percentile bootstrap
of the ratio of medians, Holm's adjustment; yuen: the incomplete beta, Student's t, Yuen's
test; paired: the exact signed-rank test with ties and equal pairs, the trimmed one-sample t
test, the pairs' bootstrap; evidence: the rank tests' floors.  scipy is a dev extra: without it
these tests are skipped.
"""

from __future__ import annotations

import math

import pytest

from harness.compare.evidence import _untied_floor, _untied_pairs_floor
from harness.compare.paired import bootstrap_pairs_ci, log_ratios, signed_rank_test, trimmed_paired_test
from harness.compare.stats import bootstrap_ratio_ci, holm_adjust, mann_whitney_u, rank_test
from harness.compare.yuen import TRIM, _resolution, _trimmed, incomplete_beta, student_t_two_sided, yuen_test

np = pytest.importorskip("numpy")
scipy_stats = pytest.importorskip("scipy.stats")
scipy_special = pytest.importorskip("scipy.special")

CASES = 40


def _sides(rng: object, *, ties: bool, n1: int, n2: int) -> tuple[list[float], list[float]]:
    """Two samples of positive values, head shifted by a random ratio; on a grid of 0.5 with
    ``ties`` (so values repeat within and across sides), else continuous."""
    shift = math.exp(rng.normal(0, 0.3))  # type: ignore[attr-defined]
    base = rng.lognormal(1.5, 0.4, n1)  # type: ignore[attr-defined]
    head = rng.lognormal(1.5, 0.4, n2) * shift  # type: ignore[attr-defined]
    if ties:
        base, head = np.round(base * 2) / 2 + 0.5, np.round(head * 2) / 2 + 0.5
    return [float(v) for v in base], [float(v) for v in head]


def _cases(*, ties: bool, low: int = 3, high: int = 8) -> list[tuple[list[float], list[float]]]:
    rng = np.random.default_rng(20261125 + ties)
    return [
        _sides(rng, ties=ties, n1=int(rng.integers(low, high + 1)), n2=int(rng.integers(low, high + 1)))
        for _ in range(CASES)
    ]


@pytest.mark.parametrize("case", range(CASES))
def test_mann_whitney_exact_and_normal_match_scipy(case: int) -> None:
    base, head = _cases(ties=False)[case]
    u, p = mann_whitney_u(head, base)
    ref = scipy_stats.mannwhitneyu(head, base, alternative="two-sided", method="exact")
    assert u == ref.statistic and p == pytest.approx(ref.pvalue, rel=1e-9)
    tied_base, tied_head = _cases(ties=True)[case]
    u, p = mann_whitney_u(tied_head, tied_base)
    pooled = tied_base + tied_head
    if len(set(pooled)) > 1:
        # with ties, the normal approximation (tie-corrected, with continuity); a grid draw without
        # a tie is exact, as above
        method = "asymptotic" if len(set(pooled)) < len(pooled) else "exact"
        ref = scipy_stats.mannwhitneyu(tied_head, tied_base, alternative="two-sided", method=method)
        assert u == ref.statistic and p == pytest.approx(ref.pvalue, rel=1e-9)


def _rank_distance(a: object, b: object, axis: int = -1) -> object:
    """|rank sum of a - its mean| over the pooled midranks: the exact rank test's statistic."""
    pooled = np.concatenate([a, b], axis=axis)
    ranks = scipy_stats.rankdata(pooled, axis=axis)
    n1 = np.shape(a)[axis]
    total = ranks.shape[axis] + 1
    return np.abs(np.sum(np.take(ranks, range(n1), axis=axis), axis=axis) - n1 * total / 2)


@pytest.mark.parametrize("ties", [False, True], ids=["untied", "ties"])
def test_the_exact_rank_test_is_the_permutation_test_of_the_rank_sum(ties: bool) -> None:
    for base, head in _cases(ties=ties, high=6):
        p, attainable = rank_test(head, base)
        ref = scipy_stats.permutation_test(
            (np.array(head), np.array(base)),
            _rank_distance,
            permutation_type="independent",
            alternative="greater",
            n_resamples=math.inf,
            vectorized=True,
        )
        assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12), (base, head)
        assert attainable[0] <= p <= 1.0


def _signed_distance(d: object, axis: int = -1) -> object:
    ranks = scipy_stats.rankdata(np.abs(d), axis=axis)
    return np.abs(np.sum(np.where(np.asarray(d) > 0, ranks, 0), axis=axis) - np.sum(ranks, axis=axis) / 2)


@pytest.mark.parametrize("ties", [False, True], ids=["untied", "ties-and-equal-pairs"])
def test_the_signed_rank_test_is_the_sign_flip_test_of_the_pairs(ties: bool) -> None:
    for base, head in _cases(ties=ties, low=4, high=10):
        n = min(len(base), len(head))
        base, head = base[:n], head[:n]
        if ties:  # some pairs equal: no sign, left out (Wilcoxon's zero_method "wilcox")
            head[: n // 3] = base[: n // 3]
        p, _ = signed_rank_test(base, head)
        diffs = np.array([d for d in log_ratios(base, head)[0] if d != 0.0])
        if len(diffs) == 0:
            assert p == 1.0
            continue
        ref = scipy_stats.permutation_test(
            (diffs,),
            _signed_distance,
            permutation_type="samples",
            alternative="greater",
            n_resamples=math.inf,
            vectorized=True,
        )
        assert p == pytest.approx(ref.pvalue, rel=1e-9), (base, head)
        if not ties:
            exact = scipy_stats.wilcoxon(diffs, method="exact")
            assert p == pytest.approx(exact.pvalue, rel=1e-9)


def test_incomplete_beta_and_student_t_match_scipy() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        a, b, x = rng.uniform(0.05, 30), rng.uniform(0.05, 30), rng.uniform(0, 1)
        assert incomplete_beta(a, b, x) == pytest.approx(scipy_special.betainc(a, b, x), rel=1e-9, abs=1e-14)
        t, df = rng.normal(0, 4), rng.uniform(0.5, 60)
        ref = 2 * scipy_stats.t.sf(abs(t), df)
        assert student_t_two_sided(t, df) == pytest.approx(ref, rel=1e-8, abs=1e-15)


@pytest.mark.parametrize("ties", [False, True], ids=["untied", "ties"])
def test_yuen_is_scipy_s_trimmed_welch_test_on_logs(ties: bool) -> None:
    for base, head in _cases(ties=ties, low=4, high=12):
        ours = yuen_test(base, head)
        logs_b, logs_h = np.log(base), np.log(head)
        ref = scipy_stats.ttest_ind(logs_h, logs_b, equal_var=False, trim=TRIM)
        _, d_b, h_b = _trimmed(list(logs_b), TRIM)
        _, d_h, h_h = _trimmed(list(logs_h), TRIM)
        grid = _resolution([*logs_b, *logs_h]) ** 2 / 12.0
        if d_b >= grid / h_b and d_h >= grid / h_h:
            assert ours.t == pytest.approx(ref.statistic, rel=1e-9)
            assert ours.p == pytest.approx(ref.pvalue, rel=1e-7)
        else:
            # a side with less spread than the data's grid keeps the grid's: never bolder than scipy
            assert ours.p >= ref.pvalue - 1e-12


def _trimmed_one_sample(diffs: object) -> tuple[float, float]:
    """Tukey-McLaughlin's one-sample trimmed t from scipy's parts: trim_mean and winsorize."""
    d = np.sort(np.asarray(diffs, dtype=float))
    n = len(d)
    g = math.floor(TRIM * n)
    h = n - 2 * g
    mean = scipy_stats.trim_mean(d, TRIM)
    wins = np.asarray(scipy_stats.mstats.winsorize(d, limits=(g / n, g / n)))
    se = math.sqrt(np.var(wins, ddof=1) * (n - 1) / (h * (h - 1)))
    t = mean / se
    return t, 2 * scipy_stats.t.sf(abs(t), h - 1)


def test_the_trimmed_paired_test_matches_the_one_sample_trimmed_t() -> None:
    for base, head in _cases(ties=False, low=5, high=12):
        n = min(len(base), len(head))
        ours = trimmed_paired_test(base[:n], head[:n])
        t, p = _trimmed_one_sample(log_ratios(base[:n], head[:n])[0])
        assert ours.t == pytest.approx(t, rel=1e-9) and ours.p == pytest.approx(p, rel=1e-7)


def _ratio_of_medians(base: object, head: object, axis: int = -1) -> object:
    return np.median(head, axis=axis) / np.median(base, axis=axis)


def _within(value: float, draws: object, q: float, *, slack: float = 0.015) -> bool:
    """Whether ``value`` lies between the ``q - slack`` and ``q + slack`` quantiles of another
    bootstrap's draws: two Monte Carlo estimates of one interval's end agree within their noise,
    also where ties make the distribution of the ratio a few atoms."""
    low, high = np.quantile(draws, [max(q - slack, 0.0), min(q + slack, 1.0)])
    return bool(low - 1e-12 <= value <= high + 1e-12)


@pytest.mark.parametrize("ties", [False, True], ids=["untied", "ties"])
@pytest.mark.parametrize("paired", [False, True], ids=["unpaired", "paired"])
def test_the_bootstrap_interval_of_the_ratio_matches_scipy_s(paired: bool, ties: bool) -> None:
    for base, head in _cases(ties=ties, low=6, high=10)[:8]:
        if paired:
            n = min(len(base), len(head))
            base, head = base[:n], head[:n]
        lo, hi = bootstrap_ratio_ci(base, head, confidence=0.9, n=20000, seed=1, paired=paired)
        ref = scipy_stats.bootstrap(
            (np.array(base), np.array(head)),
            _ratio_of_medians,
            paired=paired,
            vectorized=True,
            confidence_level=0.9,
            n_resamples=20000,
            method="percentile",
            rng=np.random.default_rng(1),
        )
        assert _within(lo, ref.bootstrap_distribution, 0.05), (lo, ref.confidence_interval)
        assert _within(hi, ref.bootstrap_distribution, 0.95), (hi, ref.confidence_interval)


@pytest.mark.parametrize("ties", [False, True], ids=["untied", "ties-and-equal-pairs"])
def test_the_pairs_bootstrap_matches_scipy_s_of_the_median_log_ratio(ties: bool) -> None:
    for base, head in _cases(ties=ties, low=6, high=10)[:8]:
        n = min(len(base), len(head))
        base, head = base[:n], head[:n]
        if ties:
            head[: n // 3] = base[: n // 3]
        lo, hi = bootstrap_pairs_ci(base, head, confidence=0.9, n=20000, seed=2)
        diffs = np.array(log_ratios(base, head)[0])
        ref = scipy_stats.bootstrap(
            (diffs,),
            np.median,
            confidence_level=0.9,
            n_resamples=20000,
            method="percentile",
            rng=np.random.default_rng(2),
        )
        draws = np.exp(ref.bootstrap_distribution)
        assert _within(lo, draws, 0.05) and _within(hi, draws, 0.95), (lo, hi, ref.confidence_interval)


def test_holm_rejects_exactly_what_the_step_down_procedure_rejects() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        m = int(rng.integers(1, 12))
        p = [float(v) for v in rng.uniform(0, 0.05, m) * rng.choice([1, 10], m)]
        p[: m // 4] = [p[0]] * (m // 4)  # ties among the p values
        adjusted = holm_adjust(p)
        for alpha in (0.001, 0.01, 0.05, 0.1):
            order = sorted(range(m), key=lambda i: p[i])
            rejected: set[int] = set()
            for k, i in enumerate(order):  # Holm (1979): stop at the first that misses alpha/(m-k)
                if p[i] > alpha / (m - k):
                    break
                rejected.add(i)
            assert {i for i in range(m) if adjusted[i] <= alpha} == rejected


def test_the_rank_tests_floors_are_scipy_s_extremes() -> None:
    for rounds in range(2, 11):
        low, high = list(range(rounds)), list(range(rounds, 2 * rounds))
        extreme = scipy_stats.mannwhitneyu(high, low, alternative="two-sided", method="exact").pvalue
        assert _untied_floor(rounds) == pytest.approx(min(1.0, extreme), rel=1e-12)
        flips = scipy_stats.wilcoxon(np.arange(1, rounds + 1, dtype=float), method="exact").pvalue
        assert _untied_pairs_floor(rounds) == pytest.approx(min(1.0, flips), rel=1e-12)
