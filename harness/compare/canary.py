"""The host canary: the verdicts that the host's own move could explain are voided, and only those.

The canary is the runner's disk, timed before and after the rounds.  Its move can explain a change
only where base's and head's samples were not taken side by side: where they ran in the same
rounds (paired: each round runs both, the order drawn) or at the same moment (a pair taken
together), a host that moved hit both sides alike, and the move explains nothing.  In a gate every
cell's samples run in the same rounds, so the canary voids a verdict there only where a failed
sample left a metric unpaired; a canary that moved by -20 % in two A/A gates of this host while
nothing changed voided nothing it could not explain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from harness.compare.model import Canary, ComparedCell, Figures
from harness.compare.rules import with_counters
from harness.compare.settings import Settings
from harness.compare.text import pct
from harness.compare.verdict import Kind, Verdict

# units of figures that count work, not speed: a slower or faster host disk does not move them
STRUCTURAL_UNITS = frozenset({"count", "ratio", "B"})


def explainable(metric: Figures, change: float) -> bool:
    """Whether the host's own move by ``change`` (after/before, of a throughput) could explain
    ``metric``'s change.

    A figure of speed (a time, a latency, a throughput; not a count, a ratio or bytes) of samples
    not taken side by side (neither paired by round nor together: the host's move hit both sides
    of each round alike and cancelled), whose change goes the host's way (head worse where the
    host got slower, better where it got faster: head's samples are the later ones) and is no
    larger than the canary's (compared as logarithms, so +25 % and -20 % are the same size).
    """
    if metric.together or metric.paired:
        return False
    if metric.unit in STRUCTURAL_UNITS or metric.ratio is None or metric.ratio <= 0:
        return False
    if not math.isfinite(metric.ratio) or change <= 0:
        return False
    worse = metric.ratio < 1.0 if metric.higher_is_better else metric.ratio > 1.0
    if worse != (change < 1.0):
        return False
    return abs(math.log(metric.ratio)) <= abs(math.log(change))


def apply_canary(
    cells: Sequence[ComparedCell],
    *,
    before_mib_s: float,
    after_mib_s: float,
    settings: Settings,
) -> tuple[list[ComparedCell], Canary]:
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
