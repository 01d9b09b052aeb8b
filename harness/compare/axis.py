"""The axis sentence: the axis value that the regressed (else improved) cells share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.compare.model import ComparedCell
from harness.compare.verdict import Verdict

# the axes of a cell that the comparison document flattens, in this order
AXES = ("format", "preallocation", "cluster_size", "cache", "aio", "interface", "workload", "cache_state")


# the axes the sentence reads: the flattened ones and how a cell is measured (a guest, or its
# requests replayed natively), which can single the changed cells out as well as any other
SENTENCE_AXES = ("measure", *AXES)

# axes that only a guest exercises: a replay cell keeps the value of the guest it was recorded from
GUEST_ONLY = frozenset({"interface"})


def _replayed(cell: ComparedCell) -> bool:
    return cell.cell.measure == "replay"


def _value(cell: ComparedCell, axis: str) -> Any:
    """The cell's value of ``axis``; a cell that names no measure is a guest cell."""
    value = cell.cell.axis(axis)
    return (value or "guest") if axis == "measure" else value


def _axis_text(axis: str, value: Any) -> str:
    if axis == "cluster_size" and isinstance(value, int):
        from harness.spec import format_size

        return f"{axis}={format_size(value)}"
    return f"{axis}={value}"


def axis_sentence(cells: Sequence[ComparedCell]) -> str | None:
    """One sentence naming every axis value that the regressed (else changed, else improved) cells share.

    Needs at least two such cells; the measure (guest or replay) is an axis too.  Among the values every one of them has
    (and not every compared cell has), those whose cells changed most often
    are named, every one of them: values that go together in every cell (the
    same cells have them, as a replay cell's values can with a guest cell's)
    are named together, with a word that the cells cannot tell them apart;
    values that the changed cells share with different other cells are named
    each with its count, and with whether together they single the changed
    cells out.  Cells in error are left out of the counts.  None when nothing
    is shared.
    """
    pool = [c for c in cells if c.verdict is not Verdict.ERROR]
    words = {Verdict.REGRESSION: "regressed", Verdict.CHANGED: "changed", Verdict.IMPROVEMENT: "improved"}
    verdict = next((v for v in words if any(c.verdict is v for c in pool)), Verdict.IMPROVEMENT)
    changed = [c for c in pool if c.verdict is verdict]
    word = words[verdict]
    if len(changed) < 2:
        return None
    axes = SENTENCE_AXES
    # (share of its cells that changed, the value's text, the cells that have it)
    candidates: list[tuple[float, str, frozenset[int]]] = []
    for axis in axes:
        if axis in GUEST_ONLY and any(_replayed(c) for c in changed):
            continue  # a replay has no guest device: its cells say nothing of the bus
        values = {repr(_value(c, axis)) for c in changed}
        if len(values) != 1:
            continue
        value = _value(changed[0], axis)
        if value is None:
            continue
        having = frozenset(i for i, c in enumerate(pool) if _value(c, axis) == value)
        if len(having) == len(pool):
            continue  # every cell has it: it tells nothing apart
        candidates.append((len(changed) / len(having), _axis_text(axis, value), having))
    if not candidates:
        return None
    best = max(rate for rate, _text, _having in candidates)
    groups: dict[frozenset[int], list[str]] = {}
    for rate, text, having in candidates:
        if rate == best:
            groups.setdefault(having, []).append(text)
    if len(groups) == 1:
        ((having, texts),) = groups.items()
        names = _joined(texts)
        others = len(pool) - len(having)
        sentence = (
            f"Every {word} cell has {names} ({len(changed)} of {len(having)} such cells {word}, "
            f"0 of {others} others)."
        )
        if len(texts) > 1:
            sentence += f" The cells cannot tell {names} apart: they go together in every cell."
        return sentence
    parts = [
        f"{_joined(texts)} ({len(changed)} of {len(having)} such cells {word})"
        for having, texts in groups.items()
    ]
    common = frozenset.intersection(*groups)
    if len(common) == len(changed):
        return f"Every {word} cell has {_joined(parts)}; no other cell has all of them."
    return f"Every {word} cell has {_joined(parts)}; no one value sets them apart from the {len(pool) - len(changed)} others."


def _joined(texts: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(texts) <= 1:
        return "".join(texts)
    return ", ".join(texts[:-1]) + f" and {texts[-1]}"
