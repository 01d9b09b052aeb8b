"""The verdict of one metric (:func:`compare_metric`): its test, its interval, the decision table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from harness.compare.evidence import Evidence, rounds_text, weigh
from harness.compare.model import Figures
from harness.compare.paired import bootstrap_pairs_ci, pairs_ratio
from harness.compare.power import could_see, rounds_to_decide
from harness.compare.settings import Settings
from harness.compare.stats import _inverse, _median, _ratio, bootstrap_ratio_ci
from harness.compare.text import _finite, _p_is, pct
from harness.compare.verdict import Verdict
from harness.workloads import metric_info


@dataclass(frozen=True)
class Alone:
    """How a pair taken together stands for a change's size alone: its ratio scaled on logs by
    ``shrink`` (a guest pair sharing one CPU), or read at ``reads[0]``-``reads[1]`` times it (a
    crossed guest pair, :attr:`~harness.compare.settings.Settings.crossed_reads`)."""

    shrink: float = 1.0
    reads: tuple[float, float] | None = None


NOTHING_SHRINKS = Alone()


def compare_metric(
    metric: str,
    base: Sequence[float],
    head: Sequence[float],
    *,
    settings: Settings,
    paired: bool,
    p_adjusted: float | None = None,
    together: bool = False,
    alone: Alone = NOTHING_SHRINKS,
) -> Figures:
    """The verdict of one metric from base's and head's values ("worse" > 1), as the figures the
    comparison holds (a figure that is not finite is None).

    ``paired``: ``base[i]`` and ``head[i]`` are of round i; ``together``: they ran at the same
    moment (the pairs' log-ratio test); ``alone``: what such a pair reads of a change's size
    alone; ``p_adjusted``: Holm's adjusted p (else ``settings.alpha_per_test`` decides).

    Returns regression, improvement, unchanged or inconclusive (with what limited it); fewer
    than ``settings.min_samples`` values a side is inconclusive.  The table: docs/comparison.md
    ("How a verdict is reached"); the measured factors: docs/calibration.md.
    """
    info = metric_info(metric)
    m = settings.effect_for(metric)
    paired = paired and len(base) == len(head)
    b = [float(v) for v in base]
    h = [float(v) for v in head]
    median_base = _median(b) if b else None
    median_head = _median(h) if h else None
    ratio = _ratio(median_head, median_base) if median_base is not None and median_head is not None else None
    need = settings.min_samples
    result = Figures(
        metric=metric,
        unit=info.unit,
        higher_is_better=info.higher_is_better,
        paired=paired,
        n_base=len(b),
        n_head=len(h),
        median_base=_finite(median_base),
        median_head=_finite(median_head),
        ratio=_finite(ratio),
        change_pct=_change(ratio),
        min_effect=m,
        verdict=Verdict.INCONCLUSIVE,
        reason=f"n too small: base {len(b)}, head {len(h)} samples, need {need} each",
    )
    if ratio is None or len(b) < need or len(h) < need:
        return result
    return _decided(result, b, h, settings=settings, p_adjusted=p_adjusted, alone=alone, together=together)


def _decided(
    result: Figures,
    b: list[float],
    h: list[float],
    *,
    settings: Settings,
    p_adjusted: float | None,
    alone: Alone,
    together: bool,
) -> Figures:
    """:func:`compare_metric`'s figures of a metric with enough samples on both sides: its test,
    its interval (of the pairs' log ratios where ``together``), its verdict and why."""
    m = result.min_effect
    together = together and result.paired
    shrink = alone.shrink
    reads = alone.reads if together else None
    read_m = m if reads is None else read_effect(m, reads)
    beyond_m = m if reads is None else read_effect(m, (reads[1], reads[0]))
    evidence = weigh(b, h, settings=settings, p_adjusted=p_adjusted, together=together)
    measured = None
    if together:
        # the pairs' own ratio and its interval: each side's values keep the host's noise
        measured = pairs_ratio(b, h)
        lo, hi = bootstrap_pairs_ci(
            b, h, confidence=settings.confidence, n=settings.bootstrap, seed=settings.seed
        )
        ratio, lo, hi = (_alone(v, shrink) for v in (measured, lo, hi))
    else:
        ratio = _ratio(_median(h), _median(b))
        lo, hi = bootstrap_ratio_ci(
            b,
            h,
            confidence=settings.confidence,
            n=settings.bootstrap,
            seed=settings.seed,
            paired=result.paired,
        )
    constant = len(set(b)) == 1 and set(b) == set(h)
    verdict, reason = _decide(
        ratio,
        lo,
        hi,
        evidence,
        effects=Effect(m, read_m, beyond_m),
        higher_is_better=result.higher_is_better,
        settings=settings,
        constant=b[0] if constant else None,
    )
    reason += _reason_notes(ratio, measured, alone=Alone(shrink, reads), together=together)
    if p_adjusted is not None and evidence.significant and evidence.route == "t":
        # the t route's p for Holm is the level it rejects at: its adjusted p is at most alpha
        reason += (
            f" (Holm: Yuen's t reaches its share of the family's level, family alpha {settings.alpha:g})"
        )
    elif p_adjusted is not None:
        reason += f" (Holm-adjusted {_p_is(p_adjusted)}, family alpha {settings.alpha:g})"
    crossed = None if reads is None else round(read_effect(m, reads), 6)
    interval = _Interval(
        ratio, lo, hi, result.n_base, result.n_head, m, crossed, None if reads is None else beyond_m
    )
    # a crossed pair fails only from the minimum effect as it reads it at most: nothing smaller is seen
    seen = could_see(interval, settings) if reads is None else max(could_see(interval, settings), beyond_m)
    scaled = together and shrink != 1.0
    ends = None if reads is None else (alone_range(lo, reads)[0], alone_range(hi, reads)[1])
    return replace(
        result,
        together=together,
        shrink=shrink if scaled else None,
        measured_change_pct=_change(measured) if scaled else None,
        alone_low_pct=None if ends is None else _change(ends[0]),
        alone_high_pct=None if ends is None else _change(ends[1]),
        crossed_effect=crossed,
        ratio=_finite(ratio),
        change_pct=_change(ratio),
        ci_low=_finite(lo),
        ci_high=_finite(hi),
        ci_low_pct=_change(lo),
        ci_high_pct=_change(hi),
        p_value=_finite(evidence.p),
        p_adjusted=_finite(p_adjusted),
        verdict=verdict,
        reason=reason,
        could_see_pct=round(seen * 100.0, 2) if math.isfinite(seen) else None,
        rounds_to_decide=rounds_to_decide(interval, settings) if verdict is Verdict.INCONCLUSIVE else None,
    )


class _Interval(NamedTuple):
    """A metric's ratio and interval as measured (not finite where a median is 0), for
    :mod:`harness.compare.power`."""

    ratio: float
    ci_low: float
    ci_high: float
    n_base: int
    n_head: int
    min_effect: float
    crossed_effect: float | None
    crossed_beyond: float | None = None


def _reason_notes(ratio: float, measured: float | None, *, alone: Alone, together: bool) -> str:
    """What a verdict's reason adds for a crossed pair (the sizes alone its ratio reads as) and for
    a pair sharing one CPU (the shrink its ratio was scaled by)."""
    notes = ""
    if alone.reads is not None:
        a_lo, a_hi = alone_range(ratio, alone.reads)
        notes += (
            f" (crossed: a change reads {alone.reads[0]:g}-{alone.reads[1]:g} times its size alone on logs:"
            f" {pct(ratio)} is {pct(a_lo)} to {pct(a_hi)} alone)"
        )
    if together and alone.shrink != 1.0:
        notes += (
            f" (the size alone of a CPU-bound change: {pct(measured)} as measured together "
            f"on one CPU, x{alone.shrink:g} on logs; a slower device can read smaller still)"
        )
    return notes


def _change(value: float | None) -> float | None:
    """A ratio as a percent change, None where it is not finite."""
    v = _finite(value)
    return None if v is None else round((v - 1.0) * 100.0, 4)


def read_effect(m: float, reads: tuple[float, float]) -> float:
    """The minimum effect ``m`` as a crossed pair that reads a change at ``reads[0]`` times its
    size alone on logs measures it: ``(1 + m) ** reads[0] - 1`` (``reads[1]`` is not used)."""
    return float((1.0 + m) ** reads[0] - 1.0)


def alone_range(ratio: float, reads: tuple[float, float]) -> tuple[float, float]:
    """The sizes alone a crossed pair's ``ratio`` may stand for, read at ``reads[0]``-``reads[1]``
    times a change's size alone on logs: ``ratio ** (1 / reads[1])`` and ``ratio ** (1 / reads[0])``,
    in order.  Applied to an interval's ends (the low end's lower, the high end's upper), it is
    the interval of the size alone: one run's noise and the read factor's range together."""
    if not 0 < ratio < math.inf:
        return ratio, ratio
    ends = sorted(math.exp(math.log(ratio) / k) for k in reads)
    return ends[0], ends[1]


def _alone(ratio: float, shrink: float) -> float:
    """A pair's ratio taken together, as the change it would be alone: ``ratio ** shrink``."""
    if shrink == 1.0 or not 0 < ratio < math.inf:
        return ratio
    return float(math.exp(math.log(ratio) * shrink))


class Effect(NamedTuple):
    """The minimum effect and the edges a figure's measured change is held to: ``measured``, what
    a change of the minimum effect alone may read as at least (the edge of "unchanged"), and
    ``beyond``, at most (the edge of a regression or an improvement); all three are the same but
    for a crossed guest pair."""

    minimum: float
    measured: float
    beyond: float


def _decide(
    ratio: float,
    lo: float,
    hi: float,
    evidence: Evidence,
    *,
    effects: Effect,
    higher_is_better: bool,
    settings: Settings,
    constant: float | None,
) -> tuple[Verdict, str]:
    """The decision table of one metric, first matching row wins (see :func:`compare_metric`);
    ``effects``: the minimum effect and what it measures as (the edge of every row)."""
    m, measured, beyond_m = effects
    if higher_is_better:
        worse, w_lo, w_hi = _inverse(ratio), _inverse(hi), _inverse(lo)
    else:
        worse, w_lo, w_hi = ratio, lo, hi
    edge = 1.0 + measured
    far = 1.0 + beyond_m
    significant = evidence.significant
    excludes_one = w_lo > 1.0 or w_hi < 1.0
    inside = 1.0 / edge < w_lo and w_hi < edge
    beyond = w_lo >= edge or w_hi <= 1.0 / edge
    # wider than the band of "unchanged": even centred on 1 it could not fit in it
    span = w_hi / w_lo if w_lo > 0 else math.inf
    wide = not span <= edge * edge

    conf = f"{settings.confidence * 100:g}% CI {pct(lo)} to {pct(hi)}"
    change = f"{pct(ratio)}{' (higher is better)' if higher_is_better else ''}"
    effect = f"{m * 100:g}%"
    if measured != m:
        # a crossed pair: the minimum effect as the pair may read it, at least and at most
        effect += f" (a crossed pair reads it as {measured * 100:.1f}% to {beyond_m * 100:.1f}%)"
    p = f"{_p_is(evidence.p)} ({'Yuen t on logs' if evidence.route == 't' else 'rank test'})"
    half = (hi - lo) / 2.0 * 100.0 if math.isfinite(hi - lo) else math.inf
    more = rounds_text(evidence)

    if constant is not None:
        return Verdict.UNCHANGED, f"identical constant samples on both sides ({constant:g})"
    if significant and w_lo > 1.0 and worse >= far:
        return Verdict.REGRESSION, f"worse by {change}, {conf}, {p}: at least the minimum {effect}"
    if significant and w_hi < 1.0 and worse <= 1.0 / far:
        return Verdict.IMPROVEMENT, f"better by {change}, {conf}, {p}: at least the minimum {effect}"
    if inside:
        return Verdict.UNCHANGED, f"{change}, {conf}: within the minimum effect ±{effect}"
    if significant and excludes_one and (worse >= edge or worse <= 1.0 / edge):
        return (
            Verdict.INCONCLUSIVE,
            f"significant ({p}): {change}, {conf}, but a crossed pair reads a change of the minimum "
            f"{effect}: as measured it may lie within the minimum alone",
        )
    if significant and excludes_one:
        return (
            Verdict.INCONCLUSIVE,
            f"significant ({p}) but {change} is smaller than the minimum effect {effect}, "
            f"and the interval reaches it ({conf})",
        )
    if beyond:
        return (
            Verdict.INCONCLUSIVE,
            f"needs more rounds for the family's level: {change}, {conf} lies beyond the minimum "
            f"effect {effect}, but {evidence.limit}{more}",
        )
    if wide:
        return (
            Verdict.INCONCLUSIVE,
            f"too noisy: {change}, {conf} (±{half:.1f}%) is wider than the band of the minimum "
            f"effect ±{effect}, {p}",
        )
    return (
        Verdict.INCONCLUSIVE,
        f"needs more rounds: {change}, {conf} is narrower than the band of the minimum effect "
        f"±{effect} but crosses its edge; {evidence.limit or p}{more}",
    )
