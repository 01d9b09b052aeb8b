"""Base against head: the statistics of the gate, a verdict per cell, comparison.json.  Pure: no I/O.

Sample ``index`` k of base and of head come from the same round.  For every cell and every gated
metric this package says whether head is worse, by how much and how sure:

* **significance**: for pairs taken at the same moment, the exact signed-rank test and a trimmed
  t test of the pairs' log ratios (:mod:`~harness.compare.paired`); otherwise the exact rank test
  and Yuen's t test on logs (:mod:`~harness.compare.evidence`); Holm over the family;
* **size**: the ratio head/base of the medians with a bootstrap interval, paired by round;
* **a minimum effect** (5 % by default, per metric with a rule such as ``total_s:3%``).

:func:`compare_metric` decides one metric, :func:`compare_cell` a cell (head failing where base
works is a regression of its own kind; both failing is an error), :func:`compare_records` two sets
of records, :func:`build_comparison` the :class:`Comparison` whose JSON is ``comparison.json``
(docs/comparison.md), which :func:`render_markdown` renders.  Verdicts reduce worst first:
regression > inconclusive > improvement > unchanged (:mod:`~harness.compare.verdict`).

One module per concept: ``stats``, ``yuen``, ``paired``, ``evidence`` (the tests), ``settings``,
``verdict``, ``metric`` (one metric's decision table), ``rules`` (cell, family, overall),
``canary``, ``axis`` (the axis sentence), ``subject``, ``model`` and ``jsonpart`` (the document as
a value and its JSON), ``document`` (builds and checks it), ``markdown``.  Everything public is
re-exported here.
"""

from harness.compare.axis import AXES, axis_sentence
from harness.compare.canary import apply_canary
from harness.compare.document import (
    REQUIRED_KEYS,
    SCHEMA,
    VERSION,
    build_comparison,
    fails,
    validate_comparison,
)
from harness.compare.markdown import render_markdown
from harness.compare.model import ComparedCell, Comparison, Figures
from harness.compare.rules import (
    Family,
    compare_cell,
    compare_family,
    compare_metric,
    compare_records,
    flatten_cell,
    judge_family,
    judge_records,
    needs_more_rounds,
    overall_verdict,
)
from harness.compare.settings import (
    STRUCTURAL_COUNTERS,
    TESTS,
    Settings,
    check_gated_metric,
    parse_percent,
    parse_rule,
)
from harness.compare.stats import EXACT_MAX_N, bootstrap_ratio_ci, holm_adjust, mann_whitney_u, rank_test
from harness.compare.subject import subject_diff
from harness.compare.text import format_p, format_value, pct
from harness.compare.verdict import Kind, Verdict, worst

__all__ = [
    "AXES",
    "EXACT_MAX_N",
    "REQUIRED_KEYS",
    "SCHEMA",
    "STRUCTURAL_COUNTERS",
    "TESTS",
    "VERSION",
    "ComparedCell",
    "Comparison",
    "Family",
    "Figures",
    "Kind",
    "Settings",
    "Verdict",
    "apply_canary",
    "axis_sentence",
    "bootstrap_ratio_ci",
    "build_comparison",
    "check_gated_metric",
    "compare_cell",
    "compare_family",
    "compare_metric",
    "compare_records",
    "fails",
    "flatten_cell",
    "format_p",
    "format_value",
    "holm_adjust",
    "judge_family",
    "judge_records",
    "mann_whitney_u",
    "needs_more_rounds",
    "overall_verdict",
    "parse_percent",
    "parse_rule",
    "pct",
    "rank_test",
    "render_markdown",
    "subject_diff",
    "validate_comparison",
    "worst",
]
