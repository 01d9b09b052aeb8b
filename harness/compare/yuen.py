"""Yuen's trimmed-mean t test on log values, and the Student t distribution it needs.  Pure.

The rank test has a floor at small samples (8 + 8 rounds: p >= 2/C(16,8) = 1.6e-4, more with
ties), so a family of 31 tests at 0.01 can never call a clear ×4 change significant.  The t
statistic has no floor: its p falls with the size of the change against the spread of the
rounds.  On logs the difference of the two sides is the log of the ratio head/base, the unit the
verdict speaks in; trimming a fifth at each end (Yuen) keeps one round that waited for a busy
host's CPU from deciding the test either way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

# the fraction trimmed at each end of each side (at 8 rounds: one value at each end)
TRIM = 0.2


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        # the even step, then the odd step, of the fraction's terms
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    # the fraction converges fast below the mean of the distribution; above it, use the symmetry
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (``df`` need not be whole)."""
    if math.isnan(t) or df <= 0:
        return 1.0
    if math.isinf(t):
        return 0.0
    return min(1.0, incomplete_beta(df / 2.0, 0.5, df / (df + t * t)))


@dataclass(frozen=True)
class TrimmedTest:
    """Yuen's test of head against base: ``t`` > 0 when head is larger; ``logs``: on log values."""

    t: float
    df: float
    p: float
    logs: bool


@dataclass(frozen=True)
class Trimmed:
    """One sample trimmed by Yuen's rule: the ``mean`` of the ``kept`` middle values (``trim`` of
    the ``n`` cut at each end) and the ``winsorized_variance`` of all ``n`` (each cut value set to
    the nearest kept one)."""

    mean: float
    winsorized_variance: float
    kept: int
    n: int


def trimmed(values: Sequence[float], trim: float) -> Trimmed:
    """The trimmed mean and winsorized variance of ``values`` (at least 2), ``trim`` cut at each end."""
    ordered = sorted(values)
    n = len(ordered)
    g = math.floor(trim * n)
    h = n - 2 * g
    kept = ordered[g : n - g]
    mean = math.fsum(kept) / h
    winsorized = [ordered[g]] * g + kept + [ordered[n - g - 1]] * g
    w_mean = math.fsum(winsorized) / n
    w_var = math.fsum((v - w_mean) ** 2 for v in winsorized) / (n - 1)
    return Trimmed(mean, w_var, h, n)


def _trimmed(values: Sequence[float], trim: float) -> tuple[float, float, int]:
    """(trimmed mean, squared standard error term d, values kept h) of one side."""
    t = trimmed(values, trim)
    return t.mean, (t.n - 1) * t.winsorized_variance / (t.kept * (t.kept - 1)), t.kept


def _resolution(values: Sequence[float]) -> float:
    """The smallest gap between two distinct values: the grid of binned figures, ~0 for others."""
    distinct = sorted(set(values))
    return min((b - a for a, b in itertools.pairwise(distinct)), default=0.0)


def yuen_test(base: Sequence[float], head: Sequence[float], *, trim: float = TRIM) -> TrimmedTest:
    """Yuen's two-sided trimmed-mean t test of ``head`` against ``base``, on log values.

    On the logs when every value is above 0 (the difference is then the log of a ratio), else
    on the values.  Welch's degrees of freedom (no equal spread assumed).  Each side's spread is
    at least the rounding of its figures: fio's percentiles and the device histogram's come from
    bins, and a side whose values all fell into one bin has no spread of its own, so each
    trimmed mean keeps the variance of a value rounded to the data's grid (the smallest gap
    between two distinct values, w²/12, over the values kept).  Both sides the same constant:
    p = 1.  Needs at least 2 values on each side (p = 1 otherwise).
    """
    logs = all(v > 0 for v in (*base, *head))
    b = [math.log(v) for v in base] if logs else [float(v) for v in base]
    h = [math.log(v) for v in head] if logs else [float(v) for v in head]
    if len(b) < 2 or len(h) < 2:
        return TrimmedTest(0.0, 0.0, 1.0, logs)
    mean_b, d_b, h_b = _trimmed(b, trim)
    mean_h, d_h, h_h = _trimmed(h, trim)
    grid = _resolution([*b, *h]) ** 2 / 12.0
    d_b, d_h = max(d_b, grid / h_b), max(d_h, grid / h_h)
    diff = mean_h - mean_b
    if d_b + d_h == 0.0:
        return TrimmedTest(0.0 if diff == 0 else math.copysign(math.inf, diff), 0.0, float(diff == 0), logs)
    t = diff / math.sqrt(d_b + d_h)
    df = (d_b + d_h) ** 2 / (d_b**2 / (h_b - 1) + d_h**2 / (h_h - 1))
    return TrimmedTest(t, df, student_t_two_sided(t, df), logs)


def rounds_for_level(test: TrimmedTest, n: int, level: float, *, limit: int = 100) -> int | None:
    """About how many rounds a side would need for this test's p to fall below ``level``.

    Projected from ``n`` rounds at the same effect and spread: t grows with the square root of
    the rounds, the degrees of freedom with the values kept.  None when there is no effect to
    project (t = 0) or it would take more than ``limit`` rounds.
    """
    if test.t == 0 or not math.isfinite(test.t) or n < 2:
        return None
    kept = n - 2 * math.floor(TRIM * n)
    for rounds in range(n, limit + 1):
        more_kept = rounds - 2 * math.floor(TRIM * rounds)
        t = test.t * math.sqrt(rounds / n)
        df = test.df * (more_kept - 1) / max(kept - 1, 1)
        if student_t_two_sided(t, df) < level:
            return rounds
    return None
