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
    return cell.cell.get("measure") == "replay"


def _axis_text(axis: str, value: Any) -> str:
    if axis == "cluster_size" and isinstance(value, int):
        from harness.spec import format_size

        return f"{axis}={format_size(value)}"
    return f"{axis}={value}"


def axis_sentence(cells: Sequence[CellResult]) -> str | None:
    """One sentence naming every axis value that the regressed (else changed, else improved) cells share.

    Needs at least two such cells.  The values every one of them has (and not
    every compared cell has) are named: those that no other cell has first,
    all together, with a word that the cells cannot tell them apart when
    there are several (they go together in these cells, as a replay cell's
    values can with a guest cell's); then the others, each with how many of
    its cells changed.  Cells in error are left out of the counts.  None when
    nothing is shared.
    """
    pool = [c for c in cells if c.verdict is not Verdict.ERROR]
    words = {Verdict.REGRESSION: "regressed", Verdict.CHANGED: "changed", Verdict.IMPROVEMENT: "improved"}
    verdict = next((v for v in words if any(c.verdict is v for c in pool)), Verdict.IMPROVEMENT)
    changed = [c for c in pool if c.verdict is verdict]
    word = words[verdict]
    if len(changed) < 2:
        return None
    axes = [a for a in AXES if all(a in c.cell for c in pool)]
    exact: list[str] = []
    partial: list[tuple[float, int, str]] = []
    for order, axis in enumerate(axes):
        if axis in GUEST_ONLY and any(_replayed(c) for c in changed):
            continue  # a replay has no guest device: its cells say nothing of the bus
        values = {repr(c.cell[axis]) for c in changed}
        if len(values) != 1:
            continue
        value = changed[0].cell[axis]
        if value is None:
            continue
        having = [c for c in pool if c.cell[axis] == value]
        if len(having) == len(pool):
            continue  # every cell has it: it tells nothing apart
        if len(having) == len(changed):
            exact.append(_axis_text(axis, value))
        else:
            partial.append(
                (
                    len(changed) / len(having),
                    -order,
                    f"{_axis_text(axis, value)} ({len(changed)} of {len(having)} such cells {word})",
                )
            )
    if not exact and not partial:
        return None
    others = len(pool) - len(changed)
    partial.sort(reverse=True)
    also = [text for _rate, _order, text in partial]
    if not exact:
        return (
            f"Every {word} cell has {_joined(also)}; no one value sets them apart from the {others} others."
        )
    sentence = f"Every {word} cell has {_joined(exact)} ({len(changed)} of {len(changed)} such cells {word}, 0 of {others} others)."
    if len(exact) > 1:
        sentence += f" The cells cannot tell {_joined(exact)} apart: they go together in every cell."
    if also:
        sentence += f" They also share {_joined(also)}."
    return sentence


def _joined(texts: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(texts) <= 1:
        return "".join(texts)
    return ", ".join(texts[:-1]) + f" and {texts[-1]}"
