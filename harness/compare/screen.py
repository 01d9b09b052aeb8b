"""What a summary of a comparison says first, and in which order.  Pure.

The pull request comment, the job summary (both rendered by the GitHub action) and ``summary.md``
(:mod:`harness.compare.markdown`) show one comparison in one order.  What goes where is decided
here, once, from the document itself, and written into it (``summary.screen``), so that no
renderer decides it again:

* **lead** (:func:`lead_metric`): the one metric a cell's line and row show: the metric that gave the
  cell its verdict (for ``changed`` the counter that moved), the largest move of them; for an
  unchanged or inconclusive cell its worst (the largest change toward worse).  None for a cell
  without figures (head failed or timed out, both failed, no samples).
* **first** (:func:`screen`): the lines under the headline, one per cell that regressed (head
  timed out and head failed first, then by the size of the change), changed, or is in error:
  the cell, its lead, and for a cell without figures what happened in a few words (``said``).
* **unchanged**: for a comparison where every cell is unchanged, what it could have seen: the
  smallest and the largest, over the cells, of the regression each would have caught four times
  in five (its most sensitive gated metric, never below that metric's minimum effect).
* **inconclusive**: the inconclusive cells, the rounds per side that would decide the metric that
  needs most (and its cell), what the inconclusive metrics could have seen, and for a gate the
  one command that runs them: the gate's own command with ``--max-rounds`` and a budget scaled
  from the minutes its rounds took.
* **rows**: the table, one row per cell that is not unchanged, in the order of ``first`` then
  inconclusive, improved; **unchanged_rows** those of the unchanged cells (shown folded).  A row
  names its cell (an index into ``cells``), its lead, its verdict as the table writes it, and
  every figure of the cell (gated metrics, then counters) with its own label, for the cell's fold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from harness.compare.model import (
    Budget,
    ComparedCell,
    Comparison,
    CouldSee,
    Figures,
    FirstLine,
    Inconclusive,
    Row,
    RowFigure,
    Screen,
    command_word,
)
from harness.compare.pointers import inconclusive_figures
from harness.compare.verdict import Kind, Verdict

# the flags the command that decides replaces (the gate's own command may carry them)
_DECIDE_FLAGS = ("--max-rounds", "--budget-min")
_NO_FIGURES_FIRST = (Kind.HEAD_TIMED_OUT, Kind.FAILURE)


def worse_log(m: Figures) -> float:
    """How far the metric moved toward worse, as a log ratio (negative: better); an infinite
    ratio is infinitely far, a metric without figures the least of all."""
    ratio = m.ratio
    if not isinstance(ratio, int | float) or ratio <= 0 or math.isnan(ratio):
        both = m.median_base is not None and m.median_head is not None
        if m.change_pct is None and both:
            ratio = math.inf  # x against 0: the document writes no ratio
        else:
            return -math.inf
    size = math.log(ratio) if math.isfinite(ratio) else math.inf
    return -size if m.higher_is_better else size


def lead_metric(cell: ComparedCell) -> str | None:
    """The metric a cell's row shows (see the module's doc); None for a cell without figures."""
    metrics, counters = list(cell.metrics), list(cell.counters)
    verdict = cell.verdict
    if verdict is Verdict.CHANGED:
        pool = [m for m in counters if m.moved]
        if pool:
            return max(pool, key=lambda m: abs(worse_log(m))).metric
    if verdict is Verdict.IMPROVEMENT:
        pool = [m for m in metrics if m.verdict is verdict]
        if pool:
            return min(pool, key=worse_log).metric
    pool = [m for m in metrics if m.verdict is verdict] or metrics or counters
    if not pool:
        return None
    return max(pool, key=worse_log).metric


def said(cell: ComparedCell) -> str:
    """A cell's reason in a few words: up to its first parenthesis, colon or semicolon
    (``head's guest ran past its deadline of 320 s``, ``both sides failed``)."""
    reason = str(cell.reason or cell.kind.value)
    cut = min(
        (i for i in (reason.find(" ("), reason.find(": "), reason.find("; ")) if i > 0), default=len(reason)
    )
    return reason[:cut]


def row_label(cell: ComparedCell) -> str:
    """A cell's verdict as its row writes it: ``regression``, ``regression (failure)``."""
    verdict, kind = cell.verdict.value, cell.kind
    return verdict if kind is Kind.METRIC else f"{verdict} ({kind.value})"


# the cell verdicts that more rounds would not change: a metric's row says its own figures
DECIDED = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.CHANGED)


