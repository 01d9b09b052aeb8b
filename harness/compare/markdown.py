"""The summary of a comparison document in markdown (a pull request comment, a terminal)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.model import (
    Canary,
    ComparedCell,
    Comparison,
    Figures,
    Inconclusive,
    Row,
    Screen,
    SensitivityRow,
    Summary,
)
from harness.compare.pointers import FEW, command_line, graph_url, inconclusive_sentence, out_of_reach
from harness.compare.screen import row_label, with_screen
from harness.compare.subject import diff_line, held_lines
from harness.compare.text import format_p, format_value, pct, regime_words
from harness.compare.verdict import TALLY, Kind, Verdict
from harness.units import plural
from harness.untrusted import inert_markdown


def _code(text: Any) -> str:
    """Text for a code span outside tables (no escapes work inside one)."""
    return "`" + str(text).replace("`", "'").replace("\n", " ") + "`"


def _accel_line(accel: str, host_disk: object = None) -> str:
    words = regime_words(accel, host_disk)
    return words if accel == "kvm" and not host_disk else f"**{words}**"


def _ci_text(m: Figures) -> str:
    lo, hi = m.ci_low_pct, m.ci_high_pct
    if lo is None or hi is None:
        return "-"
    return f"{lo:+.1f}% … {hi:+.1f}%"


def _change_text(m: Figures) -> str:
    change = m.change_pct
    if change is None:
        return "n/a" if m.median_base is None or m.median_head is None else "+inf%"
    if m.measured_change_pct is not None and m.shrink not in (None, 1.0):
        # a guest pair's change taken together, scaled to its size alone
        return f"{change:+.1f}% alone ({m.measured_change_pct:+.1f}% together)"
    if m.alone_low_pct is not None and m.alone_high_pct is not None and round(change, 1) != 0:
        # a crossed guest pair's change, and the sizes alone it reads as (Settings.crossed_reads)
        return f"{change:+.1f}% ({m.alone_low_pct:+.1f}% … {m.alone_high_pct:+.1f}% alone)"
    return f"{change:+.1f}%"


def kind_line(rows: Sequence[SensitivityRow]) -> str:
    """One line of what the gate could have seen per kind of cell (guest, replay): the range over
    its cells of each one's most sensitive gated metric."""
    best: dict[tuple[str, str], float] = {}
    for row in rows:
        if row.could_see_pct is None:
            continue
        key = (row.measure or "guest", row.cell_id)
        best[key] = min(best.get(key, math.inf), row.could_see_pct)
    parts = []
    for kind in ("guest", "replay"):
        values = sorted(v for (k, _cell), v in best.items() if k == kind)
        if not values:
            continue
        low, high = f"{values[0]:.1f}", f"{values[-1]:.1f}"
        span = f"{low}%" if low == high else f"{low}–{high}%"  # never a range of one value
        parts.append(f"{len(values)} {kind} cell{'s' if len(values) != 1 else ''} ≥ {span}")
    return "Could see: " + "; ".join(parts) if parts else ""


def _information_lines(cells: Sequence[ComparedCell]) -> list[str]:
    """The figures shown but not gated, per cell, each with why (folded: they decide nothing)."""
    rows = [(c, m) for c in cells for m in c.information]
    if not rows:
        return []
    lines = [
        f"<details><summary>{plural(len(rows), 'figure')} shown, not gated (they decide nothing)</summary>",
        "",
        "| cell | metric | change | CI | why not gated |",
        "| --- | --- | --- | --- | --- |",
    ]
    for cell, m in rows:
        texts = [m.metric, _change_text(m), _ci_text(m), m.information or ""]
        lines.append("| " + " | ".join([_name(cell), *(inert_markdown(t) for t in texts)]) + " |")
    return [*lines, "", "</details>", ""]


