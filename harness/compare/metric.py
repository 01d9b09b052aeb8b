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
from harness.compare.text import _finite, _p_is, format_value, pct
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


@dataclass(frozen=True)
class MetricResult:
    """The comparison of one metric of one cell.

    ``ratio`` is median(head)/median(base) (``inf`` when base's median is 0 and
    head's is not; ``None`` without samples); ``ci_low``/``ci_high`` its
    bootstrap interval, in the same head/base orientation; both are ``None``
    when a side has fewer than ``min_samples`` samples.  ``p_value`` is the
    p of the settings' test (``Settings.test``).
    """

    metric: str
    unit: str
    higher_is_better: bool
    n_base: int
    n_head: int
    median_base: float | None
    median_head: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    min_effect: float
    verdict: Verdict
    reason: str
    paired: bool = False
    # the p value adjusted for the family of tests (Holm); None when judged with alpha_per_test
    p_adjusted: float | None = None
    # the smallest change this comparison would have caught (harness.compare.power), a fraction
    could_see: float | None = None
    # for an inconclusive metric: about how many rounds per side would decide it (None: not in reach)
    rounds_to_decide: int | None = None
    # every pair ran at the same moment: ratio, interval and test are the pairs' log ratios'
    together: bool = False
    # sharing one CPU shrinks a change (harness.sample.pairing): ratio and interval are the pairs'
    # scaled on logs by this factor, the size alone of a CPU-bound change (a change that makes the
    # guest wait can read smaller still); ``measured_ratio`` is the pairs' own
    shrink: float = 1.0
    measured_ratio: float | None = None
    # why this metric is shown but not gated ("" when it is gated)
    information: str = ""
    # a guest pair taken crossed: what it reads of a change's size alone, at least and at most, on
    # logs (Settings.crossed_reads), and the minimum effect as it reads it at least (the edge of
    # every verdict of the figure)
    reads: tuple[float, float] | None = None

    @property
    def crossed_effect(self) -> float | None:
        """A crossed pair's edge: the minimum effect as the pair reads it at least (None: not crossed)."""
        return None if self.reads is None else round(read_effect(self.min_effect, self.reads), 6)

    def alone_range(self) -> tuple[float, float] | None:
        """A crossed pair's ratio as the range of sizes alone it reads as (None: not crossed)."""
        if self.reads is None or self.ratio is None:
            return None
        return alone_range(self.ratio, self.reads)

    def figures(self) -> Figures:
        """As the comparison writes it: figures that are not finite (a median of 0 as divisor)
        become None, the ratio and its interval also as percent changes."""

        def change(value: float | None) -> float | None:
            v = _finite(value)
            return None if v is None else round((v - 1.0) * 100.0, 4)

        alone = self.alone_range()
        return Figures(
            metric=self.metric,
            unit=self.unit,
            higher_is_better=self.higher_is_better,
            paired=self.paired,
            together=self.together,
            shrink=self.shrink if self.together and self.shrink != 1.0 else None,
            measured_change_pct=change(self.measured_ratio) if self.together and self.shrink != 1.0 else None,
            information=self.information or None,
            alone_low_pct=change(alone[0]) if alone is not None else None,
            alone_high_pct=change(alone[1]) if alone is not None else None,
            crossed_effect=self.crossed_effect,
            n_base=self.n_base,
            n_head=self.n_head,
            median_base=_finite(self.median_base),
            median_head=_finite(self.median_head),
            ratio=_finite(self.ratio),
            change_pct=change(self.ratio),
            ci_low=_finite(self.ci_low),
            ci_high=_finite(self.ci_high),
            ci_low_pct=change(self.ci_low),
            ci_high_pct=change(self.ci_high),
            p_value=_finite(self.p_value),
            p_adjusted=_finite(self.p_adjusted),
            min_effect=self.min_effect,
            verdict=self.verdict,
            reason=self.reason,
            could_see_pct=None if self.could_see is None else round(self.could_see * 100.0, 2),
            rounds_to_decide=self.rounds_to_decide,
        )

    def change_text(self) -> str:
        """``"host.write_amplification +2.6% (1.001 → 1.027)"``."""
        return (
            f"{self.metric} {pct(self.ratio)} "
            f"({format_value(self.median_base, self.unit)} → {format_value(self.median_head, self.unit)})"
        )


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
) -> MetricResult:
    """The verdict of one metric from base's and head's values, oriented so that "worse" > 1.

    ``paired``: ``base[i]`` and ``head[i]`` are of round i (unequal lengths compare unpaired);
    ``together`` (with ``paired``): they ran at the same moment, and the test is that of the pairs'
    log ratios (:mod:`harness.compare.paired`); ``alone``: what such a pair reads of a change of
    its size alone (shared one CPU: a shrink the ratio is scaled up by; crossed: a range, the
    minimum effect taken as the pair reads it at least); ``p_adjusted``: Holm's adjusted p of this
    test in its family (else ``settings.alpha_per_test`` decides).

    Returns a regression (significant, the interval above 1, the change at least the minimum
    effect), an improvement (the mirror), unchanged (the whole interval inside the minimum
    effect's band) or inconclusive with what limited it; fewer than ``settings.min_samples``
    values on a side is inconclusive.  docs/comparison.md ("How a verdict is reached") gives the
    table; docs/calibration.md the measured factors.
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
    result = MetricResult(
        metric=metric,
        unit=info.unit,
        higher_is_better=info.higher_is_better,
        n_base=len(b),
        n_head=len(h),
        median_base=median_base,
        median_head=median_head,
        ratio=ratio,
        ci_low=None,
        ci_high=None,
        p_value=None,
        min_effect=m,
        verdict=Verdict.INCONCLUSIVE,
        reason=f"n too small: base {len(b)}, head {len(h)} samples, need {need} each",
        paired=paired,
    )
    if ratio is None or len(b) < need or len(h) < need:
        return result
    together = together and paired
    shrink = alone.shrink
    reads = alone.reads if together else None
    read_m = m if reads is None else read_effect(m, reads)
    if reads is not None:
        result = replace(result, reads=reads)
    evidence = weigh(b, h, settings=settings, p_adjusted=p_adjusted, together=together)
    if together:
        # the pairs' own ratio and its interval: each side's values keep the host's noise
        measured = pairs_ratio(b, h)
        lo, hi = bootstrap_pairs_ci(
            b, h, confidence=settings.confidence, n=settings.bootstrap, seed=settings.seed
        )
        ratio, lo, hi = (_alone(v, shrink) for v in (measured, lo, hi))
        result = replace(result, ratio=ratio, together=True, shrink=shrink, measured_ratio=measured)
    else:
        lo, hi = bootstrap_ratio_ci(
            b, h, confidence=settings.confidence, n=settings.bootstrap, seed=settings.seed, paired=paired
        )
    constant = len(set(b)) == 1 and set(b) == set(h)
    verdict, reason = _decide(
        ratio,
        lo,
        hi,
        evidence,
        effects=Effect(m, read_m),
        higher_is_better=info.higher_is_better,
        settings=settings,
        constant=b[0] if constant else None,
    )
    if reads is not None:
        a_lo, a_hi = alone_range(ratio, reads)
        reason += (
            f" (crossed: a change reads {reads[0]:g}-{reads[1]:g} times its size alone on logs:"
            f" {pct(ratio)} is {pct(a_lo)} to {pct(a_hi)} alone)"
        )
    if together and shrink != 1.0:
        reason += (
            f" (the size alone of a CPU-bound change: {pct(result.measured_ratio)} as measured together "
            f"on one CPU, x{shrink:g} on logs; a slower device can read smaller still)"
        )
    if p_adjusted is not None and evidence.significant and evidence.route == "t":
        # the t route's p for Holm is the level it rejects at: its adjusted p is at most alpha
        reason += (
            f" (Holm: Yuen's t reaches its share of the family's level, family alpha {settings.alpha:g})"
        )
    elif p_adjusted is not None:
        reason += f" (Holm-adjusted {_p_is(p_adjusted)}, family alpha {settings.alpha:g})"
    decided = replace(
        result,
        ci_low=lo,
        ci_high=hi,
        p_value=evidence.p,
        verdict=verdict,
        reason=reason,
        p_adjusted=p_adjusted,
    )
    seen = could_see(decided, settings)
    return replace(
        decided,
        could_see=seen if math.isfinite(seen) else None,
        rounds_to_decide=rounds_to_decide(decided, settings) if verdict is Verdict.INCONCLUSIVE else None,
    )


def read_effect(m: float, reads: tuple[float, float]) -> float:
    """The minimum effect ``m`` as a crossed pair reads it at least: ``(1 + m) ** reads[0] - 1``."""
    return float((1.0 + m) ** reads[0] - 1.0)


def alone_range(ratio: float, reads: tuple[float, float]) -> tuple[float, float]:
    """The sizes alone a crossed pair's ``ratio`` may stand for, read at ``reads[0]``-``reads[1]``
    times a change's size alone on logs: ``ratio ** (1 / reads[1])`` to ``ratio ** (1 / reads[0])``,
    in order."""
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
    """The minimum effect, and the change a figure must measure for it: the same, or for a crossed
    guest pair what that pair reads a change of the minimum effect alone as at least."""

    minimum: float
    measured: float


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
    m, measured = effects
    if higher_is_better:
        worse, w_lo, w_hi = _inverse(ratio), _inverse(hi), _inverse(lo)
    else:
        worse, w_lo, w_hi = ratio, lo, hi
    edge = 1.0 + measured
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
        # a crossed pair: the minimum effect as the pair reads it at least
        effect += f" (a crossed pair reads it as {measured * 100:.1f}% at least)"
    p = f"{_p_is(evidence.p)} ({'Yuen t on logs' if evidence.route == 't' else 'rank test'})"
    half = (hi - lo) / 2.0 * 100.0 if math.isfinite(hi - lo) else math.inf
    more = rounds_text(evidence)

    if constant is not None:
        return Verdict.UNCHANGED, f"identical constant samples on both sides ({constant:g})"
    if significant and w_lo > 1.0 and worse >= edge:
        return Verdict.REGRESSION, f"worse by {change}, {conf}, {p}: at least the minimum {effect}"
    if significant and w_hi < 1.0 and worse <= 1.0 / edge:
        return Verdict.IMPROVEMENT, f"better by {change}, {conf}, {p}: at least the minimum {effect}"
    if inside:
        return Verdict.UNCHANGED, f"{change}, {conf}: within the minimum effect ±{effect}"
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
