"""A comparison document as a terminal reads it: aligned plain-text tables, no markup.

Pure: ``comparison.json``'s document in, text out.  Every cell gets its figures, the unchanged
ones too (unless ``only_changed``); values are scaled for a person (:func:`harness.units.human`),
colour comes from the :class:`~harness.units.Style` the caller chose (a terminal without
``NO_COLOR``).  The markdown summary (:mod:`harness.compare.markdown`) stays what a pull request
reads; this is what ``diskbench compare`` prints in a terminal.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.markdown import _cell_name, _change_text
from harness.compare.model import ComparedCell, Comparison, Figures, Side
from harness.compare.screen import DECIDED, beyond
from harness.compare.subject import diff_line, held_lines
from harness.compare.text import format_p, pct, regime_words
from harness.compare.verdict import Kind, Verdict
from harness.units import PLAIN, Style, human, plural, short_names, table, visible_width
from harness.untrusted import clean_line

SORTS = ("cell", "effect")

_COLOURS: dict[str, tuple[str, ...]] = {
    Verdict.REGRESSION.value: ("red", "bold"),
    Verdict.ERROR.value: ("red", "bold"),
    Verdict.CHANGED.value: ("yellow", "bold"),
    Verdict.IMPROVEMENT.value: ("green",),
    Verdict.INCONCLUSIVE.value: ("yellow",),
    Verdict.UNCHANGED.value: ("dim",),
}

HEADER = ["cell", "metric", "base", "head", "change", "interval", "p", "n", "verdict"]


def _line(text: Any) -> str:
    return clean_line(str(text))


def _rows_of(cell: ComparedCell) -> list[Figures]:
    """The metrics a cell shows: an unchanged cell all its gated metrics; another the metrics
    that gave its verdict (all if none did) and the structural counters that moved."""
    metrics = list(cell.metrics)
    if cell.verdict is Verdict.UNCHANGED:
        return metrics
    rows = [m for m in metrics if m.verdict is not Verdict.UNCHANGED] or metrics
    rows += [m for m in cell.counters if m.moved]
    return rows


def _row_label(cell: ComparedCell, m: Figures, label: str) -> str:
    """A table row's verdict: the cell's label where the metric gave it, else the metric's own."""
    counters = [c.metric for c in cell.counters]
    if m.metric in counters and m.moved:
        return Verdict.CHANGED.value
    if m.verdict is cell.verdict or cell.kind not in (Kind.METRIC, Kind.COUNTER):
        return label
    moved = beyond(m)
    if m.verdict is Verdict.INCONCLUSIVE and moved and cell.verdict in DECIDED:
        return f"{moved} beyond {float(m.min_effect) * 100:g}%, not yet significant alone"
    return m.verdict.value


def effect(cell: ComparedCell) -> float:
    """The cell's largest change in percent over the rows it shows (0 when none has a figure)."""
    changes = [abs(float(m.change_pct)) for m in _rows_of(cell) if m.change_pct is not None]
    return max(changes, default=0.0)


def ordered(
    cells: Sequence[ComparedCell], *, sort: str = "cell", only_changed: bool = False
) -> list[ComparedCell]:
    """The cells to show, by cell id or by effect size (largest first, then by id)."""
    if sort not in SORTS:
        raise ValueError(f"sort {sort!r}: one of {', '.join(SORTS)}")
    chosen = [c for c in cells if not only_changed or c.verdict is not Verdict.UNCHANGED]
    by_id = sorted(chosen, key=lambda c: c.cell_id)
    if sort == "effect":
        return sorted(by_id, key=effect, reverse=True)
    return by_id


def _verdict_label(cell: ComparedCell) -> str:
    label = cell.verdict.value
    return f"{label} ({cell.kind.value})" if cell.kind is not Kind.METRIC else label


