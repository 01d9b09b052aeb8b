"""The statistics of a comparison: the Mann-Whitney U test, medians, quantiles, a bootstrap interval.  Pure."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence

# exact Mann-Whitney distribution up to this many samples per side (no ties)
EXACT_MAX_N = 20


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def _ratio(head: float, base: float) -> float:
    """head/base that never divides by zero: 0/0 is no change, x/0 is infinitely more."""
    if base == 0:
        return 1.0 if head == 0 else math.copysign(math.inf, head)
    return head / base


def _inverse(value: float) -> float:
    if value == 0:
        return math.inf
    return 0.0 if math.isinf(value) else 1.0 / value


@functools.cache
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many orderings of m+n untied values give U = 0..m*n (U counts pairs a > b)."""
    if m == 0 or n == 0:
        return (1,)
    # the largest value belongs to a (it beats all n of b) or to b (it adds nothing)
    with_a = _u_counts(m - 1, n)
    with_b = _u_counts(m, n - 1)
    counts = [0] * (m * n + 1)
    for u, c in enumerate(with_a):
        counts[u + n] += c
    for u, c in enumerate(with_b):
        counts[u] += c
    return tuple(counts)


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U of ``a``, two-sided p) of the Mann-Whitney U test.

    U counts the pairs where a's value is larger (ties count one half), so
    U = 0 when every value of ``a`` is below every value of ``b``.  The p value
    is exact when there are no ties and both sides have at most
    :data:`EXACT_MAX_N` values; otherwise it uses the normal approximation
    with the tie correction of the variance and a continuity correction.
    An empty side, or all values tied, gives p = 1.
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 0.0, 1.0
    u = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)
    values = [*a, *b]
    tied = len(set(values)) < len(values)
    if not tied and n1 <= EXACT_MAX_N and n2 <= EXACT_MAX_N:
        counts = _u_counts(n1, n2)
        total = sum(counts)
        k = round(u)
        lower = sum(counts[: k + 1]) / total
        upper = sum(counts[k:]) / total
        return u, min(1.0, 2.0 * min(lower, upper))
    n = n1 + n2
    tie_sum = sum(t**3 - t for t in _tie_sizes(values))
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_sum / (n * (n - 1)))
    if variance <= 0:
        return u, 1.0
    z = max(0.0, abs(u - n1 * n2 / 2.0) - 0.5) / math.sqrt(variance)
    return u, min(1.0, math.erfc(z / math.sqrt(2.0)))


def doubled_midranks(values: Sequence[float]) -> list[int]:
    """Twice the midrank of each value (ranks 1..n, ties sharing their mean), as whole numbers."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = start + end + 2
        start = end + 1
    return ranks


def rank_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, tuple[float, ...]]:
    """(two-sided p, every p the test can give) of the Mann-Whitney test of ``a`` against ``b``,
    exact also with ties.

    The exact distribution of the rank sum given the tied values (every split of the pooled
    values into the two sides equally likely), when both sides have at most
    :data:`EXACT_MAX_N` values; otherwise :func:`mann_whitney_u`'s normal approximation, and no
    list of attainable p values (empty).  With ties the normal approximation overstates the p
    of the extreme orders: every head above every base, 8 + 8 values in three of fio's
    histogram bins, is p = 2/C(16,8) = 1.6e-4 here, 8.0e-4 there.  The attainable p values,
    smallest first, are what the test can say at these sizes and ties: the first is its floor.
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0 or n1 > EXACT_MAX_N or n2 > EXACT_MAX_N:
        return mann_whitney_u(a, b)[1], ()
    pooled = sorted([*a, *b])
    # twice the midrank of each distinct value, and how many values share it
    sizes: list[int] = []
    doubled: dict[float, int] = {}
    start = 0
    while start < len(pooled):
        end = start
        while end + 1 < len(pooled) and pooled[end + 1] == pooled[start]:
            end += 1
        sizes.append(end - start + 1)
        doubled[pooled[start]] = start + end + 2
        start = end + 1
    if len(sizes) == 1:
        return 1.0, (1.0,)
    tails = _tails(n1, tuple(sizes))
    distance = abs(sum(doubled[v] for v in a) - n1 * (len(pooled) + 1))
    p = next(tail for d, tail in tails if d <= distance)
    return p, tuple(sorted({tail for _d, tail in tails}))


