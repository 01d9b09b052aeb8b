"""What ``diskbench show`` prints: each cell's figures as an aligned table, as Markdown, or as JSON.

Pure: records in, text out.  Text and Markdown scale the values for a person
(:func:`harness.units.human`); JSON keeps the raw values of every sample.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
from collections.abc import Sequence
from typing import Any

from harness.compare.samplestats import Stats
from harness.errors import HarnessError, UsageError
from harness.record import Record, Sample
from harness.report.summary import legend, render_summary
from harness.report.tables import metric_order, render_time_split
from harness.units import PLAIN, Style, human, table
from harness.untrusted import clean_line, inert_markdown
from harness.workloads import metric_info

FORMATS = ("text", "markdown", "json")


def unit_of(name: str) -> str:
    try:
        return metric_info(name).unit
    except HarnessError:
        return ""


def select_metrics(records: Sequence[Record], patterns: Sequence[str]) -> list[str] | None:
    """The metric names matching any glob of ``patterns`` (None: all); a glob that matches no
    metric of any record is a :class:`UsageError` naming a few that exist."""
    if not patterns:
        return None
    names = list(dict.fromkeys(n for r in records for n in metric_order(r)))
    chosen: list[str] = []
    for pattern in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            close = difflib.get_close_matches(pattern, names, n=3, cutoff=0.5)
            example = ", ".join(close or names[:4]) or "none"
            raise UsageError(
                f"--metric {pattern!r} matches no metric of these records: "
                + (f"did you mean {example}?" if close else f"names look like {example}")
            )
        chosen += hits
    return list(dict.fromkeys(chosen))


def _ok(record: Record) -> list[Sample]:
    return record.ok


def _rows(record: Record, metrics: Sequence[str] | None, samples: bool) -> list[list[str]]:
    """One row per shown metric: name, median ± spread, min, max, n (and each sample's value)."""
    rows = []
    for name in _names(record, metrics):
        values = _values(record, name)
        unit = unit_of(name)
        stats = Stats.of(values)
        row = [
            name,
            _figure(values, unit),
            human(stats.min, unit) if values else "-",
            human(stats.max, unit) if values else "-",
            str(stats.n),
        ]
        if samples:
            row += _sample_cells(record, name, unit)
        rows.append(row)
    return rows


def _names(record: Record, wanted: Sequence[str] | None) -> list[str]:
    names = metric_order(record)
    return names if wanted is None else [n for n in names if n in wanted]


def _values(record: Record, name: str) -> list[float]:
    return [float(s.metrics[name]) for s in _ok(record) if name in s.metrics]


def _figure(values: Sequence[float], unit: str) -> str:
    """``"15.50 s ± 3.2%"``: the median in its unit and the spread; ``(n=1)`` when there is none."""
    stats = Stats.of(values)
    if not values:
        return "-"
    head = human(stats.median, unit)
    return f"{head} (n=1)" if stats.n < 2 else f"{head} ± {stats.cv_pct:.1f}%"


def _sample_cells(record: Record, name: str, unit: str) -> list[str]:
    cells = []
    for sample in record.samples:
        if not sample.ok:
            cells.append("failed")
        else:
            value = sample.metrics.get(name)
            cells.append("-" if value is None else human(float(value), unit))
    return cells


def _heading(record: Record) -> str:
    """``CELL_ID  2/2 ok, tcg, guest RAM 256 MiB, 1 vCPU``: within 100 columns for the ids a run makes."""
    vm = record.vm
    return (
        f"{record.cell.id}  {len(_ok(record))}/{len(record.samples)} ok, "
        f"{vm.get('accel', '?')}, guest RAM {vm.get('mem_mib', '?')} MiB, {vm.get('smp', '?')} vCPU"
    )


def render_text(
    records: Sequence[Record],
    *,
    metrics: Sequence[str] | None = None,
    samples: bool = False,
    style: Style = PLAIN,
    every: bool = False,
) -> str:
    """The summary (a line per cell with its workload's headline figures) and where the time
    went; with ``every`` (``--all``), ``metrics`` or ``samples`` first one aligned table per
    cell (metric, median ± spread, min, max, n; with ``samples`` every sample's value), its
    failed samples under it, and a legend of the counters that need one."""
    if not (every or metrics is not None or samples):
        return render_summary(records, style=style) + render_time_split(records)
    lines: list[str] = []
    shown: list[str] = []
    for record in records:
        lines.append(style(clean_line(_heading(record)), "bold"))
        header = ["metric", "median ± spread", "min", "max", "n"]
        count = len(record.samples)
        if samples:
            header += [f"#{_index(s, i)}" for i, s in enumerate(record.samples)]
        rows = _rows(record, metrics, samples)
        shown += [row[0] for row in rows]
        if rows:
            numeric = {2, 3, 4, *range(5, 5 + (count if samples else 0))}
            lines += ["  " + line for line in table(header, rows, numeric=numeric)]
        for sample in record.samples:
            if not sample.ok:
                reason = clean_line(str("?" if sample.reason is None else sample.reason))
                lines.append(style(f"  sample {sample.index}: FAILED: {reason}", "red"))
                lines.append(f"    console: {sample.logs.get('console', '-')}")
        lines.append("")
    lines += legend(shown)
    text = "\n".join(lines).rstrip() + "\n"
    if len(records) > 1:
        text += "\n" + render_summary(records, style=style)
    return text + render_time_split(records)


def _index(sample: Sample, position: int) -> int:
    return position if sample.index is None else sample.index


def render_markdown(
    records: Sequence[Record], *, metrics: Sequence[str] | None = None, samples: bool = False
) -> str:
    """The same tables in Markdown, every record's text made inert."""
    out: list[str] = []
    for record in records:
        out += [f"### {inert_markdown(_heading(record))}", ""]
        header = ["metric", "median ± spread", "min", "max", "n"]
        if samples:
            header += [f"#{_index(s, i)}" for i, s in enumerate(record.samples)]
        out.append("| " + " | ".join(header) + " |")
        out.append("| --- | --- |" + " ---: |" * (len(header) - 2))
        for row in _rows(record, metrics, samples):
            out.append("| " + " | ".join(inert_markdown(c) for c in row) + " |")
        failed = record.failed
        if failed:
            out.append("")
            out += [
                f"- sample {s.index}: FAILED: {inert_markdown(clean_line(str('?' if s.reason is None else s.reason)))}"
                for s in failed
            ]
        out.append("")
    return "\n".join(out)


def figures(records: Sequence[Record], *, metrics: Sequence[str] | None = None) -> dict[str, Any]:
    """The records' figures as plain data: per cell and metric its unit, median, spread and every
    ok sample's raw value (``values``, in sample order), and the failed samples with their reason."""
    cells = []
    for record in records:
        entry: dict[str, Any] = {
            "cell_id": record.cell.id,
            "run_id": record.run_id,
            "accel": record.vm.accel,
            "samples": len(record.samples),
            "ok": len(_ok(record)),
            "metrics": {},
            "failed": [{"index": s.index, "reason": s.reason} for s in record.failed],
        }
        for name in _names(record, metrics):
            values = _values(record, name)
            if not values:
                continue
            entry["metrics"][name] = {"unit": unit_of(name), **Stats.of(values).as_dict(), "values": values}
        cells.append(entry)
    return {"schema": "diskbench-show", "version": 1, "cells": cells}


def render_json(records: Sequence[Record], *, metrics: Sequence[str] | None = None) -> str:
    return json.dumps(figures(records, metrics=metrics), indent=2, allow_nan=False) + "\n"
