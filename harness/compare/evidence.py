"""The evidence of one metric's test: its p, whether it reached the family's level, what stopped it.

The default test (``Settings.test == "rank-yuen"``) is the exact Mann-Whitney rank test (exact
also with ties), and Yuen's trimmed-mean t test on log values for the level the rank test cannot
use: a rank test on few rounds has a floor (8 + 8 rounds: p = 1.6e-4 at best) and attains only
some values above it.  At each level ``c`` of Holm's step-down a test rejects when the rank p is
at most ``c``, or when Yuen's p is at most ``c - a(c)`` (``a(c)``: the largest p the rank test can
attain at or below ``c``, the smallest such share over the levels at or above ``c``) with the ranks
pointing the same way (rank p below :data:`RANK_GUARD`).  The two routes together reject a true
null at most at ``c``, so Holm keeps the family-wise error at alpha; how well the t route keeps
its share is measured in docs/calibration.md.  With ``"mann-whitney"`` the rank test alone
decides (normal approximation under ties).  A test that did not reach its level says why: the
rank test's floor (and the rounds that would lower it), or a t test that more rounds at the same
effect would bring there (and about how many).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.compare.paired import signed_rank_test, trimmed_paired_test
from harness.compare.settings import Settings
from harness.compare.stats import mann_whitney_u, rank_test
from harness.compare.yuen import TrimmedTest, rounds_for_level, yuen_test

# the t test counts only when the ranks point the same way at least at this level
RANK_GUARD = 0.05
# rounds beyond which a projection is not worth a number
MAX_ROUNDS = 100
# a rejection through the t route is reported as a p just below the level it rejects at
_BELOW = 1.0 - 1e-9


@dataclass(frozen=True)
class Figures:
    """The raw figures of one test: the rank test's p and attainable p values (empty: no
    floor, the normal approximation), and Yuen's test (None under ``"mann-whitney"``)."""

    p_rank: float
    attainable: tuple[float, ...]
    yuen: TrimmedTest | None

    @property
    def floor(self) -> float:
        return self.attainable[0] if self.attainable else 0.0


def figures(
    base: Sequence[float], head: Sequence[float], settings: Settings, *, together: bool = False
) -> Figures:
    """The test's figures; ``together``: base[i] and head[i] ran at the same moment, and the tests
    are those of the pairs' log ratios (:mod:`harness.compare.paired`)."""
    if together and settings.test != "mann-whitney":
        p, attainable = signed_rank_test(base, head)
        return Figures(p, attainable, trimmed_paired_test(base, head))
    if settings.test == "mann-whitney":
        pooled = sorted([*base, *head])
        floor = mann_whitney_u(pooled[len(base) :], pooled[: len(base)])[1]
        return Figures(mann_whitney_u(head, base)[1], (floor,), None)
    p, attainable = rank_test(head, base)
    return Figures(p, attainable, yuen_test(base, head))


def holm_levels(settings: Settings, *, family: bool) -> list[float]:
    """The levels a test can be judged at, smallest first: Holm's alpha/m .. alpha in a family
    of m = ``settings.comparisons`` tests, else ``alpha_per_test`` alone."""
    if not family:
        return [settings.alpha_per_test]
    m = max(settings.comparisons, 1)
    return [settings.alpha / k for k in range(m, 0, -1)]


def _attained(attainable: Sequence[float], level: float) -> float:
    """The largest p the rank test can give at or below ``level`` (0: none)."""
    return max((p for p in attainable if p <= level), default=0.0)


def t_share(fig: Figures, level: float, levels: Sequence[float]) -> float:
    """The level left to the t test at ``level``: the smallest unused share at or above it."""
    if fig.yuen is None or not fig.attainable:
        return 0.0
    return min(c - _attained(fig.attainable, c) for c in levels if c >= level)


def effective_p(fig: Figures, levels: Sequence[float]) -> float:
    """One number that Holm's step-down can use for this test: the rank test's p, or, when the t
    route rejects at a smaller level, that level (just below it)."""
    p = fig.p_rank
    if fig.yuen is not None and fig.p_rank < RANK_GUARD:
        for c in levels:  # smallest first
            if c >= p:
                break
            if fig.yuen.p <= t_share(fig, c, levels):
                return c * _BELOW
    return p


def family_p(
    base: Sequence[float], head: Sequence[float], settings: Settings, *, together: bool = False
) -> float:
    """The p value Holm adjusts for this test in a family of ``settings.comparisons`` tests."""
    return effective_p(figures(base, head, settings, together=together), holm_levels(settings, family=True))