@functools.cache
def _tails(n1: int, sizes: tuple[int, ...]) -> tuple[tuple[int, float], ...]:
    """(distance d of the doubled rank sum from its mean, P(distance >= d)), largest d first."""
    counts = _tied_rank_sums(n1, sizes)
    mean = n1 * (sum(sizes) + 1)
    return upper_tails(counts, mean, math.comb(sum(sizes), n1))


def upper_tails(counts: Sequence[int], centre: int, outcomes: int) -> tuple[tuple[int, float], ...]:
    """(distance d from ``centre``, P(distance >= d)), largest d first, where ``counts[x]`` of the
    ``outcomes`` equally likely ones give the statistic x (an exact test's null distribution)."""
    by_distance: dict[int, int] = {}
    for x, count in enumerate(counts):
        if count:
            by_distance[abs(x - centre)] = by_distance.get(abs(x - centre), 0) + count
    tails = []
    running = 0
    for d in sorted(by_distance, reverse=True):
        running += by_distance[d]
        tails.append((d, min(1.0, running / outcomes)))
    return tuple(tails)


@functools.cache
def _tied_rank_sums(n1: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """How many splits of tie groups of these sizes (in rank order) put n1 values on one side
    with each doubled rank sum 0, 1, 2...: the distribution of the rank sum given the ties."""
    top = 2 * sum(range(1, sum(sizes) + 1)) + 1
    # ways[k][s]: the splits of the groups so far with k values on the side and doubled sum s
    ways = [[0] * top for _ in range(n1 + 1)]
    ways[0][0] = 1
    first = 1
    for size in sizes:
        rank2 = 2 * first + size - 1  # twice the midrank of ranks first .. first+size-1
        first += size
        nxt = [[0] * top for _ in range(n1 + 1)]
        for k in range(n1 + 1):
            row = ways[k]
            for total in range(top):
                count = row[total]
                if not count:
                    continue
                for take in range(min(size, n1 - k) + 1):
                    nxt[k + take][total + take * rank2] += count * math.comb(size, take)
        ways = nxt
    return tuple(ways[n1])


def _tie_sizes(values: Sequence[float]) -> list[int]:
    seen: dict[float, int] = {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
    return [t for t in seen.values() if t > 1]


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (the usual 'type 7' quantile)."""
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    frac = pos - lo
    if frac == 0 or ordered[lo] == ordered[lo + 1]:
        return ordered[lo]
    return ordered[lo] + (ordered[lo + 1] - ordered[lo]) * frac


def bootstrap_ratio_ci(
    base: Sequence[float],
    head: Sequence[float],
    *,
    confidence: float,
    n: int,
    seed: int,
    paired: bool,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(head)/median(base).

    ``paired``: ``base[i]`` and ``head[i]`` come from the same round, and each
    resample draws rounds (both values of a round together), so a drift of the
    host during the run moves both medians alike and cancels in the ratio.
    Otherwise each side is resampled on its own.  ``random.Random(seed)``
    drives the draws: the same input gives the same interval.
    """
    if not base or not head:
        raise ValueError("bootstrap_ratio_ci needs samples on both sides")
    if paired and len(base) != len(head):
        raise ValueError("paired samples need the same number of rounds on both sides")
    if len(set(base)) == 1 and len(set(head)) == 1:
        ratio = _ratio(head[0], base[0])
        return ratio, ratio
    rng = random.Random(seed)
    ratios: list[float] = []
    if paired:
        rounds = range(len(base))
        for _ in range(n):
            picks = rng.choices(rounds, k=len(base))
            ratios.append(_ratio(_median([head[i] for i in picks]), _median([base[i] for i in picks])))
    else:
        for _ in range(n):
            b = rng.choices(base, k=len(base))
            h = rng.choices(head, k=len(head))
            ratios.append(_ratio(_median(h), _median(b)))
    ratios.sort()
    tail = (1.0 - confidence) / 2.0
    return _quantile(ratios, tail), _quantile(ratios, 1.0 - tail)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p values, in the order given.

    Sorted ascending, the i-th smallest (0-based) of m values is multiplied by
    m - i, and the adjusted values are made non-decreasing along that order;
    a test rejects at family-wise level alpha when its adjusted p is below
    alpha.  Holm keeps the family-wise error rate under any dependence between
    the tests, like Bonferroni (p * m), and rejects everything Bonferroni
    rejects, and more.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
