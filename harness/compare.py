"""Base against head: the statistics of the gate, a verdict per cell, comparison.json.  Pure: no I/O.

The gate runs base and head of a change interleaved on one runner, in rounds
(round k measures base then head, or head then base): sample ``index`` k of
base and of head come from the same round.  For every cell and every gated
metric this module says whether head is worse, by how much and how sure:

* **significance**: a two-sided Mann-Whitney U test on the samples
  (:func:`mann_whitney_u`; exact when small and untied, else the normal
  approximation with tie and continuity corrections);
* **size**: the ratio head/base of the medians, with a percentile bootstrap
  confidence interval (:func:`bootstrap_ratio_ci`), paired by round when both
  sides have the same rounds, so that a host that drifts during the run moves
  both sides of a round together and cancels out;
* **a minimum effect** (5 % by default, per metric with a rule such as
  ``total_s:3%``): a change smaller than that is never a regression.

:func:`compare_metric` turns those into a :class:`Verdict` for one metric,
:func:`compare_cell` for a cell (failures included: head failing where base
works is a regression of its own kind; both failing is an error, never "no
change"), :func:`compare_records` for two sets of records, and
:func:`build_comparison` into the versioned ``comparison.json`` document that
``docs/comparison.md`` describes and :func:`render_markdown` renders.
:func:`add_compare_options` and :func:`settings_from_args` are the command-line
options of ``diskbench compare`` and ``diskbench gate``; reading and writing
files is :mod:`harness.compare_cli`'s (``load_comparison``).

Order of the verdicts, worst first, wherever several are reduced to one (the
metrics of a cell, the counters of a cell)::

    regression > inconclusive > improvement > unchanged

An inconclusive metric outranks an improvement because it may hide a
regression.  The overall verdict of a comparison adds ``error`` (see
:func:`overall_verdict`).
"""

from __future__ import annotations

import argparse
import functools
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from harness.errors import UsageError
from harness.workloads import metric_info

SCHEMA = "diskbench-comparison"
VERSION = 1

# exact Mann-Whitney distribution up to this many samples per side (no ties)
EXACT_MAX_N = 20

# the axes of a cell that the comparison document flattens, in this order
AXES = ("format", "preallocation", "cluster_size", "cache", "aio", "interface", "workload", "cache_state")


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"


class Kind(StrEnum):
    """Where a cell's verdict comes from."""

    METRIC = "metric"  # the statistics of the gated metrics
    FAILURE = "failure"  # head failed where base worked: a regression
    BOTH_FAILED = "both-failed"  # an error, never "no change"
    BASE_FAILED = "base-failed"  # an error: nothing to compare head with
    MISSING = "missing"  # the cell has records on one side only: an error
    NO_METRIC = "no-metric"  # none of the gated metrics is in the samples: inconclusive
    CANARY = "canary"  # a regression or improvement voided by the host canary: inconclusive


