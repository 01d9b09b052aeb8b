"""Figures and verdicts in the formats other tools ingest.  Pure: records or a comparison
(:class:`~harness.compare.model.Comparison`) in, text out.

* **CSV** (:func:`records_csv`, :func:`comparison_csv`): one row per cell and metric, raw values
  in the metric's own unit, for a spreadsheet or pandas.
* **BMF**, the Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format):
  ``{benchmark: {measure: {value, lower_value, upper_value}}}``, a benchmark per cell and a
  measure per metric (:func:`records_bmf`, :func:`comparison_bmf`).
* **github-action-benchmark**'s ``customSmallerIsBetter`` JSON: a list of ``{name, unit, value,
  range, extra}`` (:func:`records_gab`, :func:`comparison_gab`).  Every value there is a cost
  (smaller is better): a metric where higher is better is left out rather than read upside down.
* **JUnit XML** of a comparison's verdicts (:func:`comparison_junit`): a testcase per cell, a
  regression (or a change of the IO, where it fails the comparison) a ``failure``, an error an
  ``error``, an inconclusive cell a ``skipped`` with its reason and the command that decides it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any
from xml.etree import ElementTree as ET

from harness.compare.model import ComparedCell, Comparison
from harness.compare.samplestats import Stats
from harness.errors import HarnessError
from harness.record import Record
from harness.report.tables import metric_order
from harness.untrusted import clean_line
from harness.workloads import metric_info

# what ``show`` and ``compare`` can print besides their own text, markdown and JSON
EXPORTS = ("csv", "bmf", "github-action-benchmark")

RECORD_COLUMNS = (
    "run_id",
    "cell_id",
    "workload",
    "accel",
    "metric",
    "unit",
    "higher_is_better",
    "n",
    "median",
    "mean",
    "stdev",
    "min",
    "max",
    "cv_pct",
)
COMPARISON_COLUMNS = (
    "cell_id",
    "cell_verdict",
    "metric",
    "unit",
    "higher_is_better",
    "n_base",
    "n_head",
    "median_base",
    "median_head",
    "change_pct",
    "ci_low_pct",
    "ci_high_pct",
    "p_value",
    "verdict",
    "reason",
)


def _higher(name: str) -> bool | None:
    try:
        return metric_info(name).higher_is_better
    except HarnessError:
        return None


def _cost(name: str) -> bool:
    """Whether ``name`` is a known metric where smaller is better (and not merely informational)."""
    try:
        info = metric_info(name)
    except HarnessError:
        return False
    return not info.higher_is_better and not info.informational


def _unit(name: str) -> str:
    try:
        return metric_info(name).unit
    except HarnessError:
        return ""


def _figures(record: Record) -> list[tuple[str, Stats]]:
    """Each metric of the record's ok samples and its statistics, in the tables' order."""
    out = []
    for name in metric_order(record):
        values = [v for s in record.ok if (v := s.figure(name)) is not None]
        if values:
            out.append((name, Stats.of(values)))
    return out


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(["" if v is None else v for v in row] for row in rows)
    return buffer.getvalue()


def records_csv(records: Sequence[Record]) -> str:
    """A row per cell and metric: its figures over the ok samples, raw, in the metric's unit."""
    rows = []
    for record in records:
        for name, stats in _figures(record):
            rows.append(
                [
                    record.run_id,
                    record.cell_id,
                    record.cell.workload_name,
                    record.accel,
                    name,
                    _unit(name),
                    _higher(name),
                    stats.n,
                    *(repr(getattr(stats, k)) for k in ("median", "mean", "stdev", "min", "max", "cv_pct")),
                ]
            )
    return _csv(RECORD_COLUMNS, rows)


def comparison_csv(comparison: Comparison) -> str:
    """A row per cell and metric of a comparison (gated metrics and counters): both medians, the
    change, its interval, p and the metric's verdict."""
    rows = []
    for cell in comparison.cells:
        for m in cell.figures:
            rows.append(
                [
                    cell.cell_id,
                    cell.verdict.value,
                    m.metric,
                    m.unit,
                    m.higher_is_better,
                    m.n_base,
                    m.n_head,
                    m.median_base,
                    m.median_head,
                    m.change_pct,
                    m.ci_low_pct,
                    m.ci_high_pct,
                    m.p_value,
                    m.verdict.value,
                    clean_line(m.reason),
                ]
            )
    return _csv(COMPARISON_COLUMNS, rows)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def records_bmf(records: Sequence[Record]) -> str:
    """BMF: a benchmark per cell, a measure per metric: the median, min and max of its samples."""
    doc: dict[str, dict[str, dict[str, float]]] = {}
    for record in records:
        measures = doc.setdefault(record.cell_id, {})
        for name, stats in _figures(record):
            measures[name] = {"value": stats.median, "lower_value": stats.min, "upper_value": stats.max}
    return _dump(doc)


