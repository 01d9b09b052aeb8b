"""The search of a bisection: which commit to measure next, and when the first bad one is known.  Pure.

The commits of the range are a line, oldest first: ``commits[0]`` is the first
commit after the good end, ``commits[-1]`` is the bad end.  Each commit
measured gets an :class:`Outcome`.  The first bad commit lies after the newest
commit known good (or the good end) and at or before the oldest commit known
bad (or the bad end); the search measures the untested commit nearest the
middle of that window, as ``git bisect`` does.  A skipped commit (it does not
build or boot, or its samples could not tell it from either end) is never
measured again, and the next nearest untested commit is taken in its place.
When no untested commit is left in the window, the search ends: with one
commit, that is the first bad one; with skipped commits before it, the first
bad one is any of those (``git bisect`` says the same).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    """What a measured commit was found to be."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


@dataclass(frozen=True)
class Window:
    """Where the first bad commit can be: ``commits[low:high + 1]``, and the skipped ones among them."""

    low: int  # index of the oldest commit it can be
    high: int  # index of the oldest commit known bad (the bad end when none is)
    candidates: tuple[str, ...]  # every commit it can be, oldest first
    untested: tuple[str, ...]  # those not measured yet (the bad one at ``high`` never is)


def window(commits: Sequence[str], outcomes: Mapping[str, Outcome]) -> Window:
    """The window of the first bad commit in ``commits`` given the ``outcomes`` so far.

    A good commit after a bad one contradicts the search (the range is not one
    change); the window then follows the oldest bad commit and the newest good
    commit before it, as ``git bisect`` would have.
    """
    if not commits:
        raise ValueError("a bisection needs at least the bad end")
    high = len(commits) - 1
    for i, commit in enumerate(commits):
        if outcomes.get(commit) is Outcome.BAD:
            high = i
            break
    low = 0
    for i in range(high):
        if outcomes.get(commits[i]) is Outcome.GOOD:
            low = i + 1
    candidates = [c for c in commits[low : high + 1] if outcomes.get(c) is not Outcome.GOOD]
    untested = tuple(c for c in candidates[:-1] if c not in outcomes)
    return Window(low=low, high=high, candidates=tuple(candidates), untested=untested)


def next_commit(commits: Sequence[str], outcomes: Mapping[str, Outcome]) -> str | None:
    """The commit to measure next, or None when the search is over.

    The window's middle is the commit that halves it; a skipped middle gives
    way to the untested commit nearest it (the older one on a tie).
    """
    w = window(commits, outcomes)
    if not w.untested:
        return None
    # the first bad commit is one of commits[low..high]; measuring commits[m] leaves
    # low..m (bad) or m+1..high (good): halves when m = (low + high - 1) // 2 ... rounded down
    middle = (w.low + w.high - 1) / 2
    index = {c: i for i, c in enumerate(commits)}
    return min(w.untested, key=lambda c: (abs(index[c] - middle), index[c]))


@dataclass(frozen=True)
class Found:
    """The end of a search: the first bad commit, or the commits it could be (skips in the way)."""

    first_bad: str | None
    candidates: tuple[str, ...]


def result(commits: Sequence[str], outcomes: Mapping[str, Outcome]) -> Found | None:
    """The search's answer once :func:`next_commit` has none; None while commits are left to measure."""
    w = window(commits, outcomes)
    if w.untested:
        return None
    if len(w.candidates) == 1:
        return Found(first_bad=w.candidates[0], candidates=w.candidates)
    return Found(first_bad=None, candidates=w.candidates)