def sensitivity_lines(
    rows: Sequence[SensitivityRow],
    names: Mapping[str, str] | None = None,
    cells: Sequence[ComparedCell] = (),
    *,
    gate: bool = True,
) -> list[str]:
    """What each cell could have seen (its most sensitive gated metric), and the rounds an
    inconclusive cell would need: the summary's first lines.  ``names``: cell id -> the name to
    show (:func:`_reader_names`), else the row's own; ``cells``: the comparison's, whose figures
    say why more rounds would not decide a metric."""
    figures = {(c.cell_id, m.metric): m for c in cells for m in c.metrics}
    best: dict[str, SensitivityRow] = {}
    need: dict[str, SensitivityRow] = {}
    for row in rows:
        name = (names or {}).get(row.cell_id, row.name)
        seen = row.could_see_pct
        if seen is not None and (name not in best or seen < (best[name].could_see_pct or 0.0)):
            best[name] = row
        if row.verdict is Verdict.INCONCLUSIVE:
            known = need.get(name)
            more = row.rounds_to_decide
            if known is None or (more is not None and (known.rounds_to_decide or 10**9) > more):
                need[name] = row
    if not best and not need:
        return []
    lines = []
    if best:
        lines.append(
            "Could see (a regression this large fails the gate 4 times in 5): "
            + "; ".join(
                f"{_code(name)} ≥ {row.could_see_pct or 0.0:.1f}% ({inert_markdown(row.metric)}, "
                f"{row.rounds} rounds)"
                for name, row in best.items()
            )
        )
    if need:
        lines.append(
            "Inconclusive: "
            + "; ".join(
                f"{_code(name)} "
                + (
                    f"would need about {row.rounds_to_decide} rounds (has {row.rounds})"
                    if row.rounds_to_decide
                    else out_of_reach(figures.get((row.cell_id, row.metric)), gate=gate)[1]
                )
                for name, row in need.items()
            )
        )
    return [*lines, ""]


def render_markdown(comparison: Comparison) -> str:
    """The summary of a comparison, for a pull request comment or a terminal.

    In the order of the comment (``summary.screen``, :mod:`harness.compare.screen`): the
    headline, one line per regressed, changed or failed cell (or what an unchanged comparison
    could have seen), the axis sentence, the inconclusive cells and what decides them, what
    differs, a table of one row per cell with every figure of a cell folded under the table,
    then the rest.  A comparison written before the screen gets it from :func:`with_screen`."""
    if comparison.summary.screen is None:
        comparison = with_screen(comparison)
    doc = comparison
    cells = doc.cells
    summary = doc.summary
    screen = summary.screen
    assert screen is not None
    counts = summary.counts
    verdict = doc.verdict.value
    timed_out = [c for c in cells if c.kind is Kind.HEAD_TIMED_OUT]
    late = f" (head timed out: {', '.join(_name(c) for c in timed_out)})" if timed_out else ""
    lines = [
        f"## diskbench: {verdict.upper()}{late}{_headline_changes(doc)} — {_accel_line(doc.accel, doc.machine.get('host_disk'))}",
        "",
    ]
    tally = ", ".join(f"{counts[v.value]} {v.value}" for v in TALLY if counts.get(v.value))
    total = summary.cells if summary.cells is not None else len(cells)
    lines += [f"{total} cell{'s' if total != 1 else ''} ({tally}).", ""]
    seen = kind_line(summary.sensitivity)
    if seen:
        lines += [f"{seen} (a regression this large, alone, fails the gate 4 times in 5).", ""]
    lines += _first_lines(cells, screen)
    if summary.axis_sentence:
        lines += [inert_markdown(summary.axis_sentence), ""]
    lines += _inconclusive_lines(cells, screen.inconclusive, gate=doc.gate)
    lines += _subject_lines(summary)

    def side(label: str | None, rev: str | None) -> str:
        return _code(label or "?") + (f" ({inert_markdown(rev)})" if rev else "")

    lines += [f"base {side(doc.base.label, doc.base.rev)} vs head {side(doc.head.label, doc.head.rev)}", ""]
    for warning in doc.warnings:
        lines += [f"**WARNING: {inert_markdown(warning)}**", ""]

    pages = doc.pages_url
    rows = screen.rows
    if rows:
        lines += [*_table(cells, rows, pages), ""]
        lines += [line for row in rows for line in _fold(cells[row.cell], row, pages)]
    folded = screen.unchanged_rows
    count = counts.get(Verdict.UNCHANGED.value, len(folded))
    if folded:
        lines += [
            f"<details><summary>{count} cell{'s' if count != 1 else ''} unchanged (their figures)</summary>",
            "",
            *_table(cells, folded, pages),
            "",
            *[line for row in folded for line in _fold(cells[row.cell], row, pages)],
            "</details>",
            "",
        ]
    elif rows:
        lines += [f"{count} cell{'s' if count != 1 else ''} unchanged.", ""]
    lines += _information_lines(cells)

    names = _reader_names(cells)
    lines += sensitivity_lines(summary.sensitivity, names, cells, gate=doc.gate)
    if counts.get(Verdict.INCONCLUSIVE.value):
        min_effect = float(doc.settings.min_effect if doc.settings is not None else 0)
        sentence = inconclusive_sentence(
            summary.sensitivity, min_effect=min_effect, names=names, gate=doc.gate, cells=cells
        )
        lines += [sentence, ""]
    if doc.reproduce:
        lines += ["Reproduce it locally:", "", *_shell(doc.reproduce), ""]
    lines += _canary_lines(doc.canary)
    lines += _closing_lines(doc)
    return "\n".join(lines) + "\n"