def _untied_floor(rounds: int) -> float:
    return 2.0 / math.comb(2 * rounds, rounds)


def _untied_pairs_floor(rounds: int) -> float:
    return 2.0 / 2.0**rounds


def rounds_below_floor(floor: float, rounds: int, level: float, *, together: bool = False) -> int | None:
    """The rounds per side at which the rank test's floor falls below ``level``.

    ``floor`` is the floor measured at ``rounds`` (ties raise it above the untied one); the same
    factor is assumed at more rounds.  ``together``: the signed-rank test's floor (2/2^n).
    """
    untied = _untied_pairs_floor if together else _untied_floor
    penalty = floor / untied(rounds)
    for more in range(rounds, MAX_ROUNDS + 1):
        if untied(more) * penalty <= level:
            return more
    return None


@dataclass(frozen=True)
class Evidence:
    """What the test says: ``p`` (the rank test's, or Yuen's when its route decides), whether it
    is ``significant`` at the family's level, and when it is not, ``limit`` (why, in words) and
    ``rounds`` (per side, about, that would reach it; None when no number can be given)."""

    p: float
    significant: bool
    level: float
    limit: str = ""
    rounds: int | None = None
    floor: bool = False  # the rank test's floor at this number of rounds is what stopped it
    route: str = "rank"  # "rank" or "t": which test's p is ``p``


def weigh(
    base: Sequence[float],
    head: Sequence[float],
    *,
    settings: Settings,
    p_adjusted: float | None,
    together: bool = False,
) -> Evidence:
    """The evidence of ``head`` against ``base`` (both with ``min_samples`` values or more).

    ``p_adjusted``: Holm's adjusted p of this test's :func:`effective_p` in its family of
    ``settings.comparisons`` tests; None: the test is judged at ``settings.alpha_per_test``.
    """
    fig = figures(base, head, settings, together=together)
    levels = holm_levels(settings, family=p_adjusted is not None)
    level = settings.alpha_per_test
    eff = effective_p(fig, levels)
    route = "t" if eff < fig.p_rank and fig.yuen is not None else "rank"
    p = fig.yuen.p if route == "t" and fig.yuen is not None else fig.p_rank
    significant = eff < level if p_adjusted is None else p_adjusted < settings.alpha
    if significant:
        return Evidence(p, True, level, route=route)
    rounds = min(len(base), len(head))
    share = t_share(fig, level, levels)
    t_rounds = None
    if fig.yuen is not None and share > 0:
        t_rounds = rounds_for_level(fig.yuen, rounds, share, limit=MAX_ROUNDS)
    # the floor stopped it when the ranks are as one-sided as they can be and still not enough
    at_floor = fig.floor > level and fig.p_rank <= fig.floor * (1 + 1e-9)
    floor_rounds = rounds_below_floor(fig.floor, rounds, level, together=together) if at_floor else None
    test = "pairs' signed-rank test" if together else "rank test"
    options = [r for r in (floor_rounds, t_rounds) if r is not None and r > rounds]
    need = min(options) if options else None
    family = f" ({settings.alpha:g} over {settings.comparisons} tests)" if settings.comparisons > 1 else ""
    t_text = ""
    if fig.yuen is not None:
        t_name = "the trimmed t of the pairs' log ratios" if together else "Yuen's t on logs"
        t_text = f"; {t_name} p={fig.yuen.p:.2g}, its share of the level {share:.2g}"
        if fig.p_rank >= RANK_GUARD:
            t_text += f", but the ranks do not point one way (p={fig.p_rank:.2g})"
    if at_floor:
        untied = _untied_pairs_floor(rounds) if together else _untied_floor(rounds)
        ties = " with these ties" if fig.floor > untied * 1.0001 else ""
        return Evidence(
            p,
            False,
            level,
            limit=f"at {len(base)}+{len(head)} rounds the {test} cannot go below "
            f"p={fig.floor:.2g}{ties}, above the family's level {level:.2g}{family}{t_text}",
            rounds=need,
            floor=True,
            route=route,
        )
    return Evidence(
        p,
        False,
        level,
        limit=f"the {test}'s p={fig.p_rank:.2g} is not below the family's level {level:.2g}{family}{t_text}",
        rounds=need,
        route=route,
    )


def rounds_text(evidence: Evidence) -> str:
    """``"; about 11 rounds would reach it"`` (per side), or nothing when no number can be given."""
    return "" if evidence.rounds is None else f"; about {evidence.rounds} rounds would reach it"
