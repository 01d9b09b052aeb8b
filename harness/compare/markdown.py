"""The summary of a comparison document in markdown (a pull request comment, a terminal)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.pointers import command_line, graph_url, inconclusive_sentence
from harness.compare.power import MAX_ROUNDS
from harness.compare.subject import diff_line
from harness.compare.text import format_p, format_value, pct
from harness.compare.verdict import Kind, Verdict
from harness.untrusted import inert_markdown


def _code(text: Any) -> str:
    """Text for a code span outside tables (no escapes work inside one)."""
    return "`" + str(text).replace("`", "'").replace("\n", " ") + "`"


def _accel_line(accel: str) -> str:
    if accel == "tcg":
        return "**under TCG (emulation): times are about QEMU's emulation, not the disk**"
    if accel == "kvm":
        return "under KVM"
    return f"**accelerator {accel}: unknown, read the times with care**"


def _ci_text(m: Mapping[str, Any]) -> str:
    lo, hi = m.get("ci_low_pct"), m.get("ci_high_pct")
    if lo is None or hi is None:
        return "-"
    return f"{lo:+.1f}% … {hi:+.1f}%"


def _change_text(m: Mapping[str, Any]) -> str:
    change = m.get("change_pct")
    if change is None:
        return "n/a" if m.get("median_base") is None or m.get("median_head") is None else "+inf%"
    measured = m.get("measured_change_pct")
    if isinstance(measured, int | float) and float(m.get("shrink") or 1.0) != 1.0:
        # a guest pair's change taken together, scaled to its size alone (at worst)
        return f"{change:+.1f}% alone ({measured:+.1f}% together)"
    return f"{change:+.1f}%"


def kind_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line of what the gate could have seen per kind of cell (guest, replay): the range over
    its cells of each one's most sensitive gated metric."""
    best: dict[tuple[str, str], float] = {}
    for row in rows:
        seen = row.get("could_see_pct")
        if not isinstance(seen, int | float):
            continue
        key = (str(row.get("measure") or "guest"), str(row.get("cell_id")))
        best[key] = min(best.get(key, math.inf), float(seen))
    parts = []
    for kind in ("guest", "replay"):
        values = sorted(v for (k, _cell), v in best.items() if k == kind)
        if not values:
            continue
        span = f"{values[0]:.1f}%" if len(values) == 1 else f"{values[0]:.1f}–{values[-1]:.1f}%"
        parts.append(f"{len(values)} {kind} cell{'s' if len(values) != 1 else ''} ≥ {span}")
    return "Could see: " + "; ".join(parts) if parts else ""


def _out_of_reach(row: Mapping[str, Any]) -> str:
    """Why more rounds give an inconclusive metric no number: no interval yet, a change on the
    edge of the minimum effect, or one that would take more rounds than are worth a number."""
    change, effect = row.get("change_pct"), row.get("min_effect")
    if row.get("ci_low") is None or not isinstance(change, int | float):
        return f"has too few samples for an interval ({row.get('n_base')} + {row.get('n_head')}): run more rounds"
    edge = math.log1p(float(effect)) if isinstance(effect, int | float) and effect > 0 else 0.0
    size = abs(math.log1p(change / 100.0)) if change > -100.0 else math.inf
    if edge and abs(size - edge) <= 0.25 * edge:
        return "is not within reach of more rounds (its change sits on the minimum effect)"
    return f"would need more than {MAX_ROUNDS} rounds at this spread"


def sensitivity_lines(rows: Sequence[Mapping[str, Any]], names: Mapping[str, str] | None = None) -> list[str]:
    """What each cell could have seen (its most sensitive gated metric), and the rounds an
    inconclusive cell would need: the summary's first lines.  ``names``: cell id -> the name to
    show (:func:`_reader_names`), else the row's own."""
    best: dict[str, Mapping[str, Any]] = {}
    need: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        name = (names or {}).get(str(row.get("cell_id")), str(row.get("name")))
        seen = row.get("could_see_pct")
        if isinstance(seen, int | float) and (name not in best or seen < best[name]["could_see_pct"]):
            best[name] = row
        if row.get("verdict") == Verdict.INCONCLUSIVE.value:
            known = need.get(name)
            more = row.get("rounds_to_decide")
            if known is None or (more is not None and (known.get("rounds_to_decide") or 10**9) > more):
                need[name] = row
    if not best and not need:
        return []
    lines = []
    if best:
        lines.append(
            "Could see (a regression this large fails the gate 4 times in 5): "
            + "; ".join(
                f"{_code(name)} ≥ {row['could_see_pct']:.1f}% ({inert_markdown(row.get('metric'))}, "
                f"{row.get('rounds')} rounds)"
                for name, row in best.items()
            )
        )
    if need:
        lines.append(
            "Inconclusive: "
            + "; ".join(
                f"{_code(name)} "
                + (
                    f"would need about {row['rounds_to_decide']} rounds (has {row.get('rounds')})"
                    if row.get("rounds_to_decide")
                    else _out_of_reach(row)
                )
                for name, row in need.items()
            )
        )
    return [*lines, ""]


