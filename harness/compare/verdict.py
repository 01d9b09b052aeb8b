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


#: worst first: the order a cell's metrics reduce to one verdict in (regression > inconclusive >
#: improvement > unchanged: an inconclusive figure may hide a regression) and a comparison's cells
#: to its overall verdict (changed and error between regression and inconclusive)
SEVERITY: tuple[Verdict, ...] = (
    Verdict.REGRESSION,
    Verdict.CHANGED,
    Verdict.ERROR,
    Verdict.INCONCLUSIVE,
    Verdict.IMPROVEMENT,
    Verdict.UNCHANGED,
)
#: the order a tally of cells by verdict is said in (summary.md, the comment; the action's
#: ``ORDER`` is held to it by a test)
TALLY: tuple[Verdict, ...] = (
    Verdict.REGRESSION,
    Verdict.CHANGED,
    Verdict.IMPROVEMENT,
    Verdict.UNCHANGED,
    Verdict.INCONCLUSIVE,
    Verdict.ERROR,
)


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The worst of ``verdicts`` by :data:`SEVERITY`; unchanged when there are none."""
    found = set(verdicts)
    return next((v for v in SEVERITY if v in found), Verdict.UNCHANGED)