_RANK = {
    Verdict.UNCHANGED: 0,
    Verdict.IMPROVEMENT: 1,
    Verdict.INCONCLUSIVE: 2,
    Verdict.REGRESSION: 3,
}


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The worst of metric verdicts (regression > inconclusive > improvement > unchanged)."""
    found = list(verdicts)
    return max(found, key=lambda v: _RANK.get(v, 4)) if found else Verdict.UNCHANGED


# --- settings and rules ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """How the comparison decides; written into comparison.json as they were."""

    metrics: tuple[str, ...] = ("total_s",)
    counters: tuple[str, ...] = ("host.write_amplification", "host.flushes")
    min_effect: float = 0.05
    counter_min_effect: float = 0.02
    min_effect_by_metric: Mapping[str, float] = field(default_factory=dict)
    # family-wise: split over ``comparisons`` tests (Bonferroni), so that a gate of many cells
    # does not cry wolf more often than one of a single cell
    alpha: float = 0.01
    confidence: float = 0.95
    bootstrap: int = 2000
    seed: int = 0
    min_samples: int = 4
    comparisons: int = 1

    @property
    def alpha_per_test(self) -> float:
        """The significance level of each Mann-Whitney test: ``alpha / comparisons``."""
        return self.alpha / max(self.comparisons, 1)

    def __post_init__(self) -> None:
        # a copy: the caller's dict cannot change a frozen Settings afterwards
        object.__setattr__(self, "min_effect_by_metric", dict(self.min_effect_by_metric))
        if not self.metrics:
            raise UsageError("no gated metric: give at least one (--metric total_s)")
        for name, value in (
            ("min effect", self.min_effect),
            ("counter min effect", self.counter_min_effect),
            *((f"min effect of {m}", v) for m, v in self.min_effect_by_metric.items()),
        ):
            if not 0 <= value < 10:
                raise UsageError(f"{name} {value * 100:g}%: use 0% or more, below 1000%")
        if not 0 < self.alpha < 1:
            raise UsageError(f"alpha {self.alpha:g}: use a value between 0 and 1, e.g. 0.05")
        if not 0 < self.confidence < 1:
            raise UsageError(f"confidence {self.confidence:g}: use a value between 0 and 1, e.g. 0.95")
        if self.bootstrap < 100:
            raise UsageError(f"bootstrap {self.bootstrap}: use 100 resamples or more")
        if self.min_samples < 2:
            raise UsageError(f"min_samples {self.min_samples}: use 2 or more")

    def effect_for(self, metric: str) -> float:
        """The minimum effect of ``metric``: its rule, else the counters' or the metrics' default."""
        if metric in self.min_effect_by_metric:
            return self.min_effect_by_metric[metric]
        return self.counter_min_effect if metric in self.counters else self.min_effect

    def as_dict(self) -> dict[str, Any]:
        return {
            "metrics": list(self.metrics),
            "counters": list(self.counters),
            "min_effect": self.min_effect,
            "counter_min_effect": self.counter_min_effect,
            "min_effect_by_metric": dict(sorted(self.min_effect_by_metric.items())),
            "alpha": self.alpha,
            "confidence": self.confidence,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "min_samples": self.min_samples,
            "comparisons": self.comparisons,
            "alpha_per_test": self.alpha_per_test,
        }


def parse_percent(text: str, *, what: str) -> float:
    """``"5"``, ``"5%"`` or ``"+5%"`` -> 0.05; ``what`` names the input in the error."""
    raw = text.strip().removesuffix("%").strip().removeprefix("+")
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a percentage: write e.g. 5 or 5%") from None
    if not math.isfinite(value) or value < 0 or value >= 1000:
        raise UsageError(f"{what} {text!r}: use a percentage of 0 or more, below 1000")
    return value / 100.0


def parse_rule(text: str, *, what: str = "rule") -> tuple[str, float]:
    """``"total_s:5%"`` -> ``("total_s", 0.05)``: the minimum effect of one metric.

    ``what`` names the input in errors (``"--rule"`` on the command line).
    """
    name, sep, pct = text.rpartition(":")
    name = name.strip()
    if not sep or not name or not pct.strip():
        raise UsageError(f"{what} {text!r}: write METRIC:PERCENT, e.g. total_s:5%")
    try:
        metric_info(name)
    except UsageError as exc:
        raise UsageError(f"{what} {text!r}: {exc.message}") from None
    try:
        return name, parse_percent(pct, what="percentage")
    except UsageError:
        raise UsageError(
            f"{what} {text!r}: {pct.strip()!r} is not a percentage of 0 or more: write e.g. {name}:5%"
        ) from None


def check_gated_metric(name: str) -> str:
    """A metric that can be gated: known, and not informational (bytes, files...)."""
    info = metric_info(name)
    if info.informational:
        raise UsageError(
            f"metric {name!r} describes the work done, it is not a cost: gate a time such as total_s"
        )
    return name


def add_compare_options(parser: Any) -> None:
    """The statistical options of a comparison (``compare`` and ``gate``).

    An option the parser already has (``gate`` has its own ``--seed``) is
    left as the parser defined it.
    """
    group = parser.add_argument_group("how base and head are compared")
    options: list[tuple[str, dict[str, Any]]] = [
        (
            "--metric",
            {
                "action": "append",
                "default": None,
                "metavar": "NAME",
                "help": "a gated metric (repeatable; default total_s): its regression fails the comparison",
            },
        ),
        (
            "--min-effect",
            {
                "default": "5%",
                "metavar": "PCT",
                "help": "smallest change that counts as a regression or improvement, e.g. 5 or 5%% "
                "(default 5%%)",
            },
        ),
        (
            "--rule",
            {
                "action": "append",
                "default": [],
                "metavar": "METRIC:PCT",
                "help": "the minimum effect of one metric, e.g. total_s:3%% or host.flushes:1%% (repeatable)",
            },
        ),
        (
            "--alpha",
            {
                "type": float,
                "default": Settings.alpha,
                "help": "family-wise significance level, split over the cells x gated metrics compared "
                "(Bonferroni) for each Mann-Whitney U test (default 0.01)",
            },
        ),
        (
            "--seed",
            {
                "type": int,
                "default": Settings.seed,
                "help": "seed of the bootstrap: same input, same interval (default 0)",
            },
        ),
    ]
    for flag, kwargs in options:
        try:
            group.add_argument(flag, **kwargs)
        except argparse.ArgumentError:
            continue  # the parser has its own


def settings_from_args(args: argparse.Namespace) -> Settings:
    """:class:`Settings` from the options of :func:`add_compare_options`; bad values are UsageError.

    An option that is missing or None (a parser that leaves it to a spec) takes Settings' default.
    """
    metrics: list[str] = []
    for name in getattr(args, "metric", None) or ["total_s"]:
        try:
            metrics.append(check_gated_metric(name.strip()))
        except UsageError as exc:
            raise UsageError(f"--metric {name!r}: {exc.message}") from None
    rules = dict(parse_rule(text, what="--rule") for text in getattr(args, "rule", None) or [])
    min_effect = getattr(args, "min_effect", None)
    return Settings(
        metrics=tuple(dict.fromkeys(metrics)),
        min_effect=Settings.min_effect
        if min_effect is None
        else parse_percent(str(min_effect), what="--min-effect"),
        min_effect_by_metric=rules,
        alpha=Settings.alpha if getattr(args, "alpha", None) is None else args.alpha,
        seed=Settings.seed if getattr(args, "seed", None) is None else args.seed,
    )


# --- statistics -----------------------------------------------------------------------------------


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


# --- one metric -----------------------------------------------------------------------------------


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def pct(ratio: float | None) -> str:
    """A ratio as a signed change: 1.2 -> ``"+20.0%"``."""
    if ratio is None or math.isnan(ratio):
        return "n/a"
    if math.isinf(ratio):
        return "+inf%" if ratio > 0 else "-inf%"
    return f"{(ratio - 1.0) * 100.0:+.1f}%"


def format_p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _p_is(p: float) -> str:
    """``"p=0.012"`` or ``"p<0.001"``."""
    text = format_p(p)
    return f"p{text}" if text.startswith("<") else f"p={text}"


def format_value(value: float | None, unit: str) -> str:
    """A median in its unit: ``12.30 s``, ``1.028``, ``1500.0 MiB/s``, ``240``."""
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "MiB/s":
        return f"{value:.1f} MiB/s"
    if unit == "ratio":
        return f"{value:.3f}"
    if unit == "B":
        return f"{value / 2**20:.1f} MiB" if abs(value) >= 2**20 else f"{value:.0f} B"
    return f"{value:.6g}"


@dataclass(frozen=True)
class MetricResult:
    """The comparison of one metric of one cell.

    ``ratio`` is median(head)/median(base) (``inf`` when base's median is 0 and
    head's is not; ``None`` without samples); ``ci_low``/``ci_high`` its
    bootstrap interval, in the same head/base orientation; both are ``None``
    when a side has fewer than ``min_samples`` samples.
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

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: figures that are not finite (a median of 0 as divisor) become null."""

        def change(value: float | None) -> float | None:
            v = _finite(value)
            return None if v is None else round((v - 1.0) * 100.0, 4)

        return {
            "metric": self.metric,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "paired": self.paired,
            "n_base": self.n_base,
            "n_head": self.n_head,
            "median_base": _finite(self.median_base),
            "median_head": _finite(self.median_head),
            "ratio": _finite(self.ratio),
            "change_pct": change(self.ratio),
            "ci_low": _finite(self.ci_low),
            "ci_high": _finite(self.ci_high),
            "ci_low_pct": change(self.ci_low),
            "ci_high_pct": change(self.ci_high),
            "p_value": _finite(self.p_value),
            "min_effect": self.min_effect,
            "verdict": self.verdict.value,
            "reason": self.reason,
        }

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
    min_effect: float | None = None,
) -> MetricResult:
    """The verdict of one metric; ``paired``: ``base[i]`` and ``head[i]`` are of round i.

    Oriented so that "worse" > 1 (head/base for a time, base/head for a
    throughput), with ``m`` the minimum effect:

    * fewer than ``settings.min_samples`` values on a side: inconclusive;
    * regression: p < alpha, the (oriented) interval's lower end above 1, and
      the change at least 1+m;
    * improvement: the mirror (p < alpha, interval below 1, change at most 1/(1+m));
    * unchanged: the whole interval inside (1/(1+m), 1+m), or both sides the
      same constant;
    * otherwise inconclusive, with the reason: significant but smaller than the
      minimum effect while the interval reaches it, or too noisy.

    ``paired`` with different lengths on the two sides compares them unpaired.
    """
    info = metric_info(metric)
    m = settings.effect_for(metric) if min_effect is None else min_effect
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
    _u, p = mann_whitney_u(h, b)
    lo, hi = bootstrap_ratio_ci(
        b, h, confidence=settings.confidence, n=settings.bootstrap, seed=settings.seed, paired=paired
    )
    verdict, reason = _decide(
        ratio, lo, hi, p, m=m, higher_is_better=info.higher_is_better, settings=settings, b=b, h=h
    )
    return replace(result, ci_low=lo, ci_high=hi, p_value=p, verdict=verdict, reason=reason)


def _decide(
    ratio: float,
    lo: float,
    hi: float,
    p: float,
    *,
    m: float,
    higher_is_better: bool,
    settings: Settings,
    b: Sequence[float],
    h: Sequence[float],
) -> tuple[Verdict, str]:
    if higher_is_better:
        worse, w_lo, w_hi = _inverse(ratio), _inverse(hi), _inverse(lo)
    else:
        worse, w_lo, w_hi = ratio, lo, hi
    conf = f"{settings.confidence * 100:g}% CI {pct(lo)} to {pct(hi)}"
    direction = " (higher is better)" if higher_is_better else ""
    change = f"{pct(ratio)}{direction}"
    effect = f"{m * 100:g}%"
    significant = p < settings.alpha_per_test
    if len(set(b)) == 1 and set(b) == set(h):
        return Verdict.UNCHANGED, f"identical constant samples on both sides ({b[0]:g})"
    if significant and w_lo > 1.0 and worse >= 1.0 + m:
        return (
            Verdict.REGRESSION,
            f"worse by {change}, {conf}, {_p_is(p)}: at least the minimum {effect}",
        )
    if significant and w_hi < 1.0 and worse <= 1.0 / (1.0 + m):
        return (
            Verdict.IMPROVEMENT,
            f"better by {change}, {conf}, {_p_is(p)}: at least the minimum {effect}",
        )
    if 1.0 / (1.0 + m) < w_lo and w_hi < 1.0 + m:
        return Verdict.UNCHANGED, f"{change}, {conf}: within the minimum effect ±{effect}"
    if significant and (w_lo > 1.0 or w_hi < 1.0):
        return (
            Verdict.INCONCLUSIVE,
            f"significant ({_p_is(p)}) but {change} is smaller than the minimum effect {effect}, "
            f"and the interval reaches it ({conf})",
        )
    half = (hi - lo) / 2.0 * 100.0 if math.isfinite(hi - lo) else math.inf
    return (
        Verdict.INCONCLUSIVE,
        f"too noisy: {change}, {conf} (±{half:.1f}%), {_p_is(p)}, minimum effect {effect}",
    )


# --- one cell -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellResult:
    """The comparison of one cell: its verdict, where it comes from, every metric's figures.

    ``verdict`` is the time verdict (gated metrics, failures); ``counter_verdict``
    that of the low-noise counters, reported but never gating; ``note`` ties
    them together ("explained by: ..." or "structural change: ...").
    """

    cell_id: str
    cell: Mapping[str, Any]
    verdict: Verdict
    kind: Kind
    reason: str
    rounds: int = 0
    base_ok: int = 0
    base_failed: int = 0
    head_ok: int = 0
    head_failed: int = 0
    metrics: tuple[MetricResult, ...] = ()
    counters: tuple[MetricResult, ...] = ()
    counter_verdict: Verdict = Verdict.UNCHANGED
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "cell_id": self.cell_id,
            "cell": dict(self.cell),
            "verdict": self.verdict.value,
            "kind": self.kind.value,
            "reason": self.reason,
            "rounds": self.rounds,
            "base_ok": self.base_ok,
            "base_failed": self.base_failed,
            "head_ok": self.head_ok,
            "head_failed": self.head_failed,
            "metrics": [r.as_dict() for r in self.metrics],
            "counters": [r.as_dict() for r in self.counters],
            "counter_verdict": self.counter_verdict.value,
            "note": self.note,
        }


def _workload_slug(workload: Mapping[str, Any]) -> str:
    """The workload part of a cell id (``install-full``, ``dd-256m-2m-ext4``)."""
    from harness.spec import Workload, WorkloadSpec

    try:
        spec = WorkloadSpec(
            name=Workload(workload["name"]),
            **{k: workload[k] for k in workload if k != "name" and k in WorkloadSpec.__dataclass_fields__},
        )
        return spec.slug
    except (KeyError, TypeError, ValueError):
        return str(workload.get("name", "?"))


def flatten_cell(cell: Mapping[str, Any]) -> dict[str, Any]:
    """The axes of a record's cell dict, flat: format, ..., workload (slug), cache_state.

    Other plain values at the top of the cell dict (a gate's ``gate_name``...)
    follow the axes as they are.
    """
    image = cell.get("image") or {}
    drive = cell.get("drive") or {}
    workload = cell.get("workload") or {}
    extra = {
        k: v
        for k, v in cell.items()
        if k not in ("id", "image", "drive", "workload", "cache_state")
        and (v is None or isinstance(v, str | int | float | bool))
    }
    return {
        "format": image.get("format"),
        "preallocation": image.get("preallocation"),
        "cluster_size": image.get("cluster_size"),
        "cache": drive.get("cache"),
        "aio": drive.get("aio"),
        "interface": drive.get("interface"),
        "workload": _workload_slug(workload) if isinstance(workload, Mapping) else str(workload),
        "cache_state": cell.get("cache_state", "fresh"),
        **extra,
    }


def _ok(samples: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for s in samples if s.get("status") == "ok"]


def _fails(ok: int, total: int) -> bool:
    """A side fails when more than half its samples failed, or none is ok."""
    return ok == 0 or (total - ok) * 2 > total


def _first_failure(samples: Sequence[Mapping[str, Any]]) -> str:
    for s in samples:
        if s.get("status") != "ok":
            return str(s.get("reason") or f"status {s.get('status')!r}, no reason recorded")
    return ""


def _values(
    metric: str, base: Sequence[Mapping[str, Any]], head: Sequence[Mapping[str, Any]]
) -> tuple[list[float], list[float], bool]:
    """The metric's values of both sides, paired by round when both have the same rounds."""

    def by_index(samples: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[Any]]:
        values, indices = [], []
        for pos, s in enumerate(samples):
            figures = s.get("metrics") or {}
            if metric in figures and figures[metric] is not None:
                values.append(float(figures[metric]))
                indices.append(s.get("index", pos))
        return values, indices

    b, bi = by_index(base)
    h, hi = by_index(head)
    paired = bool(b) and len(set(bi)) == len(bi) and len(set(hi)) == len(hi) and set(bi) == set(hi)
    if paired:
        order = {index: pos for pos, index in enumerate(bi)}
        h_by_round = [0.0] * len(h)
        for value, index in zip(h, hi, strict=True):
            h_by_round[order[index]] = value
        h = h_by_round
    return b, h, paired


def _present(metric: str, samples: Iterable[Mapping[str, Any]]) -> bool:
    return any(metric in (s.get("metrics") or {}) for s in samples)


def compare_cell(
    cell: Mapping[str, Any],
    base_samples: Sequence[Mapping[str, Any]],
    head_samples: Sequence[Mapping[str, Any]],
    *,
    settings: Settings,
) -> CellResult:
    """The verdict of one cell from the samples of base and head (a record's ``samples``)."""
    cell_id = str(cell.get("id", "?"))
    base_ok, head_ok = _ok(base_samples), _ok(head_samples)
    common: dict[str, Any] = {
        "cell_id": cell_id,
        "cell": flatten_cell(cell),
        "rounds": max(len(base_samples), len(head_samples)),
        "base_ok": len(base_ok),
        "base_failed": len(base_samples) - len(base_ok),
        "head_ok": len(head_ok),
        "head_failed": len(head_samples) - len(head_ok),
    }
    base_fails = _fails(len(base_ok), len(base_samples))
    head_fails = _fails(len(head_ok), len(head_samples))

    def tally(side: str, ok: int, samples: Sequence[Mapping[str, Any]]) -> str:
        if not samples:
            return f"{side} has no samples"
        first = _first_failure(samples)
        if not first:
            return f"{side} {ok} of {len(samples)} samples ok"
        return f"{side} failed {len(samples) - ok} of {len(samples)} samples (first: {first})"

    if base_fails or head_fails:
        base_text = tally("base", len(base_ok), base_samples)
        head_text = tally("head", len(head_ok), head_samples)
        if head_fails and not base_fails:
            verdict, kind, reason = Verdict.REGRESSION, Kind.FAILURE, f"{head_text}; {base_text}"
        elif base_fails and head_fails:
            verdict, kind = Verdict.ERROR, Kind.BOTH_FAILED
            reason = f"both sides failed: {base_text}; {head_text}"
        else:
            verdict, kind = Verdict.ERROR, Kind.BASE_FAILED
            reason = f"{base_text}: nothing to compare head with; {head_text}"
        return CellResult(**common, verdict=verdict, kind=kind, reason=reason, counter_verdict=Verdict.ERROR)

    def run(names: Sequence[str]) -> tuple[MetricResult, ...]:
        results = []
        for name in names:
            if not (_present(name, base_ok) or _present(name, head_ok)):
                continue  # not a figure of this workload
            b, h, paired = _values(name, base_ok, head_ok)
            results.append(compare_metric(name, b, h, settings=settings, paired=paired))
        return tuple(results)

    metrics = run(settings.metrics)
    counters = run([c for c in settings.counters if c not in settings.metrics])
    counter_verdict = worst(c.verdict for c in counters)
    if not metrics:
        return CellResult(
            **common,
            verdict=Verdict.INCONCLUSIVE,
            kind=Kind.NO_METRIC,
            reason=f"none of the gated metrics ({', '.join(settings.metrics)}) is in the samples",
            counters=counters,
            counter_verdict=counter_verdict,
            note=_note(Verdict.INCONCLUSIVE, counters),
        )
    verdict = worst(r.verdict for r in metrics)
    reason = "; ".join(f"{r.metric}: {r.reason}" for r in metrics if r.verdict is verdict)
    partial = [
        tally(side, len(ok), samples)
        for side, ok, samples in (("base", base_ok, base_samples), ("head", head_ok, head_samples))
        if len(ok) < len(samples)
    ]
    if partial:
        reason += f" ({'; '.join(partial)})"
    return CellResult(
        **common,
        verdict=verdict,
        kind=Kind.METRIC,
        reason=reason,
        metrics=metrics,
        counters=counters,
        counter_verdict=counter_verdict,
        note=_note(verdict, counters),
    )


def _note(verdict: Verdict, counters: Sequence[MetricResult]) -> str:
    """Counters that moved with the time explain it; counters that moved on their own are news."""
    changed = [c for c in counters if c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)]
    if not changed:
        return ""
    if verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        same = [c for c in changed if c.verdict is verdict]
        if same:
            return "explained by: " + "; ".join(c.change_text() for c in same)
    return "structural change: " + "; ".join(c.change_text() for c in changed)


def needs_more_rounds(result: CellResult) -> bool:
    """Whether more rounds could decide this cell: its time verdict is inconclusive from the statistics.

    Not for failures, missing records, cells without a gated metric, or a
    verdict voided by the host canary.
    """
    return result.verdict is Verdict.INCONCLUSIVE and result.kind is Kind.METRIC


# --- many cells -----------------------------------------------------------------------------------


def apply_canary(
    cells: Sequence[CellResult],
    *,
    before_mib_s: float,
    after_mib_s: float,
    settings: Settings,
) -> tuple[list[CellResult], dict[str, Any]]:
    """Void time verdicts when the host's own disk moved during the run.

    The canary is a plain write throughput of the runner's disk measured
    before and after the rounds.  When it moved by more than the minimum
    effect, a regression or improvement of kind ``metric`` may be the host's
    doing: it becomes inconclusive, kind ``canary``.  Failures and counters
    are left as they are (a count of flushes does not depend on the disk's
    speed).  Returns the cells and the ``canary`` object of the document.
    """
    measured = before_mib_s > 0 and after_mib_s > 0 and math.isfinite(before_mib_s + after_mib_s)
    change = after_mib_s / before_mib_s if measured else None
    moved = change is not None and abs(change - 1.0) > settings.min_effect
    canary = {
        "before_mib_s": before_mib_s if math.isfinite(before_mib_s) else None,
        "after_mib_s": after_mib_s if math.isfinite(after_mib_s) else None,
        "change": change,
        "moved": moved,
    }
    if not moved:
        return list(cells), canary
    why = (
        f"the host's own disk moved by {pct(change)} during the run "
        f"(canary {before_mib_s:.0f} → {after_mib_s:.0f} MiB/s)"
    )
    out = []
    for cell in cells:
        if cell.kind is Kind.METRIC and cell.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
            cell = replace(
                cell,
                verdict=Verdict.INCONCLUSIVE,
                kind=Kind.CANARY,
                reason=f"{why}; without the canary: {cell.verdict.value}, {cell.reason}",
            )
        out.append(cell)
    return out, canary


def _axis_text(axis: str, value: Any) -> str:
    if axis == "cluster_size" and isinstance(value, int):
        from harness.spec import format_size

        return f"{axis}={format_size(value)}"
    return f"{axis}={value}"


def axis_sentence(cells: Sequence[CellResult]) -> str | None:
    """One sentence naming the axis value that the regressed (else improved) cells share.

    Needs at least two such cells.  Among the values every one of them has
    (and not every compared cell has), the one whose cells changed most often
    wins; values that single out exactly the changed cells are named together.
    Cells in error are left out of the counts.  None when nothing is shared.
    """
    pool = [c for c in cells if c.verdict is not Verdict.ERROR]
    changed = [c for c in pool if c.verdict is Verdict.REGRESSION]
    word = "regressed"
    if not changed:
        changed = [c for c in pool if c.verdict is Verdict.IMPROVEMENT]
        word = "improved"
    if len(changed) < 2:
        return None
    axes = [a for a in AXES if all(a in c.cell for c in pool)]
    candidates: list[tuple[float, int, str, Any]] = []
    for order, axis in enumerate(axes):
        values = {repr(c.cell[axis]) for c in changed}
        if len(values) != 1:
            continue
        value = changed[0].cell[axis]
        if value is None:
            continue
        having = [c for c in pool if c.cell[axis] == value]
        if len(having) == len(pool):
            continue  # every cell has it: it tells nothing apart
        candidates.append((len(changed) / len(having), -order, axis, value))
    if not candidates:
        return None
    candidates.sort(reverse=True)
    best = candidates[0]
    chosen = [c for c in candidates if c[0] == 1.0] if best[0] == 1.0 else [best]
    chosen.sort(key=lambda c: -c[1])
    names = " and ".join(_axis_text(c[2], c[3]) for c in chosen)
    n_with = round(len(changed) / best[0])
    others = len(pool) - n_with
    return (
        f"Every {word} cell has {names} ({len(changed)} of {n_with} such cells {word}, 0 of {others} others)."
    )


def overall_verdict(cells: Sequence[CellResult]) -> Verdict:
    """regression if any cell regressed; else error if any; else inconclusive; else improvement; else unchanged."""
    found = {c.verdict for c in cells}
    for verdict in (
        Verdict.REGRESSION,
        Verdict.ERROR,
        Verdict.INCONCLUSIVE,
        Verdict.IMPROVEMENT,
    ):
        if verdict in found:
            return verdict
    return Verdict.UNCHANGED


def _group(
    records: Sequence[Mapping[str, Any]],
) -> dict[str, tuple[Mapping[str, Any], list[Mapping[str, Any]]]]:
    """Cell id -> (cell dict, samples of every record of that cell, in order)."""
    groups: dict[str, tuple[Mapping[str, Any], list[Mapping[str, Any]]]] = {}
    for record in records:
        cell = record["cell"]
        cell_id = str(cell.get("id", "?"))
        if cell_id not in groups:
            groups[cell_id] = (cell, [])
        groups[cell_id][1].extend(record.get("samples") or [])
    return groups


def compare_records(
    base: Sequence[Mapping[str, Any]], head: Sequence[Mapping[str, Any]], *, settings: Settings
) -> list[CellResult]:
    """Every cell of either side, sorted by id; a cell on one side only is an error (kind ``missing``)."""
    base_cells, head_cells = _group(base), _group(head)
    if settings.comparisons == 1:
        both = len(set(base_cells) & set(head_cells))
        settings = replace(settings, comparisons=max(both, 1) * len(settings.metrics))
    results = []
    for cell_id in sorted(set(base_cells) | set(head_cells)):
        if cell_id not in head_cells or cell_id not in base_cells:
            side, other = ("head", "base") if cell_id not in head_cells else ("base", "head")
            cell, samples = (base_cells if side == "head" else head_cells)[cell_id]
            ok = len(_ok(samples))
            counts: dict[str, Any] = {f"{other}_ok": ok, f"{other}_failed": len(samples) - ok}
            results.append(
                CellResult(
                    cell_id=cell_id,
                    cell=flatten_cell(cell),
                    verdict=Verdict.ERROR,
                    kind=Kind.MISSING,
                    reason=f"no {side} record of this cell ({other} has {len(samples)} samples): "
                    f"run it on {side} too",
                    rounds=len(samples),
                    counter_verdict=Verdict.ERROR,
                    **counts,
                )
            )
            continue
        cell, base_samples = base_cells[cell_id]
        results.append(compare_cell(cell, base_samples, head_cells[cell_id][1], settings=settings))
    return results


# --- the document ---------------------------------------------------------------------------------


def build_comparison(
    cells: Sequence[CellResult],
    *,
    settings: Settings,
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    machine: Mapping[str, Any],
    canary: Mapping[str, Any] | None = None,
    budget: Mapping[str, Any] | None = None,
    created_at: str,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``comparison.json`` document (schema ``diskbench-comparison`` version 1, docs/comparison.md)."""
    counts = {v.value: 0 for v in Verdict}
    for cell in cells:
        counts[cell.verdict.value] += 1
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "created_at": created_at,
        "verdict": overall_verdict(cells).value,
        "accel": str(machine.get("accel") or "unknown"),
        "summary": {
            "cells": len(cells),
            "counts": counts,
            "structural_changes": [
                {"cell_id": c.cell_id, "note": c.note} for c in cells if c.note.startswith("structural")
            ],
            "axis_sentence": axis_sentence(cells),
        },
        "warnings": list(warnings),
        "base": dict(base),
        "head": dict(head),
        "machine": dict(machine),
        "settings": settings.as_dict(),
        "canary": dict(canary) if canary is not None else None,
        "budget": dict(budget) if budget is not None else None,
        "cells": [c.as_dict() for c in cells],
    }


REQUIRED_KEYS: dict[str, type | tuple[type, ...]] = {
    "created_at": str,
    "verdict": str,
    "accel": str,
    "summary": dict,
    "warnings": list,
    "base": dict,
    "head": dict,
    "machine": dict,
    "settings": dict,
    "canary": (dict, type(None)),
    "budget": (dict, type(None)),
    "cells": list,
}


def validate_comparison(data: Any, *, source: str) -> dict[str, Any]:
    """Check a loaded document's schema, version and top-level keys; ``source`` names it in errors."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UsageError(
            f"{source} is not a diskbench comparison: pass the comparison.json of `diskbench compare`"
        )
    version = data.get("version")
    if version != VERSION:
        raise UsageError(
            f"comparison {source} has version {version!r}, this diskbench reads version {VERSION}: "
            "run `diskbench compare` again with this version"
        )
    for key, kind in REQUIRED_KEYS.items():
        if not isinstance(data.get(key, ...), kind):
            raise UsageError(
                f"comparison {source} lacks {key!r} or it is malformed: run `diskbench compare` again"
            )
    if data["verdict"] not in {v.value for v in Verdict}:
        raise UsageError(f"comparison {source} has an unknown verdict {data['verdict']!r}: run it again")
    return data


# --- markdown -------------------------------------------------------------------------------------


def _esc(text: Any) -> str:
    """Text for a markdown table cell: no pipe or newline breaks the row."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _code(text: Any) -> str:
    """Text for a code span outside tables (no escapes work inside one)."""
    return "`" + str(text).replace("`", "'").replace("\n", " ") + "`"


def _accel_line(accel: str) -> str:
    if accel == "tcg":
        return "**under TCG (emulation): times are about QEMU's emulation, not the disk**"
    if accel == "kvm":
        return "under KVM"
    return f"**accelerator {accel}: unknown, read the times with care**"


def _ci_text(m: Mapping[str, Any]) -> str:
    lo, hi = m.get("ci_low_pct"), m.get("ci_high_pct")
    if lo is None or hi is None:
        return "-"
    return f"{lo:+.1f}% … {hi:+.1f}%"


def _change_text(m: Mapping[str, Any]) -> str:
    change = m.get("change_pct")
    if change is None:
        return "n/a" if m.get("median_base") is None or m.get("median_head") is None else "+inf%"
    return f"{change:+.1f}%"


def render_markdown(doc: Mapping[str, Any]) -> str:
    """The summary of a comparison document, for a pull request comment or a terminal."""
    cells: list[Mapping[str, Any]] = list(doc.get("cells") or [])
    summary = doc.get("summary") or {}
    counts: Mapping[str, int] = summary.get("counts") or {}
    verdict = str(doc.get("verdict", "?"))
    accel = str(doc.get("accel", "unknown"))
    lines = [f"## diskbench: {verdict.upper()} — {_accel_line(accel)}", ""]
    tally = ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict if counts.get(v.value))
    base, head = doc.get("base") or {}, doc.get("head") or {}

    def side(info: Mapping[str, Any]) -> str:
        label = info.get("label") or "?"
        rev = info.get("rev")
        return _code(label) + (f" ({_esc(rev)})" if rev else "")

    lines.append(
        f"base {side(base)} vs head {side(head)}: {summary.get('cells', len(cells))} cells ({tally})"
    )
    lines.append("")
    for warning in doc.get("warnings") or []:
        lines += [f"**WARNING: {_esc(warning)}**", ""]

    changed = [c for c in cells if c.get("verdict") != Verdict.UNCHANGED.value]
    if changed:
        lines.append("| cell | metric | base | head | change | CI | p | rounds | verdict |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | ---: | --- |")
        for cell in changed:
            label = str(cell.get("verdict", "?"))
            kind = cell.get("kind")
            if kind not in (None, Kind.METRIC.value):
                label = f"{label} ({kind})"
            metrics: list[Mapping[str, Any]] = list(cell.get("metrics") or [])
            rows = [m for m in metrics if m.get("verdict") != Verdict.UNCHANGED.value] or metrics
            if not rows:
                lines.append(
                    f"| {_esc(cell.get('cell_id'))} | - | - | - | - | - | - | {cell.get('rounds', 0)} | {_esc(label)} |"
                )
            for m in rows:
                unit = str(m.get("unit", ""))
                lines.append(
                    "| "
                    + " | ".join(
                        _esc(x)
                        for x in (
                            cell.get("cell_id"),
                            m.get("metric"),
                            format_value(m.get("median_base"), unit),
                            format_value(m.get("median_head"), unit),
                            _change_text(m),
                            _ci_text(m),
                            format_p(m.get("p_value")),
                            cell.get("rounds", 0),
                            label,
                        )
                    )
                    + " |"
                )
        lines.append("")
    unchanged = counts.get(Verdict.UNCHANGED.value, 0)
    lines += [f"{unchanged} cell{'s' if unchanged != 1 else ''} unchanged.", ""]

    sentence = summary.get("axis_sentence")
    if sentence:
        lines += [str(sentence), ""]
    explained = [c for c in changed if c.get("verdict") != Verdict.ERROR.value and c.get("reason")]
    if explained:
        lines.append("### Why")
        lines += [f"- {_code(c.get('cell_id'))}: {_esc(c.get('reason'))}" for c in explained]
        lines.append("")
    errors = [c for c in cells if c.get("verdict") == Verdict.ERROR.value]
    if errors:
        lines.append("### Errors")
        lines += [f"- {_code(c.get('cell_id'))} ({c.get('kind')}): {_esc(c.get('reason'))}" for c in errors]
        lines.append("")
    notes = [c for c in cells if c.get("note")]
    if notes:
        lines.append("### Counters")
        lines += [f"- {_code(c.get('cell_id'))}: {_esc(c.get('note'))}" for c in notes]
        lines.append("")
    canary = doc.get("canary")
    if canary:
        before, after = canary.get("before_mib_s"), canary.get("after_mib_s")
        change = canary.get("change")
        moved = (
            "**MOVED: regressions and improvements set to inconclusive**" if canary.get("moved") else "steady"
        )
        figures = (
            f"{before:.0f} → {after:.0f} MiB/s ({pct(change)})"
            if before is not None and after is not None and change is not None
            else "not measured"
        )
        lines += [f"Host canary: {figures}: {moved}", ""]
    budget = doc.get("budget")
    if budget:
        lines += ["Budget: " + ", ".join(f"{_esc(k)} {_esc(v)}" for k, v in budget.items()), ""]
    machine = doc.get("machine") or {}
    parts = [
        f"{key} {_esc(machine[key])}"
        for key in ("hostname", "cpu", "accel", "qemu_version", "host_kernel", "work_dir_fs")
        if machine.get(key)
    ]
    settings = doc.get("settings") or {}
    lines.append(f"Machine: {', '.join(parts) or 'unknown'}.")
    if settings:
        lines.append(
            f"Settings: minimum effect {float(settings.get('min_effect', 0)) * 100:g}%, "
            f"alpha {settings.get('alpha')}, {float(settings.get('confidence', 0)) * 100:g}% bootstrap CI "
            f"({settings.get('bootstrap')} resamples, seed {settings.get('seed')})."
        )
    created = doc.get("created_at")
    if created:
        lines.append(f"Created {created}.")
    return "\n".join(lines) + "\n"