def _table(cells: Sequence[ComparedCell], style: Style, names: Mapping[str, str]) -> list[str]:
    rows: list[list[str]] = []
    for cell in cells:
        label = _verdict_label(cell)
        name = _line(names.get(cell.cell_id, _cell_name(cell)))
        rounds = str(cell.rounds)
        colours = _COLOURS.get(cell.verdict.value, ())
        metrics = _rows_of(cell)
        if not metrics:
            rows.append([name, "-", "-", "-", "-", "-", "-", rounds, style(_line(label), *colours)])
        for m in metrics:
            row_label = _line(_row_label(cell, m, label))
            colour = _COLOURS.get(row_label.split(" ")[0], colours)
            rows.append(
                [
                    name,
                    _line(m.metric),
                    human(m.median_base, m.unit),
                    human(m.median_head, m.unit),
                    _change_text(m),
                    _interval(m),
                    format_p(m.p_value),
                    rounds,
                    style(row_label, *colour),
                ]
            )
    return table([style(h, "bold") for h in HEADER], rows, numeric={2, 3, 4, 6, 7})


def _interval(m: Figures) -> str:
    """``-3.1…+4.2%``: the interval of the change, compact (the markdown spaces it out)."""
    lo, hi = m.ci_low_pct, m.ci_high_pct
    if lo is None or hi is None:
        return "-"
    return f"{lo:+.1f}…{hi:+.1f}%"


def _side(info: Side) -> str:
    label = _line(info.label or "?")
    return f"{label} ({_line(info.rev)})" if info.rev else label


def render_text(
    doc: Comparison, *, only_changed: bool = False, sort: str = "cell", style: Style = PLAIN
) -> str:
    """The comparison as aligned text: headline, sides, warnings, what differs, the cells' table,
    why each changed cell did, errors, counters, canary, budget, machine and settings."""
    cells = doc.cells
    summary = doc.summary
    counts = summary.counts
    verdict = doc.verdict.value
    headline = f"diskbench compare: {style(verdict.upper(), *_COLOURS.get(verdict, ('bold',)))}"
    lines = [f"{headline}, {regime_words(doc.accel, doc.machine.get('host_disk'))}"]
    tally = ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict if counts.get(v.value))
    total = summary.cells if summary.cells is not None else len(cells)
    lines.append(
        f"base {_side(doc.base)} vs head {_side(doc.head)}: {plural(total, 'cell')} ({tally or 'none'})"
    )
    for warning in doc.warnings:
        lines.append(style(f"WARNING: {_line(warning)}", "red", "bold"))
    diff = summary.subject_diff
    if diff is not None:
        lines += ["", "What differs between base and head:"]
        if not diff:
            lines.append("  no difference of policy, guest recipe or QEMU (the change is elsewhere)")
        lines += [f"  - {_line(diff_line(entry))}" for entry in diff]
        lines += [
            f"  - cell {_line(e.name)}: base {_line(e.base_id)} -> head {_line(e.head_id)}"
            for e in summary.cell_id_changes
        ]
        held = held_lines(summary)
        if held:
            lines.append("  policy values some cells cannot take (they keep the fallback, both sides alike):")
            lines += [f"  - {_line(line)}" for line in held]
    shown = ordered(cells, sort=sort, only_changed=only_changed)
    common, names = _short(cells)
    lines.append("")
    if shown:
        if common:
            lines.append(f"Every cell is {_line(common)}; the table names what sets each apart:")
        lines += _table(shown, style, names)
    hidden = len(cells) - len(shown)
    if hidden:
        lines.append(f"({hidden} unchanged cell{'s' if hidden != 1 else ''} not shown: --only-changed)")
    if summary.axis_sentence:
        lines += ["", _line(summary.axis_sentence)]
    lines += _notes(cells, names)
    lines += _footer(doc)
    return "\n".join(wrapped for line in lines for wrapped in _wrap(line)) + "\n"


WIDTH = 100