def _canary_lines(canary: Canary | None) -> list[str]:
    """The host canary's line: its figures, whether it moved and what it voided or kept."""
    lines: list[str] = []
    if canary is not None:
        before, after, change = canary.before_mib_s, canary.after_mib_s, canary.change
        moved = "steady"
        if canary.moved and canary.voided:
            moved = "**MOVED: the time verdicts it could explain set to inconclusive**"
        elif canary.moved:
            moved = (
                "moved, and voids no verdict (samples taken in the same rounds or together, where the "
                "host's move hit both sides alike, or a change beyond or against its move)"
            )
        figures = (
            f"{before:.0f} → {after:.0f} MiB/s ({pct(change)})"
            if before is not None and after is not None and change is not None
            else "not measured"
        )
        lines += [f"Host canary: {figures}: {moved}", ""]
        for ids, what in (
            (canary.voided, "voided (the host's move could explain their change)"),
            (canary.kept, "not voided (a change beyond the host's move, or of a counter)"),
        ):
            if ids:
                lines += [f"Canary {what}: {', '.join(_code(i) for i in ids)}", ""]
    return lines


def _closing_lines(doc: Comparison) -> list[str]:
    """The summary's last lines: the budget a gate used, the machine, the settings, when made."""
    lines: list[str] = []
    budget = doc.budget
    if budget is not None and budget.to_json():
        lines += [
            "Budget: " + ", ".join(f"{inert_markdown(k)} {inert_markdown(v)}" for k, v in budget.items()),
            "",
        ]
    machine = doc.machine
    parts = [
        f"{key} {inert_markdown(machine.get(key))}"
        for key in ("hostname", "cpu", "accel", "qemu_version", "host_kernel", "work_dir_fs")
        if machine.get(key)
    ]
    settings = doc.settings
    lines.append(f"Machine: {', '.join(parts) or 'unknown'}.")
    if settings is not None:
        lines.append(
            f"Settings: minimum effect {float(settings.min_effect) * 100:g}%, "
            f"alpha {settings.alpha} family-wise ({settings.correction}, "
            f"{settings.comparisons} tests), "
            f"{float(settings.confidence) * 100:g}% bootstrap CI "
            f"({settings.bootstrap} resamples, seed {settings.seed}); "
            f"changed {'fails' if settings.changed_fails else 'does not fail'} the gate."
        )
    if doc.created_at:
        lines.append(f"Created {doc.created_at}.")
    return lines


def _shell(argv: Sequence[Any]) -> list[str]:
    return ["```sh", command_line([str(a) for a in argv]).replace("`", "'"), "```"]


def _name(cell: ComparedCell) -> str:
    """The cell's short name, made inert (its id in code when it has none)."""
    title = cell.title
    return inert_markdown(title) if title else "<code>" + inert_markdown(cell.cell_id) + "</code>"


