"""The summary of a comparison document in markdown (a pull request comment, a terminal)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.pointers import command_line, graph_url, inconclusive_sentence
from harness.compare.power import MAX_ROUNDS
from harness.compare.screen import row_label, with_screen
from harness.compare.subject import diff_line, held_lines
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
        lines.append("| " + " | ".join([_name(cell), *(inert_markdown(t) for t in texts)]) + " |")
    return [*lines, "", "</details>", ""]


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
    """The summary of a comparison document, for a pull request comment or a terminal.

    In the order of the comment (``summary.screen``, :mod:`harness.compare.screen`): the
    headline, one line per regressed, changed or failed cell (or what an unchanged comparison
    could have seen), the axis sentence, the inconclusive cells and what decides them, what
    differs, a table of one row per cell with every figure of a cell folded under the table,
    then the rest.  A document written before the screen gets it from :func:`with_screen`."""
    if not isinstance((doc.get("summary") or {}).get("screen"), Mapping):
        doc = with_screen(doc)
    cells: list[Mapping[str, Any]] = list(doc.get("cells") or [])
    summary = doc.get("summary") or {}
    screen: Mapping[str, Any] = summary["screen"]
    counts: Mapping[str, int] = summary.get("counts") or {}
    verdict = str(doc.get("verdict", "?"))
    accel = str(doc.get("accel", "unknown"))
    timed_out = [c for c in cells if c.get("kind") == Kind.HEAD_TIMED_OUT.value]
    late = f" (head timed out: {', '.join(_name(c) for c in timed_out)})" if timed_out else ""
    lines = [f"## diskbench: {verdict.upper()}{late}{_headline_changes(doc)} — {_accel_line(accel)}", ""]
    tally = ", ".join(f"{counts[v.value]} {v.value}" for v in Verdict if counts.get(v.value))
    total = int(summary.get("cells", len(cells)))
    lines += [f"{total} cell{'s' if total != 1 else ''} ({tally}).", ""]
    seen = kind_line(summary.get("sensitivity") or [])
    if seen:
        lines += [f"{seen} (a regression this large, alone, fails the gate 4 times in 5).", ""]
    lines += _first_lines(cells, screen)
    axis = summary.get("axis_sentence")
    if axis:
        lines += [inert_markdown(axis), ""]
    lines += _inconclusive_lines(cells, screen.get("inconclusive"))
    lines += _subject_lines(summary)
    base, head = doc.get("base") or {}, doc.get("head") or {}

    def side(info: Mapping[str, Any]) -> str:
        label = info.get("label") or "?"
        rev = info.get("rev")
        return _code(label) + (f" ({inert_markdown(rev)})" if rev else "")

    lines += [f"base {side(base)} vs head {side(head)}", ""]
    for warning in doc.get("warnings") or []:
        lines += [f"**WARNING: {inert_markdown(warning)}**", ""]

    pages = doc.get("pages_url") if isinstance(doc.get("pages_url"), str) else None
    rows: list[Mapping[str, Any]] = list(screen.get("rows") or [])
    if rows:
        lines += [*_table(cells, rows, pages), ""]
        lines += [line for row in rows for line in _fold(cells[row["cell"]], row, pages)]
    folded: list[Mapping[str, Any]] = list(screen.get("unchanged_rows") or [])
    count = counts.get(Verdict.UNCHANGED.value, len(folded))
    if folded:
        lines += [
            f"<details><summary>{count} cell{'s' if count != 1 else ''} unchanged (their figures)</summary>",
            "",
            *_table(cells, folded, pages),
            "",
            *[line for row in folded for line in _fold(cells[row["cell"]], row, pages)],
            "</details>",
            "",
        ]
    elif rows:
        lines += [f"{count} cell{'s' if count != 1 else ''} unchanged.", ""]
    lines += _information_lines(cells)

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
    reproduce = doc.get("reproduce")
    if reproduce:
        lines += ["Reproduce it locally:", "", *_shell(reproduce), ""]
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


def _shell(argv: Sequence[Any]) -> list[str]:
    return ["```sh", command_line([str(a) for a in argv]).replace("`", "'"), "```"]


def _name(cell: Mapping[str, Any]) -> str:
    """The cell's short name, made inert (its id in code when it has none)."""
    title = cell.get("title")
    return inert_markdown(title) if title else "<code>" + inert_markdown(cell.get("cell_id")) + "</code>"


def _figure(cell: Mapping[str, Any], metric: Any) -> Mapping[str, Any] | None:
    if metric is None:
        return None
    return next(
        (
            m
            for m in (*(cell.get("metrics") or []), *(cell.get("counters") or []))
            if m.get("metric") == metric
        ),
        None,
    )


def _first_lines(cells: Sequence[Mapping[str, Any]], screen: Mapping[str, Any]) -> list[str]:
    """Under the headline: a line per regressed, changed or failed cell; for an unchanged
    comparison, what it could have seen."""
    lines = []
    for entry in screen.get("first") or []:
        cell = cells[entry["cell"]]
        m = _figure(cell, entry.get("metric"))
        if m is None:
            what = inert_markdown(entry.get("said") or "")
        else:
            ci = _ci_text(m)
            what = f"{_code(m.get('metric'))} **{_change_text(m)}**" + (f" ({ci})" if ci != "-" else "")
        lines.append(f"- **{_name(cell)}**: {what}, {inert_markdown(row_label(cell))}")
    same = screen.get("unchanged")
    if same:
        low, high = same.get("could_see_low_pct"), same.get("could_see_high_pct")
        n = int(same.get("cells") or 0)
        text = f"All {n} cells unchanged" if n != 1 else "The cell is unchanged"
        if low is not None and high is not None:
            span = f"{low:.1f}%" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}% to {high:.1f}% (by cell)"
            text += f": each would have caught a regression of {span} or more 4 times in 5"
        lines.append(f"{text}.")
    return [*lines, ""] if lines else []


