"""What a comparison could have seen, and how many rounds would decide it.  Pure.

Both figures come from the metric's confidence interval of the ratio (bootstrap, on logs:
its half-width ``h`` at confidence ``c`` gives the standard error ``se = h / z((1+c)/2)``),
read as a normal approximation of the log ratio:

* **could see** (:func:`could_see`): the smallest change this comparison would have called a
  regression four times in five, at the strictest level of its family (Holm's
  ``alpha / comparisons``, two-sided): ``exp((z(1 - a/2) + z(0.8)) * se) - 1``.  "Could see
  ≥ 6 %" means a 6 % regression would very likely have failed this gate; a smaller one could
  pass it.
* **rounds to decide** (:func:`rounds_to_decide`), for an inconclusive metric: the rounds per
  side at which, the ratio staying where it is and the standard error shrinking as
  ``1/sqrt(n)``, the interval would lie inside the band of the minimum effect (``unchanged``; for
  a crossed guest pair, as it reads it) or beyond it and significant (a verdict), whichever the
  ratio points to.  A ratio on the edge of
  the band is never decided by more rounds: None, as is a number past :data:`MAX_ROUNDS`.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Protocol

from harness.compare.settings import Settings

#: the chance of catching a change of the size :func:`could_see` names
POWER = 0.8
#: rounds beyond which no number is given
MAX_ROUNDS = 1000
_Z = NormalDist().inv_cdf


class _Interval(Protocol):
    @property
    def ratio(self) -> float | None: ...
    @property
    def ci_low(self) -> float | None: ...
    @property
    def ci_high(self) -> float | None: ...
    @property
    def n_base(self) -> int: ...
    @property
    def n_head(self) -> int: ...
    @property
    def min_effect(self) -> float: ...


def log_se(result: _Interval, settings: Settings) -> float | None:
    """The standard error of the log ratio that the interval implies, or None without one."""
    lo, hi = result.ci_low, result.ci_high
    if lo is None or hi is None or not (0 < lo <= hi) or not math.isfinite(hi):
        return None
    return (math.log(hi) - math.log(lo)) / 2.0 / _Z((1.0 + settings.confidence) / 2.0)


def could_see(result: _Interval, settings: Settings) -> float:
    """The smallest change (a fraction: 0.06 for 6 %) this comparison would catch four times in
    five; ``inf`` without an interval."""
    se = log_se(result, settings)
    if se is None:
        return math.inf
    z = _Z(1.0 - settings.alpha_per_test / 2.0) + _Z(POWER)
    return math.exp(z * se) - 1.0


def rounds_to_decide(result: _Interval, settings: Settings) -> int | None:
    """About how many rounds per side would decide this metric (see the module's doc)."""
    se = log_se(result, settings)
    n = min(result.n_base, result.n_head)
    if se is None or result.ratio is None or not 0 < result.ratio < math.inf or n < 1:
        return None
    if se == 0:
        return None
    r = abs(math.log(result.ratio))
    # a crossed guest pair's edges: the minimum effect as it reads it at least and at most
    # (Settings.crossed_reads); a change measured between them stays undecided at any count
    read_m = getattr(result, "crossed_effect", None)
    edge = math.log1p(result.min_effect if read_m is None else read_m)
    far = getattr(result, "crossed_beyond", None)
    if far is not None and edge <= r < math.log1p(far):
        return None
    z_c = _Z((1.0 + settings.confidence) / 2.0)
    if r < edge:
        target = (edge - r) / z_c
    else:
        target = min((r - edge) / z_c, r / _Z(1.0 - settings.alpha_per_test / 2.0))
    if target <= 0:
        return None
    rounds = math.ceil(n * (se / target) ** 2)
    return rounds if rounds <= MAX_ROUNDS else None


def could_see_text(effect: float) -> str:
    """``"could see ≥ 6%"``, or that it could not see any change."""
    if not math.isfinite(effect):
        return "could see no change (no interval)"
    return f"could see ≥ {effect * 100:.0f}%" if effect >= 0.095 else f"could see ≥ {effect * 100:.1f}%"