def _first_lines(cells: Sequence[ComparedCell], screen: Screen) -> list[str]:
    """Under the headline: a line per regressed, changed or failed cell; for an unchanged
    comparison, what it could have seen."""
    lines = []
    for entry in screen.first:
        cell = cells[entry.cell]
        m = cell.figure(entry.metric)
        if m is None:
            what = inert_markdown(entry.said or "")
        else:
            ci = _ci_text(m)
            what = f"{_code(m.metric)} **{_change_text(m)}**" + (f" ({ci})" if ci != "-" else "")
        lines.append(f"- **{_name(cell)}**: {what}, {inert_markdown(row_label(cell))}")
    same = screen.unchanged
    if same:
        low, high = same.could_see_low_pct, same.could_see_high_pct
        n = same.cells
        text = f"All {n} cells unchanged" if n != 1 else "The cell is unchanged"
        if low is not None and high is not None:
            span = f"{low:.1f}%" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}% to {high:.1f}% (by cell)"
            text += f": each would have caught a regression of {span} or more 4 times in 5"
        lines.append(f"{text}.")
    return [*lines, ""] if lines else []


def _inconclusive_lines(
    cells: Sequence[ComparedCell], entry: Inconclusive | None, *, gate: bool = True
) -> list[str]:
    """The inconclusive cells and what decides them: the gate's command with its rounds, or the
    samples a comparison of records needs, or why no number can be given (:func:`out_of_reach`)."""
    if not entry:
        return []
    which = [cells[i] for i in entry.cells]
    text = f"**{len(which)} inconclusive**: {', '.join(_name(c) for c in which)}."
    rounds, command = entry.rounds, entry.command
    if command:
        return [f"{text} About {rounds} rounds per side would decide them:", "", *_shell(command), ""]
    if rounds:
        return [
            f"{text} About {rounds} samples per side would decide them: record them "
            f"(`--repeat {rounds}`) and compare again.",
            "",
        ]
    kinds = {
        out_of_reach(m, gate=gate)[0] for c in which for m in c.metrics if m.verdict is Verdict.INCONCLUSIVE
    }
    if kinds == {FEW}:
        more = "run more rounds" if gate else "record more samples (`--repeat`) and compare again"
        return [f"{text} Too few samples for an interval: {more}.", ""]
    return [f"{text} No number of rounds can be given for them: why, under the table.", ""]


_HEADER = "| cell | metric | base | head | change (95% CI) | verdict |"
_FIGURES = "| metric | base | head | change (95% CI) | p | verdict |"
_ALIGN = "| --- | --- | ---: | ---: | ---: | --- |"
_FIGURES_ALIGN = "| --- | ---: | ---: | ---: | ---: | --- |"


def _metric_text(cell: ComparedCell, metric: str, pages: str | None) -> str:
    """A metric's name, a link to its history graph with the pages' URL."""
    text = inert_markdown(metric)
    graph = cell.history.get(metric) if pages else None
    return f"[{text}]({graph_url(pages, graph)})" if pages and isinstance(graph, str) else text


def _median(value: float | None, unit: str) -> str:
    """A median on one line (its number and unit do not break apart); the table's other columns wrap."""
    return inert_markdown(format_value(value, unit)).replace(" ", "&nbsp;")


def _change_cell(m: Figures) -> str:
    ci = _ci_text(m)
    return _change_text(m) + (f"<br><sub>{ci}</sub>" if ci != "-" else "")


def _table(cells: Sequence[ComparedCell], rows: Sequence[Row], pages: str | None) -> list[str]:
    """One row per cell: its lead's figures and its verdict."""
    lines = [_HEADER, _ALIGN]
    for row in rows:
        cell = cells[row.cell]
        m = cell.figure(row.metric)
        figures = ["-"] * 4
        if m is not None:
            figures = [
                _metric_text(cell, m.metric, pages),
                _median(m.median_base, m.unit),
                _median(m.median_head, m.unit),
                _change_cell(m),
            ]
        lines.append("| " + " | ".join([_name(cell), *figures, inert_markdown(row.label)]) + " |")
    return lines


