"""Base against head: the statistics of the gate, a verdict per cell, comparison.json.  Pure: no I/O.

The gate runs base and head of a change interleaved on one runner, in rounds
(round k measures base then head, or head then base): sample ``index`` k of
base and of head come from the same round.  For every cell and every gated
metric this module says whether head is worse, by how much and how sure:

* **significance**: the exact two-sided Mann-Whitney rank test (:func:`rank_test`,
  exact also with ties), and Yuen's trimmed-mean t test on log values for
  the level the rank test cannot use below its floor
  (:mod:`~harness.compare.evidence`), Holm over the family; ``Settings.test
  = "mann-whitney"`` decides with :func:`mann_whitney_u` alone, as before;
* **size**: the ratio head/base of the medians, with a percentile bootstrap
  confidence interval (:func:`bootstrap_ratio_ci`), paired by round when both
  sides have the same rounds, so that a host that drifts during the run moves
  both sides of a round together and cancels out;
* **a minimum effect** (5 % by default, per metric with a rule such as
  ``total_s:3%``): a change smaller than that is never a regression.

:func:`compare_metric` turns those into a :class:`Verdict` for one metric,
:func:`compare_cell` for a cell (failures included: head failing where base
works is a regression of its own kind; both failing is an error, never "no
change"), :func:`compare_records` for two sets of records, and
:func:`build_comparison` into the :class:`Comparison` whose JSON is the versioned
``comparison.json`` document that ``docs/comparison.md`` describes, and that
:func:`render_markdown` renders.
The command-line options of ``diskbench compare`` and ``diskbench gate`` are
:mod:`harness.cli.common`'s; reading and writing files is :mod:`harness.compare.comparison`'s
(``load_comparison``).

Order of the verdicts, worst first, wherever several are reduced to one (the
metrics of a cell, the counters of a cell)::

    regression > inconclusive > improvement > unchanged

An inconclusive metric outranks an improvement because it may hide a
regression.  The overall verdict of a comparison adds ``error`` (see
:func:`overall_verdict`).

The package, one module per concept: :mod:`~harness.compare.stats` (the rank
test, medians, quantiles, the bootstrap), :mod:`~harness.compare.yuen` (Yuen's
t test on logs, Student's t), :mod:`~harness.compare.evidence` (a test's p,
its level in the family, what stopped it), :mod:`~harness.compare.settings`
(:class:`Settings`, rules), :mod:`~harness.compare.verdict`
(the verdicts and their order), :mod:`~harness.compare.metric` (one metric's
decision table), :mod:`~harness.compare.rules` (cell, family and overall
verdicts), :mod:`~harness.compare.canary`, :mod:`~harness.compare.axis`
(the axis sentence), :mod:`~harness.compare.subject` (what differs between the
sides), :mod:`~harness.compare.model` (the comparison as a value, :class:`Comparison`, and
its parts; :mod:`~harness.compare.jsonpart` reads and writes their JSON),
:mod:`~harness.compare.document` (builds it, checks a loaded ``comparison.json``) and
:mod:`~harness.compare.markdown`.  Everything public is re-exported here.
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
from harness.compare.model import Comparison
from harness.compare.rules import (
    CellResult,
    MetricResult,
    compare_cell,
    compare_family,
    compare_metric,
    compare_records,
    flatten_cell,
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
    "CellResult",
    "Comparison",
    "Kind",
    "MetricResult",
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