def render_markdown(doc: Mapping[str, Any]) -> str:
    """The summary of a comparison document, for a pull request comment or a terminal."""
    cells: list[Mapping[str, Any]] = list(doc.get("cells") or [])
    summary = doc.get("summary") or {}
    counts: Mapping[str, int] = summary.get("counts") or {}
    verdict = str(doc.get("verdict", "?"))
    accel = str(doc.get("accel", "unknown"))
    timed_out = [c for c in cells if c.get("kind") == Kind.HEAD_TIMED_OUT.value]
    late = (
        f" (head timed out: {inert_markdown(', '.join(_cell_name(c) for c in timed_out))})"
        if timed_out
        else ""
    )
    lines = [f"## diskbench: {verdict.upper()}{late}{_headline_changes(doc)} — {_accel_line(accel)}", ""]
    tally = ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict if counts.get(v.value))
    base, head = doc.get("base") or {}, doc.get("head") or {}

    def side(info: Mapping[str, Any]) -> str:
        label = info.get("label") or "?"
        rev = info.get("rev")
        return _code(label) + (f" ({inert_markdown(rev)})" if rev else "")

    lines.append(
        f"base {side(base)} vs head {side(head)}: {summary.get('cells', len(cells))} cells ({tally})"
    )
    lines.append("")
    seen = kind_line(summary.get("sensitivity") or [])
    if seen:
        lines += [f"{seen} (a regression this large, alone, fails the gate 4 times in 5)", ""]
    names = _reader_names(cells)
    lines += sensitivity_lines(summary.get("sensitivity") or [], names)
    if counts.get(Verdict.INCONCLUSIVE.value):
        min_effect = float((doc.get("settings") or {}).get("min_effect") or 0)
        reproduce = doc.get("reproduce") or []
        gate = reproduce[1:2] == ["gate"] if reproduce else doc.get("budget") is not None
        sentence = inconclusive_sentence(
            summary.get("sensitivity") or [], min_effect=min_effect, names=names, gate=gate
        )
        lines += [sentence, ""]
    for warning in doc.get("warnings") or []:
        lines += [f"**WARNING: {inert_markdown(warning)}**", ""]
    lines += _subject_lines(summary)

    changed = [c for c in cells if c.get("verdict") != Verdict.UNCHANGED.value]
    pages = doc.get("pages_url") if isinstance(doc.get("pages_url"), str) else None
    if changed:
        lines += [*_table([row for cell in changed for row in _changed_rows(cell)], pages), ""]
    unchanged = [c for c in cells if c.get("verdict") == Verdict.UNCHANGED.value]
    count = counts.get(Verdict.UNCHANGED.value, len(unchanged))
    if unchanged:
        rows = [(cell, m, Verdict.UNCHANGED.value) for cell in unchanged for m in cell.get("metrics") or []]
        lines += [
            f"<details><summary>{count} cell{'s' if count != 1 else ''} unchanged (their figures)</summary>",
            "",
            *_table(rows, pages),
            "",
            "</details>",
            "",
        ]
    else:
        lines += [f"{count} cell{'s' if count != 1 else ''} unchanged.", ""]

    lines += _information_lines(cells)
    axis = summary.get("axis_sentence")
    if axis:
        lines += [inert_markdown(axis), ""]
    explained = [c for c in changed if c.get("verdict") != Verdict.ERROR.value and c.get("reason")]
    if explained:
        lines.append("### Why")
        lines += [f"- {_title_and_id(c)}: {inert_markdown(c.get('reason'))}" for c in explained]
        lines.append("")
    errors = [c for c in cells if c.get("verdict") == Verdict.ERROR.value]
    if errors:
        lines.append("### Errors")
        lines += [
            f"- {_title_and_id(c)} ({c.get('kind')}): {inert_markdown(c.get('reason'))}" for c in errors
        ]
        lines.append("")
    notes = [c for c in cells if c.get("note")]
    if notes:
        lines.append("### Counters")
        lines += [f"- {_title_and_id(c)}: {inert_markdown(c.get('note'))}" for c in notes]
        lines.append("")
    reproduce = doc.get("reproduce")
    if reproduce:
        lines += ["Reproduce it locally:", "", "```sh", command_line(reproduce).replace("`", "'"), "```", ""]
    canary = doc.get("canary")
    if canary:
        before, after = canary.get("before_mib_s"), canary.get("after_mib_s")
        change = canary.get("change")
        moved = "steady"
        if canary.get("moved") and canary.get("voided"):
            moved = "**MOVED: the time verdicts it could explain set to inconclusive**"
        elif canary.get("moved"):
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
        for key, what in (
            ("voided", "voided (the host's move could explain their change)"),
            ("kept", "not voided (a change beyond the host's move, or of a counter)"),
        ):
            ids = canary.get(key) or []
            if ids:
                lines += [f"Canary {what}: {', '.join(_code(i) for i in ids)}", ""]
    budget = doc.get("budget")
    if budget:
        lines += [
            "Budget: " + ", ".join(f"{inert_markdown(k)} {inert_markdown(v)}" for k, v in budget.items()),
            "",
        ]
    machine = doc.get("machine") or {}
    parts = [
        f"{key} {inert_markdown(machine[key])}"
        for key in ("hostname", "cpu", "accel", "qemu_version", "host_kernel", "work_dir_fs")
        if machine.get(key)
    ]
    settings = doc.get("settings") or {}
    lines.append(f"Machine: {', '.join(parts) or 'unknown'}.")
    if settings:
        lines.append(
            f"Settings: minimum effect {float(settings.get('min_effect', 0)) * 100:g}%, "
            f"alpha {settings.get('alpha')} family-wise ({settings.get('correction', 'bonferroni')}, "
            f"{settings.get('comparisons', 1)} tests), "
            f"{float(settings.get('confidence', 0)) * 100:g}% bootstrap CI "
            f"({settings.get('bootstrap')} resamples, seed {settings.get('seed')}); "
            f"changed {'fails' if settings.get('changed_fails', True) else 'does not fail'} the gate."
        )
    created = doc.get("created_at")
    if created:
        lines.append(f"Created {created}.")
    return "\n".join(lines) + "\n"


