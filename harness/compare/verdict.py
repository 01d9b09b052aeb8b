"""The verdicts of a comparison, their kinds, and their order (worst first)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"
    # a structural counter (flushes, write amplification, bytes, requests) moved beyond its
    # threshold while no time regressed: the IO the guest does is not the same any more
    CHANGED = "changed"


class Kind(StrEnum):
    """Where a cell's verdict comes from."""

    METRIC = "metric"  # the statistics of the gated metrics
    FAILURE = "failure"  # head failed where base worked: a regression
    BOTH_FAILED = "both-failed"  # an error, never "no change"
    BASE_FAILED = "base-failed"  # an error: nothing to compare head with
    MISSING = "missing"  # the cell has records on one side only: an error
    NO_METRIC = "no-metric"  # none of the gated metrics is in the samples: inconclusive
    CANARY = "canary"  # a regression or improvement voided by the host canary: inconclusive
    COUNTER = "counter"  # changed: a structural counter moved, the time did not regress
    MIXED_START = "mixed-start"  # an error: base and head guests started differently (cold, snapshot)
    HEAD_TIMED_OUT = "head-timed-out"  # a regression: head's workload ran past its deadline from base's times


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
