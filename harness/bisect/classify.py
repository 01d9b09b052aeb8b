"""Is a step commit good or bad?  Its two comparisons, with the good end and with the bad end.  Pure.

A step is measured twice by the gate's statistics: ``vs good`` (base the good
end, head the step) and ``vs bad`` (base the bad end, head the step).  The ends
themselves were compared once (base good, head bad): a cell *separates* the
ends when that gave ``regression``, ``improvement`` or ``changed``; the
*bad way* is that verdict, and the *good way* back from the bad end is its
opposite (``improvement`` for a regression, and the other way round;
``changed`` for ``changed``).  Only separating cells decide.

For each separating cell, in this order:

1. ``vs good`` is the bad way (the step moved from good as bad did): **bad**;
2. ``vs bad`` is the good way (the step moved back from bad): **good**;
3. ``vs good`` is ``unchanged`` (equivalent to good within the minimum
   effect) and ``vs bad`` is not: **good**;
4. ``vs bad`` is ``unchanged`` (equivalent to bad) and ``vs good`` is not: **bad**;
5. otherwise **unclear**.

A step is bad when any separating cell says bad, good when every one says good,
and unclear otherwise.  An unclear step, and a step whose samples failed in
either comparison (it does not boot, a cell has no samples), is skipped as
``git bisect skip`` would: the search measures another commit in its place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.bisect.search import Outcome
from harness.compare import Kind, Verdict

#: the ends' verdicts that separate them, and the verdict that leads back from bad to good
GOOD_WAY = {
    Verdict.REGRESSION: Verdict.IMPROVEMENT,
    Verdict.IMPROVEMENT: Verdict.REGRESSION,
    Verdict.CHANGED: Verdict.CHANGED,
}
#: kinds that say the step's samples failed, not how fast it is
FAILED_KINDS = (Kind.FAILURE, Kind.BOTH_FAILED, Kind.BASE_FAILED, Kind.MISSING, Kind.MIXED_START)


@dataclass(frozen=True)
class CellVerdict:
    """One cell's verdict in a comparison and where it comes from."""

    verdict: Verdict
    kind: Kind = Kind.METRIC


@dataclass(frozen=True)
class Classified:
    """A step's outcome and why, one phrase per separating cell."""

    outcome: Outcome
    reason: str
    unclear: bool = False


def separating(ends: Mapping[str, CellVerdict]) -> dict[str, Verdict]:
    """The cells (by gate name) whose ends' comparison separates good from bad, with its verdict."""
    return {
        name: v.verdict for name, v in ends.items() if v.verdict in GOOD_WAY and v.kind not in FAILED_KINDS
    }


def classify_cell(bad_way: Verdict, vs_good: Verdict, vs_bad: Verdict) -> tuple[Outcome | None, str]:
    """One separating cell's word on the step (None: unclear), by rules 1-5 of this module."""
    good_way = GOOD_WAY[bad_way]
    if vs_good is bad_way:
        between = " and from bad back towards good: part of the change" if vs_bad is good_way else ""
        return Outcome.BAD, f"{vs_good} against good{between}"
    if vs_bad is good_way:
        return Outcome.GOOD, f"{vs_bad} against bad"
    if vs_good is Verdict.UNCHANGED and vs_bad is not Verdict.UNCHANGED:
        return Outcome.GOOD, f"equivalent to good, {vs_bad} against bad"
    if vs_bad is Verdict.UNCHANGED and vs_good is not Verdict.UNCHANGED:
        return Outcome.BAD, f"equivalent to bad, {vs_good} against good"
    return None, f"{vs_good} against good, {vs_bad} against bad"


def classify(
    ends: Mapping[str, CellVerdict],
    vs_good: Mapping[str, CellVerdict],
    vs_bad: Mapping[str, CellVerdict],
) -> Classified:
    """The step's outcome from its two comparisons, given the ends'; cells by gate name."""
    failed = [
        f"{name}: {v.kind} {side}"
        for side, doc in (("against good", vs_good), ("against bad", vs_bad))
        for name, v in doc.items()
        if v.kind in FAILED_KINDS
    ]
    if failed:
        return Classified(Outcome.SKIP, "its samples failed (" + "; ".join(failed) + ")")
    words: dict[str, tuple[Outcome | None, str]] = {}
    for name, bad_way in separating(ends).items():
        if name not in vs_good or name not in vs_bad:
            words[name] = (None, "not compared")
            continue
        words[name] = classify_cell(bad_way, vs_good[name].verdict, vs_bad[name].verdict)
    reason = "; ".join(f"{name}: {text}" for name, (_o, text) in words.items())
    outcomes = [o for o, _t in words.values()]
    if Outcome.BAD in outcomes:
        return Classified(Outcome.BAD, reason)
    if outcomes and all(o is Outcome.GOOD for o in outcomes):
        return Classified(Outcome.GOOD, reason)
    return Classified(Outcome.SKIP, reason or "no cell separates the ends", unclear=True)