def _short(cells: Sequence[ComparedCell]) -> tuple[str, dict[str, str]]:
    """The parts of the cell ids every cell shares, and each cell's id without them (a cell whose
    base had another id keeps both)."""
    ids = [c.cell_id for c in cells]
    common, shorts = short_names(ids)
    names = {}
    for cell, short in zip(cells, shorts, strict=True):
        full = _cell_name(cell)
        names[cell.cell_id] = short if full == cell.cell_id else full
    return common, names


def _wrap(line: str) -> list[str]:
    """A line of prose within :data:`WIDTH` columns (a table's line stays whole)."""
    if visible_width(line) <= WIDTH or "\033" in line or "  " in line.strip():
        return [line]
    indent = " " * (len(line) - len(line.lstrip()))
    return textwrap.wrap(line, WIDTH, initial_indent="", subsequent_indent=indent + "    ") or [line]


def _notes(cells: Sequence[ComparedCell], names: Mapping[str, str]) -> list[str]:
    """Why each decided cell did, the errors, the counters' notes: a line per reason, naming the
    cells that share it."""
    why = [
        (c, _line(c.reason))
        for c in cells
        if c.verdict not in (Verdict.ERROR, Verdict.UNCHANGED) and c.reason
    ]
    errors = [(c, f"({_line(c.kind.value)}) {_line(c.reason)}") for c in cells if c.verdict is Verdict.ERROR]
    notes = [(c, _line(c.note)) for c in cells if c.note]
    lines: list[str] = []
    for title, entries in (("Why:", why), ("Errors:", errors), ("Counters:", notes)):
        if not entries:
            continue
        lines += ["", title]
        by_text: dict[str, list[str]] = {}
        for c, text in sorted(entries, key=lambda e: e[0].cell_id):
            by_text.setdefault(text, []).append(_line(names.get(c.cell_id, c.cell_id)))
        for text, cells_of in by_text.items():
            # one line for a reason several cells share (ten cells with too few samples)
            who = ", ".join(cells_of) if len(cells_of) <= 2 else f"{len(cells_of)} cells ({cells_of[0]}...)"
            if len(cells_of) == len(entries) and len(cells_of) > 2:
                who = f"all {len(cells_of)} cells"
            lines.append(f"  {who}: {text}")
    return lines


def _footer(doc: Comparison) -> list[str]:
    lines = [""]
    canary = doc.canary
    if canary is not None:
        before, after, change = canary.before_mib_s, canary.after_mib_s, canary.change
        figures = (
            f"{before:.0f} -> {after:.0f} MiB/s ({pct(change)})"
            if before is not None and after is not None and change is not None
            else "not measured"
        )
        moved = "MOVED: the time verdicts it could explain set to inconclusive" if canary.moved else "steady"
        lines.append(f"Host canary: {figures}: {moved}")
        for ids, what in ((canary.voided, "voided"), (canary.kept, "not voided")):
            if ids:
                lines.append(f"  {what}: {', '.join(_line(i) for i in ids)}")
    budget = doc.budget
    if budget is not None and budget.to_json():
        lines.append("Budget: " + ", ".join(f"{_line(k)} {_line(v)}" for k, v in budget.items()))
    machine = doc.machine
    parts = [
        f"{key} {_line(machine.get(key))}"
        for key in ("hostname", "cpu", "accel", "qemu_version", "host_kernel", "work_dir_fs")
        if machine.get(key)
    ]
    lines.append(f"Machine: {', '.join(parts) or 'unknown'}")
    settings = doc.settings
    if settings is not None:
        lines.append(
            f"Settings: minimum effect {float(settings.min_effect) * 100:g}%, "
            f"alpha {settings.alpha} family-wise ({settings.correction}, "
            f"{settings.comparisons} tests), "
            f"{float(settings.confidence) * 100:g}% bootstrap interval "
            f"({settings.bootstrap} resamples, seed {settings.seed}); "
            f"changed {'fails' if settings.changed_fails else 'does not fail'}"
        )
    if doc.created_at:
        lines.append(f"Created {_line(doc.created_at)}")
    return lines
