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
from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.pointers import inconclusive_figures
from harness.compare.verdict import Kind, Verdict

# the flags the command that decides replaces (the gate's own command may carry them)
_DECIDE_FLAGS = ("--max-rounds", "--budget-min")
_NO_FIGURES_FIRST = (Kind.HEAD_TIMED_OUT.value, Kind.FAILURE.value)


def _metric_list(cell: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(cell.get("metrics") or [])


def _counter_list(cell: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(cell.get("counters") or [])


def _moved(m: Mapping[str, Any]) -> bool:
    return m.get("verdict") in (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value)


def worse_log(m: Mapping[str, Any]) -> float:
    """How far the metric moved toward worse, as a log ratio (negative: better); an infinite
    ratio is infinitely far, a metric without figures the least of all."""
    ratio = m.get("ratio")
    if not isinstance(ratio, int | float) or ratio <= 0 or math.isnan(ratio):
        change = m.get("change_pct")
        both = m.get("median_base") is not None and m.get("median_head") is not None
        if change is None and both:
            ratio = math.inf  # x against 0: the document writes no ratio
        else:
            return -math.inf
    size = math.log(ratio) if math.isfinite(ratio) else math.inf
    return -size if m.get("higher_is_better") else size


def lead_metric(cell: Mapping[str, Any]) -> str | None:
    """The metric a cell's row shows (see the module's doc); None for a cell without figures."""
    metrics, counters = _metric_list(cell), _counter_list(cell)
    verdict = cell.get("verdict")
    if verdict == Verdict.CHANGED.value:
        pool = [m for m in counters if _moved(m)]
        if pool:
            return str(max(pool, key=lambda m: abs(worse_log(m)))["metric"])
    if verdict == Verdict.IMPROVEMENT.value:
        pool = [m for m in metrics if m.get("verdict") == verdict]
        if pool:
            return str(min(pool, key=worse_log)["metric"])
    pool = [m for m in metrics if m.get("verdict") == verdict] or metrics or counters
    if not pool:
        return None
    return str(max(pool, key=worse_log)["metric"])


def _figure(cell: Mapping[str, Any], metric: str | None) -> Mapping[str, Any] | None:
    return next((m for m in (*_metric_list(cell), *_counter_list(cell)) if m.get("metric") == metric), None)


def said(cell: Mapping[str, Any]) -> str:
    """A cell's reason in a few words: up to its first parenthesis, colon or semicolon
    (``head's guest ran past its deadline of 320 s``, ``both sides failed``)."""
    reason = str(cell.get("reason") or cell.get("kind") or "")
    cut = min(
        (i for i in (reason.find(" ("), reason.find(": "), reason.find("; ")) if i > 0), default=len(reason)
    )
    return reason[:cut]


def row_label(cell: Mapping[str, Any]) -> str:
    """A cell's verdict as its row writes it: ``regression``, ``regression (failure)``."""
    verdict, kind = str(cell.get("verdict", "?")), cell.get("kind")
    return verdict if kind in (None, Kind.METRIC.value) else f"{verdict} ({kind})"


# the cell verdicts that more rounds would not change: a metric's row says its own figures
DECIDED = (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value, Verdict.CHANGED.value)


def beyond(m: Mapping[str, Any]) -> str:
    """``"worse"`` or ``"better"`` when the metric's whole interval lies beyond its minimum effect."""
    lo, hi = m.get("ci_low"), m.get("ci_high")
    edge = 1.0 + float(m.get("min_effect", 0))
    if lo is None and hi is None:
        return ""
    above = lo is not None and lo >= edge  # hi may be null: infinite
    below = hi is not None and hi <= 1.0 / edge
    if not (above or below):
        return ""
    return "better" if above == bool(m.get("higher_is_better")) else "worse"


def figure_label(cell: Mapping[str, Any], m: Mapping[str, Any], *, counter: bool) -> str:
    """A figure's verdict in its cell's fold: a counter that moved is the cell's change; an
    inconclusive metric of a decided cell whose interval lies beyond its minimum effect says so."""
    verdict = str(m.get("verdict", "?"))
    if counter and _moved(m):
        return Verdict.CHANGED.value
    moved_beyond = beyond(m)
    if verdict == Verdict.INCONCLUSIVE.value and moved_beyond and cell.get("verdict") in DECIDED:
        return f"{moved_beyond} beyond {float(m.get('min_effect', 0)) * 100:g}%, not yet significant alone"
    return verdict


def _row(index: int, cell: Mapping[str, Any], lead: str | None) -> dict[str, Any]:
    figures = [
        {"metric": str(m.get("metric")), "label": figure_label(cell, m, counter=counter)}
        for counter, group in ((False, _metric_list(cell)), (True, _counter_list(cell)))
        for m in group
    ]
    return {"cell": index, "metric": lead, "label": row_label(cell), "figures": figures}


def _order(cells: Sequence[Mapping[str, Any]], leads: Sequence[str | None], verdict: Verdict) -> list[int]:
    """The cells of ``verdict``, worst first: no figures (head timed out, failed) before figures,
    then by the lead's move toward worse (for changed: its size either way)."""

    def key(i: int) -> tuple[int, float]:
        cell = cells[i]
        lead = _figure(cell, leads[i])
        if lead is None:
            return (0 if cell.get("kind") in _NO_FIGURES_FIRST else 1, 0.0)
        size = abs(worse_log(lead)) if verdict is Verdict.CHANGED else worse_log(lead)
        if verdict is Verdict.IMPROVEMENT:
            size = -size
        return (2, -size)

    return sorted((i for i, c in enumerate(cells) if c.get("verdict") == verdict.value), key=key)


def _could_see(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every cell's best figure (what it would have caught four times in five, never below its
    minimum effect), the smallest and largest of them."""
    best: list[float] = []
    for cell in cells:
        seen = [
            max(float(m["could_see_pct"]), float(m.get("min_effect", 0)) * 100.0)
            for m in _metric_list(cell)
            if isinstance(m.get("could_see_pct"), int | float) and math.isfinite(m["could_see_pct"])
        ]
        if seen:
            best.append(min(seen))
    return {
        "cells": len(cells),
        "could_see_low_pct": round(min(best), 2) if best else None,
        "could_see_high_pct": round(max(best), 2) if best else None,
    }


def decide_command(
    reproduce: Sequence[str], rounds: int, budget: Mapping[str, Any] | None
) -> list[str] | None:
    """The gate's command that would run ``rounds`` rounds per side: its own command with
    ``--max-rounds`` and, when the budget says how long its rounds took, ``--budget-min`` scaled
    to them (whole minutes, rounded up).  None for a comparison of records (no gate to run)."""
    if list(reproduce[:2]) != ["diskbench", "gate"]:
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
    used, done = (budget or {}).get("used_min"), (budget or {}).get("rounds")
    if isinstance(used, int | float) and isinstance(done, int) and done > 0 and used > 0:
        argv += ["--budget-min", str(math.ceil(used * rounds / done))]
    return argv


def _inconclusive(
    cells: Sequence[Mapping[str, Any]],
    order: Sequence[int],
    reproduce: Sequence[str],
    budget: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """The inconclusive cells, and the figures of what decides them: those of the inconclusive
    sentence (:func:`harness.compare.pointers.inconclusive_figures`, over every cell's
    inconclusive metrics), the gate's command for the rounds the slowest needs."""
    if not order:
        return None
    rows = [
        {
            "at": i,
            "verdict": m.get("verdict"),
            "could_see_pct": m.get("could_see_pct"),
            "rounds_to_decide": m.get("rounds_to_decide"),
            "rounds": min(int(m.get("n_base") or 0), int(m.get("n_head") or 0)),
        }
        for i, cell in enumerate(cells)
        for m in _metric_list(cell)
    ]
    seen, most = inconclusive_figures(rows)
    rounds = int(most["rounds_to_decide"]) if most is not None else None
    # a gate adds rounds itself (--max-rounds); records compared by hand need more samples
    gate = list(reproduce[1:2]) == ["gate"] if reproduce else budget is not None
    return {
        "cells": list(order),
        "rounds": rounds,
        "command": decide_command(reproduce, rounds, budget) if rounds is not None else None,
        "gate": gate,
        "could_see_pct": seen,
        "slowest": most["at"] if most is not None else None,
        "slowest_rounds": most["rounds"] if most is not None else None,
    }


def screen(
    cells: Sequence[Mapping[str, Any]],
    *,
    verdict: str,
    reproduce: Sequence[str] = (),
    budget: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``summary.screen`` of a document's ``cells`` (see the module's doc)."""
    leads = [lead_metric(c) for c in cells]
    regressed = _order(cells, leads, Verdict.REGRESSION)
    changed = _order(cells, leads, Verdict.CHANGED)
    errors = [i for i, c in enumerate(cells) if c.get("verdict") == Verdict.ERROR.value]
    inconclusive = _order(cells, leads, Verdict.INCONCLUSIVE)
    improved = _order(cells, leads, Verdict.IMPROVEMENT)
    unchanged = _order(cells, leads, Verdict.UNCHANGED)
    first = [
        {"cell": i, "metric": leads[i], "said": None if leads[i] else said(cells[i])}
        for i in (*regressed, *changed, *errors)
    ]
    return {
        "first": first,
        "unchanged": _could_see(cells) if verdict == Verdict.UNCHANGED.value and cells else None,
        "inconclusive": _inconclusive(cells, inconclusive, reproduce, budget),
        "rows": [
            _row(i, cells[i], leads[i]) for i in (*regressed, *changed, *errors, *inconclusive, *improved)
        ],
        "unchanged_rows": [_row(i, cells[i], leads[i]) for i in unchanged],
    }


def with_screen(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` with ``summary.screen`` as this version decides it (a document written before it
    gets it; one that has it gets it again, the same)."""
    cells = list(doc.get("cells") or [])
    summary = dict(doc.get("summary") or {})
    summary["screen"] = screen(
        cells,
        verdict=str(doc.get("verdict")),
        reproduce=[str(a) for a in doc.get("reproduce") or []],
        budget=doc.get("budget") if isinstance(doc.get("budget"), Mapping) else None,
    )
    return {**doc, "summary": summary}