def _information_lines(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """The figures shown but not gated, per cell, each with why (folded: they decide nothing)."""
    rows = [(c, m) for c in cells for m in c.get("information") or []]
    if not rows:
        return []
    lines = [
        f"<details><summary>{len(rows)} figures shown, not gated (they decide nothing)</summary>",
        "",
        "| cell | metric | change | CI | why not gated |",
        "| --- | --- | --- | --- | --- |",
    ]
    for cell, m in rows:
        texts = [m.get("metric"), _change_text(m), _ci_text(m), m.get("information")]
        lines.append("| " + " | ".join([_cell_label(cell), *(inert_markdown(t) for t in texts)]) + " |")
    return [*lines, "", "</details>", ""]


def _cell_name(cell: Mapping[str, Any]) -> str:
    """The cell's id, and base's id too when the sides' ids differ (a policy change renames cells)."""
    base_id = (cell.get("cell") or {}).get("base_id")
    cell_id = str(cell.get("cell_id"))
    return f"{cell_id} (base: {base_id})" if base_id and base_id != cell_id else cell_id


def _headline_changes(doc: Mapping[str, Any]) -> str:
    """What the first line says beside the verdict: the counters that changed, and where.

    ``CHANGED: host.flushes -100.0% in policy-fio``; beside another verdict
    ``REGRESSION (and changed: ...)``.
    """
    summary = doc.get("summary") or {}
    changed = summary.get("changed") or []
    if not changed:
        return ""
    parts = []
    for entry in changed[:3]:
        # "host.flushes -100.0% (1901 → 0)" -> "host.flushes -100.0%"
        counters = ", ".join(str(c).split(" (")[0] for c in entry.get("counters") or [])
        parts.append(f"{counters} in {entry.get('name') or entry.get('cell_id')}")
    text = inert_markdown("; ".join(parts)) + (
        f" and {len(changed) - 3} more cells" if len(changed) > 3 else ""
    )
    if doc.get("verdict") != Verdict.CHANGED.value:
        return f" (and changed: {text})"
    if not summary.get("fails", True):
        text += " (does not fail: changed_fails = false)"
    return f": {text}"


def _subject_lines(summary: Mapping[str, Any]) -> list[str]:
    """What differs between base and head, before any table."""
    diff = summary.get("subject_diff")
    renamed = summary.get("cell_id_changes") or []
    if diff is None:
        return []
    lines = ["### What differs between base and head"]
    if not diff:
        lines.append("- no difference of policy, guest recipe or QEMU (the change is elsewhere)")
    lines += [f"- {inert_markdown(diff_line(entry))}" for entry in diff]
    lines += [
        f"- cell {_code(entry.get('name'))}: base {_code(entry.get('base_id'))} → head {_code(entry.get('head_id'))}"
        for entry in renamed
    ]
    return [*lines, ""]


def _row_label(cell: Mapping[str, Any], m: Mapping[str, Any], label: str) -> str:
    """A table row's verdict: the cell's label where the metric gave it, else the metric's own."""
    verdict = m.get("verdict")
    counters = [c.get("metric") for c in cell.get("counters") or []]
    if m.get("metric") in counters and verdict in (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value):
        return Verdict.CHANGED.value
    if verdict == cell.get("verdict") or cell.get("kind") not in (Kind.METRIC.value, Kind.COUNTER.value):
        return label
    beyond = _beyond(m)
    if verdict == Verdict.INCONCLUSIVE.value and beyond and cell.get("verdict") in _DECIDED:
        return f"{beyond} beyond {float(m.get('min_effect', 0)) * 100:g}%, not yet significant alone"
    return str(verdict)


# the cell verdicts that more rounds would not change: a metric's row says its own figures
_DECIDED = (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value, Verdict.CHANGED.value)


def _beyond(m: Mapping[str, Any]) -> str:
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


Row = tuple[Mapping[str, Any], Mapping[str, Any] | None, str]
_HEADER = ["cell", "metric", "base", "head", "change", "CI", "p", "rounds", "verdict"]


def _changed_rows(cell: Mapping[str, Any]) -> list[Row]:
    """The rows of a cell that is not unchanged: its metrics that moved (all, if none did) and
    the structural counters that moved (the figures behind ``changed``)."""
    label = str(cell.get("verdict", "?"))
    kind = cell.get("kind")
    if kind not in (None, Kind.METRIC.value):
        label = f"{label} ({kind})"
    metrics: list[Mapping[str, Any]] = list(cell.get("metrics") or [])
    rows = [m for m in metrics if m.get("verdict") != Verdict.UNCHANGED.value] or metrics
    rows += [
        m
        for m in cell.get("counters") or []
        if m.get("verdict") in (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value)
    ]
    if not rows:
        return [(cell, None, label)]
    # each row says its own metric's verdict; a counter that moved is the cell's change
    return [(cell, m, _row_label(cell, m, label)) for m in rows]


def _table(rows: Sequence[Row], pages: str | None) -> list[str]:
    """The table of ``rows``; with the history pages' URL, a column of links to each graph."""
    header = [*_HEADER, "history"] if pages else _HEADER
    lines = ["| " + " | ".join(header) + " |", "| --- | --- | --- | --- | --- | --- | --- | ---: | --- |"]
    if pages:
        lines[1] += " --- |"
    for cell, m, label in rows:
        figures: list[Any] = ["-"] * 6
        if m is not None:
            unit = str(m.get("unit", ""))
            figures = [
                m.get("metric"),
                format_value(m.get("median_base"), unit),
                format_value(m.get("median_head"), unit),
                _change_text(m),
                _ci_text(m),
                format_p(m.get("p_value")),
            ]
        texts = [inert_markdown(x) for x in (*figures, cell.get("rounds", 0), label)]
        if pages:
            graph = (cell.get("history") or {}).get(m.get("metric")) if m is not None else None
            texts.append(f"[graph]({graph_url(pages, graph)})" if isinstance(graph, str) else "-")
        lines.append("| " + " | ".join([_cell_label(cell), *texts]) + " |")
    return lines


def _reader_names(cells: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Cell id -> the name a sentence uses: the gate spec's name of the cell, else its short name."""
    return {
        str(c.get("cell_id")): str(
            (c.get("cell") or {}).get("gate_name") or c.get("title") or c.get("cell_id")
        )
        for c in cells
    }


def _cell_label(cell: Mapping[str, Any]) -> str:
    """A table's cell column: the short name, the full id under it (base's too when it differs)."""
    ids = "<code>" + inert_markdown(cell.get("cell_id")) + "</code>"
    gate_name = (cell.get("cell") or {}).get("gate_name")
    if gate_name:
        ids = f"{inert_markdown(gate_name)}: {ids}"
    base_id = (cell.get("cell") or {}).get("base_id")
    if base_id and base_id != cell.get("cell_id"):
        ids += " (base: <code>" + inert_markdown(base_id) + "</code>)"
    return f"{inert_markdown(cell.get('title') or cell.get('cell_id'))}<br><sub>{ids}</sub>"


def _title_and_id(cell: Mapping[str, Any]) -> str:
    """``qcow2 writeback ide · dd 64M (`qcow2-off-...`)`` for a line of a list."""
    title = cell.get("title")
    return f"{inert_markdown(title)} ({_code(cell.get('cell_id'))})" if title else _code(cell.get("cell_id"))
