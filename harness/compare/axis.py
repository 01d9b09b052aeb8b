"""The axis sentence: the axis value that the regressed (else improved) cells share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.compare.rules import CellResult
from harness.compare.verdict import Verdict

# the axes of a cell that the comparison document flattens, in this order
AXES = ("format", "preallocation", "cluster_size", "cache", "aio", "interface", "workload", "cache_state")


# axes that only a guest exercises: a replay cell keeps the value of the guest it was recorded from
GUEST_ONLY = frozenset({"interface"})


def _replayed(cell: CellResult) -> bool:
    return cell.cell.measure == "replay"


def _axis_text(axis: str, value: Any) -> str:
    if axis == "cluster_size" and isinstance(value, int):
        from harness.spec import format_size

        return f"{axis}={format_size(value)}"
    return f"{axis}={value}"


def axis_sentence(cells: Sequence[CellResult]) -> str | None:
    """One sentence naming the axis value that the regressed (else changed, else improved) cells share.

    Needs at least two such cells.  Among the values every one of them has
    (and not every compared cell has), the one whose cells changed most often
    wins; values that single out exactly the changed cells are named together.
    Cells in error are left out of the counts.  None when nothing is shared.
    """
    pool = [c for c in cells if c.verdict is not Verdict.ERROR]
    words = {Verdict.REGRESSION: "regressed", Verdict.CHANGED: "changed", Verdict.IMPROVEMENT: "improved"}
    verdict = next((v for v in words if any(c.verdict is v for c in pool)), Verdict.IMPROVEMENT)
    changed = [c for c in pool if c.verdict is verdict]
    word = words[verdict]
    if len(changed) < 2:
        return None
    axes = AXES
    candidates: list[tuple[float, int, str, Any]] = []
    for order, axis in enumerate(axes):
        if axis in GUEST_ONLY and any(_replayed(c) for c in changed):
            continue  # a replay has no guest device: its cells say nothing of the bus
        values = {repr(c.cell.axis(axis)) for c in changed}
        if len(values) != 1:
            continue
        value = changed[0].cell.axis(axis)
        if value is None:
            continue
        having = [c for c in pool if c.cell.axis(axis) == value]
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