def _inconclusive_lines(cells: Sequence[Mapping[str, Any]], entry: Mapping[str, Any] | None) -> list[str]:
    """The inconclusive cells and what decides them: the gate's command with its rounds, or the
    samples a comparison of records needs."""
    if not entry:
        return []
    which = [cells[i] for i in entry.get("cells") or []]
    text = f"**{len(which)} inconclusive**: {', '.join(_name(c) for c in which)}."
    rounds, command = entry.get("rounds"), entry.get("command")
    if command:
        return [f"{text} About {rounds} rounds per side would decide them:", "", *_shell(command), ""]
    if rounds:
        return [
            f"{text} About {rounds} samples per side would decide them: record them "
            f"(`--repeat {rounds}`) and compare again.",
            "",
        ]
    return [f"{text} More rounds would not decide them (see why under the table).", ""]


_HEADER = "| cell | metric | base | head | change (95% CI) | verdict |"
_FIGURES = "| metric | base | head | change (95% CI) | p | verdict |"
_ALIGN = "| --- | --- | ---: | ---: | ---: | --- |"
_FIGURES_ALIGN = "| --- | ---: | ---: | ---: | ---: | --- |"


def _metric_text(cell: Mapping[str, Any], metric: Any, pages: str | None) -> str:
    """A metric's name, a link to its history graph with the pages' URL."""
    text = inert_markdown(metric)
    graph = (cell.get("history") or {}).get(metric) if pages else None
    return f"[{text}]({graph_url(pages, graph)})" if pages and isinstance(graph, str) else text


def _median(value: Any, unit: str) -> str:
    """A median on one line (its number and unit do not break apart); the table's other columns wrap."""
    return inert_markdown(format_value(value, unit)).replace(" ", "&nbsp;")


def _change_cell(m: Mapping[str, Any]) -> str:
    ci = _ci_text(m)
    return _change_text(m) + (f"<br><sub>{ci}</sub>" if ci != "-" else "")


def _table(
    cells: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], pages: str | None
) -> list[str]:
    """One row per cell: its lead's figures and its verdict."""
    lines = [_HEADER, _ALIGN]
    for row in rows:
        cell = cells[row["cell"]]
        m = _figure(cell, row.get("metric"))
        figures = ["-"] * 4
        if m is not None:
            unit = str(m.get("unit", ""))
            figures = [
                _metric_text(cell, m.get("metric"), pages),
                _median(m.get("median_base"), unit),
                _median(m.get("median_head"), unit),
                _change_cell(m),
            ]
        lines.append("| " + " | ".join([_name(cell), *figures, inert_markdown(row.get("label"))]) + " |")
    return lines


def _fold(cell: Mapping[str, Any], row: Mapping[str, Any], pages: str | None) -> list[str]:
    """A cell's every figure, its full id (base's too when it differs), its reason and note."""
    figures = list(row.get("figures") or [])
    rounds = cell.get("rounds", 0)
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
            m = _figure(cell, figure.get("metric")) or {}
            unit = str(m.get("unit", ""))
            cols = [
                _metric_text(cell, m.get("metric"), pages),
                _median(m.get("median_base"), unit),
                _median(m.get("median_head"), unit),
                _change_cell(m),
                inert_markdown(format_p(m.get("p_value"))),
                inert_markdown(figure.get("label")),
            ]
            lines.append("| " + " | ".join(cols) + " |")
        lines.append("")
    if cell.get("reason"):
        lines += [f"Why: {inert_markdown(cell.get('reason'))}", ""]
    if cell.get("note"):
        lines += [f"Counters: {inert_markdown(cell.get('note'))}", ""]
    return [*lines, "</details>", ""]


def _ids(cell: Mapping[str, Any]) -> str:
    """``policy-dd: <code>id</code> (base: <code>id</code>)``: the cell's full id(s)."""
    ids = "<code>" + inert_markdown(cell.get("cell_id")) + "</code>"
    gate_name = (cell.get("cell") or {}).get("gate_name")
    if gate_name:
        ids = f"{inert_markdown(gate_name)}: {ids}"
    base_id = (cell.get("cell") or {}).get("base_id")
    if base_id and base_id != cell.get("cell_id"):
        ids += " (base: <code>" + inert_markdown(base_id) + "</code>)"
    return ids


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
    held = held_lines(summary)
    if held:
        lines += [
            "",
            "Policy values some cells cannot take (QEMU refuses them with the cell's own axes): such a "
            "cell keeps the fallback, on both sides alike",
            *[f"- {inert_markdown(line)}" for line in held],
        ]
    return [*lines, ""]


def _reader_names(cells: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Cell id -> the name a sentence uses: the gate spec's name of the cell, else its short name."""
    return {
        str(c.get("cell_id")): str(
            (c.get("cell") or {}).get("gate_name") or c.get("title") or c.get("cell_id")
        )
        for c in cells
    }
