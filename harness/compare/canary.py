"""The host canary: time verdicts voided when the host's own disk moved during the run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from harness.compare.rules import CellResult
from harness.compare.settings import Settings
from harness.compare.text import pct
from harness.compare.verdict import Kind, Verdict


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
