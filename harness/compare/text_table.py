"""A comparison document as a terminal reads it: aligned plain-text tables, no markup.

Pure: ``comparison.json``'s document in, text out.  Every cell gets its figures, the unchanged
ones too (unless ``only_changed``); values are scaled for a person (:func:`harness.units.human`),
colour comes from the :class:`~harness.units.Style` the caller chose (a terminal without
``NO_COLOR``).  The markdown summary (:mod:`harness.compare.markdown`) stays what a pull request
reads; this is what ``diskbench compare`` prints in a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.markdown import _cell_name, _change_text, _ci_text
from harness.compare.screen import DECIDED, beyond
from harness.compare.subject import diff_line, held_lines
from harness.compare.text import format_p, pct
from harness.compare.verdict import Kind, Verdict
from harness.units import PLAIN, Style, human, table
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

HEADER = ["cell", "metric", "base", "head", "change", "interval", "p", "rounds", "verdict"]


def _line(text: Any) -> str:
    return clean_line(str(text))


def _rows_of(cell: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The metrics a cell shows: an unchanged cell all its gated metrics; another the metrics
    that gave its verdict (all if none did) and the structural counters that moved."""
    metrics: list[Mapping[str, Any]] = list(cell.get("metrics") or [])
    if cell.get("verdict") == Verdict.UNCHANGED.value:
        return metrics
    rows = [m for m in metrics if m.get("verdict") != Verdict.UNCHANGED.value] or metrics
    rows += [
        m
        for m in cell.get("counters") or []
        if m.get("verdict") in (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value)
    ]
    return rows


def _row_label(cell: Mapping[str, Any], m: Mapping[str, Any], label: str) -> str:
    """A table row's verdict: the cell's label where the metric gave it, else the metric's own."""
    verdict = m.get("verdict")
    counters = [c.get("metric") for c in cell.get("counters") or []]
    if m.get("metric") in counters and verdict in (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value):
        return Verdict.CHANGED.value
    if verdict == cell.get("verdict") or cell.get("kind") not in (Kind.METRIC.value, Kind.COUNTER.value):
        return label
    moved = beyond(m)
    if verdict == Verdict.INCONCLUSIVE.value and moved and cell.get("verdict") in DECIDED:
        return f"{moved} beyond {float(m.get('min_effect', 0)) * 100:g}%, not yet significant alone"
    return str(verdict)


def effect(cell: Mapping[str, Any]) -> float:
    """The cell's largest change in percent over the rows it shows (0 when none has a figure)."""
    changes = [abs(float(m["change_pct"])) for m in _rows_of(cell) if m.get("change_pct") is not None]
    return max(changes, default=0.0)


def ordered(
    cells: Sequence[Mapping[str, Any]], *, sort: str = "cell", only_changed: bool = False
) -> list[Mapping[str, Any]]:
    """The cells to show, by cell id or by effect size (largest first, then by id)."""
    if sort not in SORTS:
        raise ValueError(f"sort {sort!r}: one of {', '.join(SORTS)}")
    chosen = [c for c in cells if not only_changed or c.get("verdict") != Verdict.UNCHANGED.value]
    by_id = sorted(chosen, key=lambda c: str(c.get("cell_id")))
    if sort == "effect":
        return sorted(by_id, key=effect, reverse=True)
    return by_id


def _verdict_label(cell: Mapping[str, Any]) -> str:
    label = str(cell.get("verdict", "?"))
    kind = cell.get("kind")
    return f"{label} ({kind})" if kind not in (None, Kind.METRIC.value) else label


def _table(cells: Sequence[Mapping[str, Any]], style: Style) -> list[str]:
    rows: list[list[str]] = []
    for cell in cells:
        label = _verdict_label(cell)
        name = _line(_cell_name(cell))
        rounds = str(cell.get("rounds", 0))
        colours = _COLOURS.get(str(cell.get("verdict")), ())
        metrics = _rows_of(cell)
        if not metrics:
            rows.append([name, "-", "-", "-", "-", "-", "-", rounds, style(_line(label), *colours)])
        for m in metrics:
            unit = str(m.get("unit", ""))
            row_label = _line(_row_label(cell, m, label))
            colour = _COLOURS.get(row_label.split(" ")[0], colours)
            rows.append(
                [
                    name,
                    _line(m.get("metric")),
                    human(m.get("median_base"), unit),
                    human(m.get("median_head"), unit),
                    _change_text(m),
                    _ci_text(m),
                    format_p(m.get("p_value")),
                    rounds,
                    style(row_label, *colour),
                ]
            )
    return table([style(h, "bold") for h in HEADER], rows, numeric={2, 3, 4, 6, 7})


def _side(info: Mapping[str, Any]) -> str:
    label = _line(info.get("label") or "?")
    rev = info.get("rev")
    return f"{label} ({_line(rev)})" if rev else label


def _accel(accel: str) -> str:
    if accel == "tcg":
        return "under TCG (emulation): times are about QEMU's emulation, not the disk"
    if accel == "kvm":
        return "under KVM"
    return f"accelerator {accel}: unknown, read the times with care"


