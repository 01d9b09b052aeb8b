"""The host canary: the verdicts that the host's own move could explain are voided, and only those."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from harness.compare.model import Canary
from harness.compare.rules import CellResult, MetricResult, with_counters
from harness.compare.settings import Settings
from harness.compare.text import pct
from harness.compare.verdict import Kind, Verdict

# units of figures that count work, not speed: a slower or faster host disk does not move them
STRUCTURAL_UNITS = frozenset({"count", "ratio", "B"})


def explainable(metric: MetricResult, change: float) -> bool:
    """Whether the host's own move by ``change`` (after/before) could explain ``metric``'s change.

    A figure of speed (a time, a latency, a throughput; not a count, a ratio
    or bytes) whose change is no larger than the canary's, in either direction
    (compared as logarithms, so +25 % and -20 % are the same size).  Never one judged on pairs
    taken together: the host's move hit both samples of each pair alike and cancelled.
    """
    if metric.together:
        return False
    if metric.unit in STRUCTURAL_UNITS or metric.ratio is None or metric.ratio <= 0:
        return False
    if not math.isfinite(metric.ratio) or change <= 0:
        return False
    return abs(math.log(metric.ratio)) <= abs(math.log(change))


def apply_canary(
    cells: Sequence[CellResult],
    *,
    before_mib_s: float,
    after_mib_s: float,
    settings: Settings,
) -> tuple[list[CellResult], Canary]:
    """Void the time verdicts that the host's own disk moving during the run could explain.

    The canary is a plain write throughput of the runner's disk measured
    before and after the rounds.  When it moved by more than the minimum
    effect, a regression or improvement of kind ``metric`` becomes
    inconclusive, kind ``canary``, if every metric that gave it is a figure of
    speed whose change is within the canary's move (:func:`explainable`): a
    write latency ×5 is not explained by a host 20 % slower.  Failures and
    ``changed`` cells (counters: a count of flushes does not depend on the
    disk's speed) are left as they are.  Returns the cells and the document's
    :class:`~harness.compare.model.Canary`, whose ``voided`` lists the cells it voided and
    ``kept`` those it could not explain.
    """
    measured = before_mib_s > 0 and after_mib_s > 0 and math.isfinite(before_mib_s + after_mib_s)
    change = after_mib_s / before_mib_s if measured else None
    moved = change is not None and abs(change - 1.0) > settings.min_effect
    voided: list[str] = []
    kept: list[str] = []
    canary = Canary(
        before_mib_s=before_mib_s if math.isfinite(before_mib_s) else None,
        after_mib_s=after_mib_s if math.isfinite(after_mib_s) else None,
        change=change,
        moved=moved,
    )
    if not moved or change is None:
        return list(cells), canary
    why = (
        f"the host's own disk moved by {pct(change)} during the run "
        f"(canary {before_mib_s:.0f} → {after_mib_s:.0f} MiB/s)"
    )
    out = []
    for cell in cells:
        if cell.kind is Kind.METRIC and cell.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
            deciding = [m for m in cell.metrics if m.verdict is cell.verdict]
            if deciding and all(explainable(m, change) for m in deciding):
                voided.append(cell.cell_id)
                cell = replace(
                    cell,
                    verdict=Verdict.INCONCLUSIVE,
                    kind=Kind.CANARY,
                    time_verdict=Verdict.INCONCLUSIVE,
                    reason=f"{why}; without the canary: {cell.verdict.value}, {cell.reason}",
                )
                cell = with_counters(cell)  # a changed counter stands: the host does not move it
            else:
                kept.append(cell.cell_id)
        out.append(cell)
    return out, replace(canary, voided=tuple(voided), kept=tuple(kept))
