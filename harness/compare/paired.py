"""Tests of samples taken together: the two sides of each pair at the same moment.  Pure.

Where base's and head's sample of a pair ran at the same moment on the same CPU (a gate's
replay cells, :class:`harness.sample.pairing.Pairing`), whatever slowed the host down then
slowed both alike: the pair's log ratio ``log(head/base)`` keeps the change and sheds the
host's noise, which two-sample tests on each side's values would keep (on a busy 2-core host
the values of one side varied by 20-80 % from pair to pair, their log ratio by 1.4-3 %).  So
these tests look at the log ratios alone:

* the exact Wilcoxon signed-rank test (exact also with ties: midranks, every sign pattern
  equally likely; pairs whose two values are equal carry no sign and are left out), with
  every p it can attain at this size, the first being its floor (2/2^n untied);
* the trimmed-mean t test of one sample (Tukey and McLaughlin; Yuen's trimming and
  winsorized variance, ``h - 1`` degrees of freedom) for the level the rank test cannot use,
  as :mod:`harness.compare.evidence` combines the two for unpaired samples.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence

from harness.compare.stats import _median, _quantile, _ratio, doubled_midranks, upper_tails
from harness.compare.yuen import TRIM, TrimmedTest, _resolution, student_t_two_sided, trimmed

# up to this many pairs the signed-rank test is exact; beyond it the normal approximation
EXACT_MAX_PAIRS = 60


def log_ratios(base: Sequence[float], head: Sequence[float]) -> tuple[list[float], bool]:
    """``log(head[i]/base[i])`` for each pair (and True), or ``head[i] - base[i]`` (and False)
    when some value is not above 0."""
    if len(base) != len(head):
        raise ValueError("paired samples need the same number of rounds on both sides")
    if all(v > 0 for v in (*base, *head)):
        return [math.log(h / b) for b, h in zip(base, head, strict=True)], True
    return [float(h) - float(b) for b, h in zip(base, head, strict=True)], False


def signed_rank_test(base: Sequence[float], head: Sequence[float]) -> tuple[float, tuple[float, ...]]:
    """(two-sided p, every p the test can give, smallest first) of the signed-rank test of the
    pairs' log ratios; p = 1 when no pair differs."""
    diffs = [d for d in log_ratios(base, head)[0] if d != 0.0]
    n = len(diffs)
    if n == 0:
        return 1.0, (1.0,)
    doubled = doubled_midranks([abs(d) for d in diffs])
    positive = sum(r for r, d in zip(doubled, diffs, strict=True) if d > 0)
    total = sum(doubled)
    # distance of twice the positive rank sum from its mean, in doubled-rank units
    distance = abs(2 * positive - total)
    if n > EXACT_MAX_PAIRS:
        var = sum(r * r for r in doubled)  # of 2*W+ - total, in doubled units
        return min(1.0, math.erfc(distance / math.sqrt(2.0 * var))), ()
    tails = _tails(tuple(sorted(doubled)))
    p = next(tail for d, tail in tails if d <= distance)
    return p, tuple(sorted({tail for _d, tail in tails}))


@functools.cache
def _tails(doubled: tuple[int, ...]) -> tuple[tuple[int, float], ...]:
    """(distance d of twice the positive rank sum from its mean, P(distance >= d)), largest d
    first, over the 2^n equally likely sign patterns."""
    total = sum(doubled)
    counts = [0] * (total + 1)
    counts[0] = 1
    for rank in doubled:
        for s in range(total, rank - 1, -1):
            counts[s] += counts[s - rank]
    # the distance of twice the sum s from the total is |2s - total|: counts of 2s, centred on total
    doubled_counts = [0] * (2 * total + 1)
    for s, count in enumerate(counts):
        doubled_counts[2 * s] = count
    return upper_tails(doubled_counts, total, 2 ** len(doubled))


def trimmed_paired_test(base: Sequence[float], head: Sequence[float], *, trim: float = TRIM) -> TrimmedTest:
    """The two-sided trimmed-mean t test of the pairs' log ratios against 0 (``t`` > 0 when
    head is larger).  Its spread is at least the rounding of the figures (the grid of binned
    values, as :func:`harness.compare.yuen.yuen_test` keeps it).  Needs 2 pairs (p = 1 else)."""
    diffs, logs = log_ratios(base, head)
    n = len(diffs)
    if n < 2:
        return TrimmedTest(0.0, 0.0, 1.0, logs)
    cut = trimmed(diffs, trim)
    mean, h = cut.mean, cut.kept
    se2 = (n - 1) * cut.winsorized_variance / (h * max(h - 1, 1))
    values = [math.log(v) for v in (*base, *head)] if logs else [float(v) for v in (*base, *head)]
    se2 = max(se2, 2 * _resolution(values) ** 2 / 12.0 / h)
    if se2 == 0.0:
        return TrimmedTest(0.0 if mean == 0 else math.copysign(math.inf, mean), 0.0, float(mean == 0), logs)
    t = mean / math.sqrt(se2)
    df = float(max(h - 1, 1))
    return TrimmedTest(t, df, student_t_two_sided(t, df), logs)


def pairs_ratio(base: Sequence[float], head: Sequence[float]) -> float:
    """The pairs' typical ratio head/base: exp of the median of their log ratios (the median of
    the differences where some value is not above 0 is not a ratio: then median(head)/median(base))."""
    diffs, logs = log_ratios(base, head)
    if not logs:
        return _ratio_of_medians(base, head)
    return math.exp(_median(diffs))


def bootstrap_pairs_ci(
    base: Sequence[float], head: Sequence[float], *, confidence: float, n: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`pairs_ratio`, resampling pairs (``random.Random(seed)``
    drives the draws: the same input gives the same interval)."""
    diffs, logs = log_ratios(base, head)
    if not logs or len(set(diffs)) == 1:
        ratio = pairs_ratio(base, head)
        return ratio, ratio
    rng = random.Random(seed)
    draws = sorted(math.exp(_median(rng.choices(diffs, k=len(diffs)))) for _ in range(n))
    tail = (1.0 - confidence) / 2.0
    return _quantile(draws, tail), _quantile(draws, 1.0 - tail)


def _ratio_of_medians(base: Sequence[float], head: Sequence[float]) -> float:
    return _ratio(_median(list(head)), _median(list(base)))
