"""Change points of one series: binary segmentation, each split tested by permuting the series.  Pure.

The shape is E-divisive's (the method MongoDB's and Apache Otava's change detection use): find
the split of a segment where the values before and after differ most, ask how often a random
order of the same values would give a split at least that extreme (a permutation test), and
when it is rare enough keep the split and look inside both halves again.  Two choices differ:

- **the statistic is the rank test's** (Mann-Whitney's standardised rank sum, as
  :func:`harness.compare.stats.mann_whitney_u` computes it, with its tie correction), where
  E-divisive uses an energy distance of the values.  Ranks weigh one wild value as any other
  one, so a single spike moves the statistic by one rank; a history point is one median per
  commit under TCG's 10-30 % noise, and spikes are what it has most;
- **the family is corrected**: the permutation p of a split already accounts for having chosen
  the best of all splits of its segment (the permutations choose their best too); the segments
  tested in one round of the recursion are one family, and Holm's step-down
  (:func:`harness.compare.stats.holm_adjust`) keeps the chance of any false split in it at the
  significance level.

A split needs both halves at least ``min_segment`` points long (one odd commit is never a
segment), a permutation p (Holm-adjusted) at or below ``alpha``, and a step of the medians of
at least ``min_effect`` (relative; what the asv config's ``regressions_thresholds`` call noise).
NaN values are gaps: left out of the series, never a point.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness.compare.stats import doubled_midranks, holm_adjust
from harness.errors import UsageError

ALPHA = 0.05
MIN_SEGMENT = 3
PERMUTATIONS = 999


@dataclass(frozen=True)
class Split:
    """The best split of one segment ``[start, end)``: the after part begins at ``index``."""

    start: int
    end: int
    index: int
    z: float
    p: float


@dataclass(frozen=True)
class ChangePoint:
    """A step in a series: ``index`` is the first point after it (an index into the values given)."""

    index: int
    before: float
    after: float
    p: float

    @property
    def confidence(self) -> float:
        return 1.0 - self.p

    @property
    def ratio(self) -> float:
        if self.before == 0:
            return math.inf if self.after else 1.0
        return self.after / self.before


def check_settings(*, alpha: float, min_segment: int, permutations: int, min_effect: float) -> None:
    """Bad settings are the user's input: one line each, naming the flag."""
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: use a significance level between 0 and 1, e.g. 0.05")
    if min_segment < 2:
        raise UsageError(f"--min-segment {min_segment}: use 2 or more (one point is a spike, not a segment)")
    if permutations < 99:
        raise UsageError(f"--permutations {permutations}: use 99 or more (999 gives p down to 0.001)")
    if min_effect < 0:
        raise UsageError(f"--min-effect {min_effect}: use 0 or more (0.2 is a 20 % step)")


def midranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n, ties sharing their mean rank."""
    return [r / 2.0 for r in doubled_midranks(values)]


def _tie_term(values: Sequence[float]) -> float:
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return float(sum(t**3 - t for t in counts.values()))


def max_rank_statistic(ranks: Sequence[float], tie_term: float, min_segment: int) -> tuple[float, int]:
    """(largest standardised rank sum of a split, where the after part begins), over every split
    leaving ``min_segment`` points on each side; (0, -1) when there is none or all values tie."""
    m = len(ranks)
    best, where = 0.0, -1
    spread = (m + 1) - tie_term / (m * (m - 1)) if m > 1 else 0.0
    if spread <= 0:
        return best, where
    running = sum(ranks[: min_segment - 1])
    for k in range(min_segment, m - min_segment + 1):
        running += ranks[k - 1]
        variance = k * (m - k) / 12.0 * spread
        z = abs(running - k * (m + 1) / 2.0) / math.sqrt(variance)
        if z > best + 1e-12:
            best, where = z, k
    return best, where


def best_split(
    values: Sequence[float], start: int, end: int, *, min_segment: int, permutations: int, seed: int
) -> Split | None:
    """The most extreme split of ``values[start:end]`` and its permutation p; None if it has none."""
    segment = values[start:end]
    if len(segment) < 2 * min_segment:
        return None
    ranks = midranks(segment)
    ties = _tie_term(segment)
    z, k = max_rank_statistic(ranks, ties, min_segment)
    if k < 0:
        return None
    rng = random.Random(f"{seed}:{start}:{end}:{len(values)}")
    shuffled = list(ranks)
    as_extreme = 0
    for _ in range(permutations):
        rng.shuffle(shuffled)
        if max_rank_statistic(shuffled, ties, min_segment)[0] >= z - 1e-9:
            as_extreme += 1
    return Split(start=start, end=end, index=start + k, z=z, p=(1 + as_extreme) / (1 + permutations))


def relative_step(before: float, after: float) -> float:
    """|after / before - 1|, the step of the medians (infinite from zero to anything)."""
    if before == 0:
        return 0.0 if after == 0 else math.inf
    return abs(after / before - 1.0)


def change_points(
    values: Sequence[float],
    *,
    alpha: float = ALPHA,
    min_segment: int = MIN_SEGMENT,
    min_effect: float = 0.0,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> list[ChangePoint]:
    """The change points of ``values`` (one point per commit, oldest first), in order.

    The same values and seed give the same answer: the permutations come from a generator
    seeded by the segment, so a point does not come and go between two calls.
    """
    check_settings(alpha=alpha, min_segment=min_segment, permutations=permutations, min_effect=min_effect)
    kept = [i for i, v in enumerate(values) if not math.isnan(v)]
    series = [float(values[i]) for i in kept]
    bounds = [0, len(series)]
    open_segments = [(0, len(series))]
    p_of: dict[int, float] = {}
    while open_segments:
        splits = [
            s
            for start, end in open_segments
            if (
                s := best_split(
                    series, start, end, min_segment=min_segment, permutations=permutations, seed=seed
                )
            )
        ]
        adjusted = holm_adjust([s.p for s in splits])
        open_segments = []
        for split, p in zip(splits, adjusted, strict=True):
            before = statistics.median(series[split.start : split.index])
            after = statistics.median(series[split.index : split.end])
            if p <= alpha and relative_step(before, after) >= min_effect:
                p_of[split.index] = p
                bounds.append(split.index)
                open_segments += [(split.start, split.index), (split.index, split.end)]
    bounds.sort()
    points = []
    for left, index, right in zip(bounds, bounds[1:], bounds[2:], strict=False):
        points.append(
            ChangePoint(
                index=kept[index],
                before=statistics.median(series[left:index]),
                after=statistics.median(series[index:right]),
                p=p_of[index],
            )
        )
    return points