def comparison_bmf(comparison: Comparison) -> str:
    """BMF of a comparison's head: a benchmark per cell, a measure per metric, its head median; the
    bounds are base's median moved by the ends of the change's interval, where there is one."""
    doc: dict[str, dict[str, dict[str, float]]] = {}
    for cell in comparison.cells:
        measures = doc.setdefault(cell.cell_id, {})
        for m in cell.figures:
            head, base = m.median_head, m.median_base
            if head is None or not _number(head):
                continue
            metric: dict[str, float] = {"value": float(head)}
            lo, hi = m.ci_low_pct, m.ci_high_pct
            if base is not None and lo is not None and hi is not None:
                bounds = sorted((float(base) * (1 + lo / 100), float(base) * (1 + hi / 100)))
                if all(math.isfinite(b) for b in bounds):
                    metric.update(lower_value=bounds[0], upper_value=bounds[1])
            measures[m.metric] = metric
    return _dump({cell: measures for cell, measures in doc.items() if measures})


def _range(stats: Stats) -> str:
    return f"± {stats.stdev:.6g}"


def records_gab(records: Sequence[Record]) -> str:
    """github-action-benchmark's ``customSmallerIsBetter``: an entry per cell and metric where
    smaller is better, its median, ± the standard deviation, n and min-max in ``extra``."""
    entries = []
    for record in records:
        for name, stats in _figures(record):
            if not _cost(name):
                continue
            entries.append(
                {
                    "name": f"{record.cell_id} {name}",
                    "unit": _unit(name),
                    "value": stats.median,
                    "range": _range(stats),
                    "extra": f"median of {stats.n} samples, min {stats.min:.6g}, max {stats.max:.6g}",
                }
            )
    return _dump(entries)


def comparison_gab(comparison: Comparison) -> str:
    """``customSmallerIsBetter`` of a comparison's head: its median per cell and metric where
    smaller is better, the verdict and change against base in ``extra``."""
    entries = []
    for cell in comparison.cells:
        for m in cell.figures:
            name = m.metric
            if m.median_head is None or not _number(m.median_head) or not _cost(name):
                continue
            change = m.change_pct
            against = f", {change:+.1f}% against base" if _number(change) else ""
            entries.append(
                {
                    "name": f"{cell.cell_id} {name}",
                    "unit": str(m.unit or _unit(name)),
                    "value": float(m.median_head),
                    "extra": f"{m.verdict.value}{against} (n {m.n_base} + {m.n_head})",
                }
            )
    return _dump(entries)


def render_records(records: Sequence[Record], fmt: str) -> str:
    """Records in one of :data:`EXPORTS`."""
    return {"csv": records_csv, "bmf": records_bmf, "github-action-benchmark": records_gab}[fmt](records)


def render_comparison(comparison: Comparison, fmt: str) -> str:
    """A comparison in one of :data:`EXPORTS`."""
    render = {"csv": comparison_csv, "bmf": comparison_bmf, "github-action-benchmark": comparison_gab}
    return render[fmt](comparison)


# --- JUnit XML ---------------------------------------------------------------------------------


def _xml_text(text: Any) -> str:
    """Text an XML 1.0 document can hold (no control characters), on one line."""
    line = clean_line(str(text))
    return "".join(c for c in line if c in "\t" or ord(c) >= 0x20)


def comparison_junit(
    comparison: Comparison, *, suite: str = "diskbench", decide: Mapping[str, str] | None = None
) -> str:
    """JUnit XML of a comparison: a ``testcase`` per cell (``classname`` its workload), a regression
    or a failing change a ``failure``, an error an ``error``, an inconclusive cell ``skipped``
    with its reason; ``decide`` (cell id -> command) ends an inconclusive cell's message with the
    command that would decide it."""
    cells = comparison.cells
    changed_fails = comparison.settings.changed_fails if comparison.settings is not None else True
    counts = {"tests": len(cells), "failures": 0, "errors": 0, "skipped": 0}
    cases = []
    for cell in cells:
        cell_id = _xml_text(cell.cell_id)
        workload = _xml_text(cell.cell.workload or "cell")
        case = ET.Element("testcase", name=cell_id, classname=f"diskbench.{workload}", time="0")
        verdict = cell.verdict.value
        reason = _xml_text(cell.reason or verdict)
        if verdict == "regression" or (verdict == "changed" and changed_fails):
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=reason, type=verdict).text = reason
        elif verdict == "error":
            counts["errors"] += 1
            kind = _xml_text(cell.kind.value or "error")
            ET.SubElement(case, "error", message=reason, type=kind).text = reason
        elif verdict == "inconclusive":
            counts["skipped"] += 1
            command = (decide or {}).get(cell.cell_id)
            message = f"inconclusive: {reason}" + (f"; to decide: {_xml_text(command)}" if command else "")
            ET.SubElement(case, "skipped", message=message)
        ET.SubElement(case, "system-out").text = _case_out(cell)
        cases.append(case)
    totals = {k: str(v) for k, v in counts.items()}
    root = ET.Element("testsuites", {"name": suite, **totals})
    stamp = _xml_text(comparison.created_at or "")
    testsuite = ET.SubElement(root, "testsuite", {"name": suite, **totals, "timestamp": stamp})
    testsuite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _case_out(cell: ComparedCell) -> str:
    """The cell's verdict and each gated metric's figures, a line each."""
    lines = [f"verdict: {_xml_text(cell.verdict.value)}"]
    for m in cell.figures:
        change = m.change_pct
        lines.append(
            f"{_xml_text(m.metric)}: base {m.median_base}, head {m.median_head}"
            + (f", {change:+.1f}%" if change is not None and _number(change) else "")
            + f": {_xml_text(m.verdict.value)}"
        )
    return "\n".join(lines)