def render_text(
    doc: Mapping[str, Any], *, only_changed: bool = False, sort: str = "cell", style: Style = PLAIN
) -> str:
    """The comparison as aligned text: headline, sides, warnings, what differs, the cells' table,
    why each changed cell did, errors, counters, canary, budget, machine and settings."""
    cells: list[Mapping[str, Any]] = list(doc.get("cells") or [])
    summary = doc.get("summary") or {}
    counts: Mapping[str, int] = summary.get("counts") or {}
    verdict = str(doc.get("verdict", "?"))
    headline = f"diskbench compare: {style(verdict.upper(), *_COLOURS.get(verdict, ('bold',)))}"
    lines = [f"{headline}, {_accel(str(doc.get('accel', 'unknown')))}"]
    tally = ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict if counts.get(v.value))
    lines.append(
        f"base {_side(doc.get('base') or {})} vs head {_side(doc.get('head') or {})}: "
        f"{summary.get('cells', len(cells))} cells ({tally or 'none'})"
    )
    for warning in doc.get("warnings") or []:
        lines.append(style(f"WARNING: {_line(warning)}", "red", "bold"))
    diff = summary.get("subject_diff")
    if diff is not None:
        lines += ["", "What differs between base and head:"]
        if not diff:
            lines.append("  no difference of policy, guest recipe or QEMU (the change is elsewhere)")
        lines += [f"  - {_line(diff_line(entry))}" for entry in diff]
        lines += [
            f"  - cell {_line(e.get('name'))}: base {_line(e.get('base_id'))} -> head {_line(e.get('head_id'))}"
            for e in summary.get("cell_id_changes") or []
        ]
        held = held_lines(summary)
        if held:
            lines.append("  policy values some cells cannot take (they keep the fallback, both sides alike):")
            lines += [f"  - {_line(line)}" for line in held]
    shown = ordered(cells, sort=sort, only_changed=only_changed)
    lines.append("")
    if shown:
        lines += _table(shown, style)
    hidden = len(cells) - len(shown)
    if hidden:
        lines.append(f"({hidden} unchanged cell{'s' if hidden != 1 else ''} not shown: --only-changed)")
    sentence = summary.get("axis_sentence")
    if sentence:
        lines += ["", _line(sentence)]
    lines += _notes(cells)
    lines += _footer(doc)
    return "\n".join(lines) + "\n"


def _notes(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why each decided cell did, the errors, the counters' notes: one line per cell."""
    why = [
        (c, _line(c.get("reason")))
        for c in cells
        if c.get("verdict") not in (Verdict.ERROR.value, Verdict.UNCHANGED.value) and c.get("reason")
    ]
    errors = [
        (c, f"({_line(c.get('kind'))}) {_line(c.get('reason'))}")
        for c in cells
        if c.get("verdict") == Verdict.ERROR.value
    ]
    notes = [(c, _line(c.get("note"))) for c in cells if c.get("note")]
    lines: list[str] = []
    for title, entries in (("Why:", why), ("Errors:", errors), ("Counters:", notes)):
        if entries:
            lines += ["", title]
            lines += [
                f"  {_line(c.get('cell_id'))}: {text}"
                for c, text in sorted(entries, key=lambda e: str(e[0].get("cell_id")))
            ]
    return lines


def _footer(doc: Mapping[str, Any]) -> list[str]:
    lines = [""]
    canary = doc.get("canary")
    if canary:
        before, after, change = canary.get("before_mib_s"), canary.get("after_mib_s"), canary.get("change")
        figures = (
            f"{before:.0f} -> {after:.0f} MiB/s ({pct(change)})"
            if before is not None and after is not None and change is not None
            else "not measured"
        )
        moved = (
            "MOVED: the time verdicts it could explain set to inconclusive"
            if canary.get("moved")
            else "steady"
        )
        lines.append(f"Host canary: {figures}: {moved}")
        for key, what in (("voided", "voided"), ("kept", "not voided")):
            ids = canary.get(key) or []
            if ids:
                lines.append(f"  {what}: {', '.join(_line(i) for i in ids)}")
    budget = doc.get("budget")
    if budget:
        lines.append("Budget: " + ", ".join(f"{_line(k)} {_line(v)}" for k, v in budget.items()))
    machine = doc.get("machine") or {}
    parts = [
        f"{key} {_line(machine[key])}"
        for key in ("hostname", "cpu", "accel", "qemu_version", "host_kernel", "work_dir_fs")
        if machine.get(key)
    ]
    lines.append(f"Machine: {', '.join(parts) or 'unknown'}")
    settings = doc.get("settings") or {}
    if settings:
        lines.append(
            f"Settings: minimum effect {float(settings.get('min_effect', 0)) * 100:g}%, "
            f"alpha {settings.get('alpha')} family-wise ({settings.get('correction', 'bonferroni')}, "
            f"{settings.get('comparisons', 1)} tests), "
            f"{float(settings.get('confidence', 0)) * 100:g}% bootstrap interval "
            f"({settings.get('bootstrap')} resamples, seed {settings.get('seed')}); "
            f"changed {'fails' if settings.get('changed_fails', True) else 'does not fail'}"
        )
    if doc.get("created_at"):
        lines.append(f"Created {_line(doc['created_at'])}")
    return lines