def beyond(m: Figures) -> str:
    """``"worse"`` or ``"better"`` when the metric's whole interval lies beyond its minimum effect."""
    lo, hi = m.ci_low, m.ci_high
    edge = 1.0 + float(m.min_effect)
    if lo is None and hi is None:
        return ""
    above = lo is not None and lo >= edge  # hi may be null: infinite
    below = hi is not None and hi <= 1.0 / edge
    if not (above or below):
        return ""
    return "better" if above == m.higher_is_better else "worse"


def figure_label(cell: ComparedCell, m: Figures, *, counter: bool) -> str:
    """A figure's verdict in its cell's fold: a counter that moved is the cell's change; an
    inconclusive metric of a decided cell whose interval lies beyond its minimum effect says so."""
    if counter and m.moved:
        return Verdict.CHANGED.value
    moved_beyond = beyond(m)
    if m.verdict is Verdict.INCONCLUSIVE and moved_beyond and cell.verdict in DECIDED:
        return f"{moved_beyond} beyond {float(m.min_effect) * 100:g}%, not yet significant alone"
    return m.verdict.value


def _row(index: int, cell: ComparedCell, lead: str | None) -> Row:
    figures = tuple(
        RowFigure(metric=m.metric, label=figure_label(cell, m, counter=counter))
        for counter, group in ((False, cell.metrics), (True, cell.counters))
        for m in group
    )
    return Row(cell=index, metric=lead, label=row_label(cell), figures=figures)


def _order(cells: Sequence[ComparedCell], leads: Sequence[str | None], verdict: Verdict) -> list[int]:
    """The cells of ``verdict``, worst first: no figures (head timed out, failed) before figures,
    then by the lead's move toward worse (for changed: its size either way)."""

    def key(i: int) -> tuple[int, float]:
        cell = cells[i]
        lead = cell.figure(leads[i])
        if lead is None:
            return (0 if cell.kind in _NO_FIGURES_FIRST else 1, 0.0)
        size = abs(worse_log(lead)) if verdict is Verdict.CHANGED else worse_log(lead)
        if verdict is Verdict.IMPROVEMENT:
            size = -size
        return (2, -size)

    return sorted((i for i, c in enumerate(cells) if c.verdict is verdict), key=key)


def _could_see(cells: Sequence[ComparedCell]) -> CouldSee:
    """Every cell's best figure (what it would have caught four times in five, never below its
    minimum effect), the smallest and largest of them."""
    best: list[float] = []
    for cell in cells:
        seen = [
            max(float(m.could_see_pct), float(m.min_effect) * 100.0)
            for m in cell.metrics
            if m.could_see_pct is not None and math.isfinite(m.could_see_pct)
        ]
        if seen:
            best.append(min(seen))
    return CouldSee(
        cells=len(cells),
        could_see_low_pct=round(min(best), 2) if best else None,
        could_see_high_pct=round(max(best), 2) if best else None,
    )