def _fold(cell: ComparedCell, row: Row, pages: str | None) -> list[str]:
    """A cell's every figure, its full id (base's too when it differs), its reason and note."""
    figures = row.figures
    rounds = cell.rounds
    lines = [
        f"<details><summary>{_name(cell)}: {len(figures) or 'no'} figure{'s' if len(figures) != 1 else ''}, "
        f"{rounds} round{'s' if rounds != 1 else ''}, id and reason</summary>",
        "",
        _ids(cell),
        "",
    ]
    if figures:
        lines += [_FIGURES, _FIGURES_ALIGN]
        for figure in figures:
            m = cell.figure(figure.metric)
            cols = (
                [
                    _metric_text(cell, m.metric, pages),
                    _median(m.median_base, m.unit),
                    _median(m.median_head, m.unit),
                    _change_cell(m),
                    inert_markdown(format_p(m.p_value)),
                ]
                if m is not None
                else [inert_markdown(None), "-", "-", "n/a", "-"]
            )
            lines.append("| " + " | ".join([*cols, inert_markdown(figure.label)]) + " |")
        lines.append("")
    if cell.reason:
        lines += [f"Why: {inert_markdown(cell.reason)}", ""]
    if cell.note:
        lines += [f"Counters: {inert_markdown(cell.note)}", ""]
    return [*lines, "</details>", ""]


def _ids(cell: ComparedCell) -> str:
    """``policy-dd: <code>id</code> (base: <code>id</code>)``: the cell's full id(s)."""
    ids = "<code>" + inert_markdown(cell.cell_id) + "</code>"
    if cell.cell.gate_name:
        ids = f"{inert_markdown(cell.cell.gate_name)}: {ids}"
    base_id = cell.cell.base_id
    if base_id and base_id != cell.cell_id:
        ids += " (base: <code>" + inert_markdown(base_id) + "</code>)"
    return ids


def _cell_name(cell: ComparedCell) -> str:
    """The cell's id, and base's id too when the sides' ids differ (a policy change renames cells)."""
    base_id = cell.cell.base_id
    cell_id = cell.cell_id
    return f"{cell_id} (base: {base_id})" if base_id and base_id != cell_id else cell_id


def _headline_changes(doc: Comparison) -> str:
    """What the first line says beside the verdict: the counters that changed, and where.

    ``CHANGED: host.flushes -100.0% in policy-fio``; beside another verdict
    ``REGRESSION (and changed: ...)``.
    """
    changed = doc.summary.changed
    if not changed:
        return ""
    parts = []
    for entry in changed[:3]:
        # "host.flushes -100.0% (1901 → 0)" -> "host.flushes -100.0%"
        counters = ", ".join(str(c).split(" (")[0] for c in entry.counters)
        parts.append(f"{counters} in {entry.name or entry.cell_id}")
    text = inert_markdown("; ".join(parts)) + (
        f" and {len(changed) - 3} more cells" if len(changed) > 3 else ""
    )
    if doc.verdict is not Verdict.CHANGED:
        return f" (and changed: {text})"
    if not doc.summary.fails:
        text += " (does not fail: changed_fails = false)"
    return f": {text}"


def _subject_lines(summary: Summary) -> list[str]:
    """What differs between base and head, before any table."""
    diff = summary.subject_diff
    if diff is None:
        return []
    lines = ["### What differs between base and head"]
    if not diff:
        lines.append("- no difference of policy, guest recipe or QEMU (the change is elsewhere)")
    lines += [f"- {inert_markdown(diff_line(entry))}" for entry in diff]
    lines += [
        f"- cell {_code(entry.name)}: base {_code(entry.base_id)} → head {_code(entry.head_id)}"
        for entry in summary.cell_id_changes
    ]
    held = held_lines(summary)
    if held:
        lines += [
            "",
            "Policy values some cells cannot take (QEMU refuses them with the cell's own axes): such a "
            "cell keeps the fallback, on both sides alike",
            *[f"- {inert_markdown(line)}" for line in held],
        ]
    return [*lines, ""]


def _reader_names(cells: Sequence[ComparedCell]) -> dict[str, str]:
    """Cell id -> the name a sentence uses: the gate spec's name of the cell, else its short name."""
    return {c.cell_id: str(c.cell.gate_name or c.title or c.cell_id) for c in cells}