def decide_command(reproduce: Sequence[str], rounds: int, budget: Budget | None) -> list[str] | None:
    """The gate's command that would run ``rounds`` rounds per side: its own command with
    ``--max-rounds`` and, when the budget says how long its rounds took, ``--budget-min`` scaled
    to them (whole minutes, rounded up).  None for a comparison of records (no gate to run)."""
    if command_word(reproduce) != "gate":
        return None
    argv: list[str] = []
    skip = False
    for arg in reproduce:
        if skip:
            skip = False
            continue
        if arg in _DECIDE_FLAGS:
            skip = True
            continue
        argv.append(str(arg))
    argv += ["--max-rounds", str(rounds)]
    used = budget.used_min if budget is not None else None
    done = budget.rounds if budget is not None else None
    if isinstance(used, int | float) and isinstance(done, int) and done > 0 and used > 0:
        argv += ["--budget-min", str(math.ceil(used * rounds / done))]
    return argv


@dataclass(frozen=True)
class _At:
    """A gated metric of the cell ``at``, as the inconclusive sentence weighs it."""

    at: int
    verdict: Verdict
    could_see_pct: float | None
    rounds_to_decide: int | None
    rounds: int


def _inconclusive(
    cells: Sequence[ComparedCell],
    order: Sequence[int],
    reproduce: Sequence[str],
    budget: Budget | None,
) -> Inconclusive | None:
    """The inconclusive cells, and the figures of what decides them: those of the inconclusive
    sentence (:func:`harness.compare.pointers.inconclusive_figures`, over every cell's
    inconclusive metrics), the gate's command for the rounds the slowest needs."""
    if not order:
        return None
    rows = [
        _At(
            at=i,
            verdict=m.verdict,
            could_see_pct=m.could_see_pct,
            rounds_to_decide=m.rounds_to_decide,
            rounds=m.rounds,
        )
        for i, cell in enumerate(cells)
        for m in cell.metrics
    ]
    seen, most = inconclusive_figures(rows)
    rounds = int(most.rounds_to_decide or 0) if most is not None else None
    # a gate adds rounds itself (--max-rounds); records compared by hand need more samples
    gate = command_word(reproduce) == "gate" if reproduce else budget is not None
    command = decide_command(reproduce, rounds, budget) if rounds is not None else None
    return Inconclusive(
        cells=tuple(order),
        rounds=rounds,
        command=tuple(command) if command is not None else None,
        gate=gate,
        could_see_pct=seen,
        slowest=most.at if most is not None else None,
        slowest_rounds=most.rounds if most is not None else None,
    )


def screen(
    cells: Sequence[ComparedCell],
    *,
    verdict: Verdict,
    reproduce: Sequence[str] = (),
    budget: Budget | None = None,
) -> Screen:
    """``summary.screen`` of a comparison's ``cells`` (see the module's doc)."""
    leads = [lead_metric(c) for c in cells]
    regressed = _order(cells, leads, Verdict.REGRESSION)
    changed = _order(cells, leads, Verdict.CHANGED)
    errors = [i for i, c in enumerate(cells) if c.verdict is Verdict.ERROR]
    inconclusive = _order(cells, leads, Verdict.INCONCLUSIVE)
    improved = _order(cells, leads, Verdict.IMPROVEMENT)
    unchanged = _order(cells, leads, Verdict.UNCHANGED)
    first = tuple(
        FirstLine(cell=i, metric=leads[i], said=None if leads[i] else said(cells[i]))
        for i in (*regressed, *changed, *errors)
    )
    return Screen(
        first=first,
        unchanged=_could_see(cells) if verdict is Verdict.UNCHANGED and cells else None,
        inconclusive=_inconclusive(cells, inconclusive, reproduce, budget),
        rows=tuple(
            _row(i, cells[i], leads[i]) for i in (*regressed, *changed, *errors, *inconclusive, *improved)
        ),
        unchanged_rows=tuple(_row(i, cells[i], leads[i]) for i in unchanged),
    )


def with_screen(comparison: Comparison) -> Comparison:
    """``comparison`` with ``summary.screen`` as this version decides it (a comparison written
    before it gets it; one that has it gets it again, the same)."""
    decided = screen(
        comparison.cells,
        verdict=comparison.verdict,
        reproduce=comparison.reproduce or (),
        budget=comparison.budget,
    )
    return replace(comparison, summary=replace(comparison.summary, screen=decided))
