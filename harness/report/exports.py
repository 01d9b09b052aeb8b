"""Figures and verdicts in the formats other tools ingest.  Pure: records or a comparison
document in, text out.

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


def _metric_rows(cell: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(cell.get("metrics") or []), *(cell.get("counters") or [])]


def comparison_csv(document: Mapping[str, Any]) -> str:
    """A row per cell and metric of a comparison (gated metrics and counters): both medians, the
    change, its interval, p and the metric's verdict."""
    rows = []
    for cell in document.get("cells") or []:
        for m in _metric_rows(cell):
            rows.append(
                [
                    cell.get("cell_id"),
                    cell.get("verdict"),
                    m.get("metric"),
                    m.get("unit"),
                    m.get("higher_is_better"),
                    *(m.get(k) for k in COMPARISON_COLUMNS[5:14]),
                    clean_line(str(m.get("reason") or "")),
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


def comparison_bmf(document: Mapping[str, Any]) -> str:
    """BMF of a comparison's head: a benchmark per cell, a measure per metric, its head median; the
    bounds are base's median moved by the ends of the change's interval, where there is one."""
    doc: dict[str, dict[str, dict[str, float]]] = {}
    for cell in document.get("cells") or []:
        measures = doc.setdefault(str(cell.get("cell_id")), {})
        for m in _metric_rows(cell):
            head, base = m.get("median_head"), m.get("median_base")
            if not isinstance(head, int | float) or not _number(head):
                continue
            metric: dict[str, float] = {"value": float(head)}
            lo, hi = m.get("ci_low_pct"), m.get("ci_high_pct")
            if isinstance(base, int | float) and isinstance(lo, int | float) and isinstance(hi, int | float):
                bounds = sorted((float(base) * (1 + lo / 100), float(base) * (1 + hi / 100)))
                if all(math.isfinite(b) for b in bounds):
                    metric.update(lower_value=bounds[0], upper_value=bounds[1])
            measures[str(m.get("metric"))] = metric
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


def comparison_gab(document: Mapping[str, Any]) -> str:
    """``customSmallerIsBetter`` of a comparison's head: its median per cell and metric where
    smaller is better, the verdict and change against base in ``extra``."""
    entries = []
    for cell in document.get("cells") or []:
        for m in _metric_rows(cell):
            name = str(m.get("metric"))
            if not _number(m.get("median_head")) or not _cost(name):
                continue
            change = m.get("change_pct")
            against = f", {change:+.1f}% against base" if _number(change) else ""
            entries.append(
                {
                    "name": f"{cell.get('cell_id')} {name}",
                    "unit": str(m.get("unit") or _unit(name)),
                    "value": float(m["median_head"]),
                    "extra": f"{m.get('verdict')}{against} (n {m.get('n_base')} + {m.get('n_head')})",
                }
            )
    return _dump(entries)


def render_records(records: Sequence[Record], fmt: str) -> str:
    """Records in one of :data:`EXPORTS`."""
    return {"csv": records_csv, "bmf": records_bmf, "github-action-benchmark": records_gab}[fmt](records)


def render_comparison(document: Mapping[str, Any], fmt: str) -> str:
    """A comparison document in one of :data:`EXPORTS`."""
    render = {"csv": comparison_csv, "bmf": comparison_bmf, "github-action-benchmark": comparison_gab}
    return render[fmt](document)


# --- JUnit XML ---------------------------------------------------------------------------------


def _xml_text(text: Any) -> str:
    """Text an XML 1.0 document can hold (no control characters), on one line."""
    line = clean_line(str(text))
    return "".join(c for c in line if c in "\t" or ord(c) >= 0x20)


def comparison_junit(
    document: Mapping[str, Any], *, suite: str = "diskbench", decide: Mapping[str, str] | None = None
) -> str:
    """JUnit XML of a comparison: a ``testcase`` per cell (``classname`` its workload), a regression
    or a failing change a ``failure``, an error an ``error``, an inconclusive cell ``skipped``
    with its reason; ``decide`` (cell id -> command) ends an inconclusive cell's message with the
    command that would decide it."""
    cells = list(document.get("cells") or [])
    settings = document.get("settings") or {}
    changed_fails = bool(settings.get("changed_fails", True))
    counts = {"tests": len(cells), "failures": 0, "errors": 0, "skipped": 0}
    cases = []
    for cell in cells:
        cell_id = _xml_text(cell.get("cell_id"))
        workload = _xml_text((cell.get("cell") or {}).get("workload") or "cell")
        case = ET.Element("testcase", name=cell_id, classname=f"diskbench.{workload}", time="0")
        verdict = str(cell.get("verdict"))
        reason = _xml_text(cell.get("reason") or verdict)
        if verdict == "regression" or (verdict == "changed" and changed_fails):
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=reason, type=verdict).text = reason
        elif verdict == "error":
            counts["errors"] += 1
            kind = _xml_text(cell.get("kind") or "error")
            ET.SubElement(case, "error", message=reason, type=kind).text = reason
        elif verdict == "inconclusive":
            counts["skipped"] += 1
            command = (decide or {}).get(str(cell.get("cell_id")))
            message = f"inconclusive: {reason}" + (f"; to decide: {_xml_text(command)}" if command else "")
            ET.SubElement(case, "skipped", message=message)
        ET.SubElement(case, "system-out").text = _case_out(cell)
        cases.append(case)
    totals = {k: str(v) for k, v in counts.items()}
    root = ET.Element("testsuites", {"name": suite, **totals})
    stamp = _xml_text(document.get("created_at") or "")
    testsuite = ET.SubElement(root, "testsuite", {"name": suite, **totals, "timestamp": stamp})
    testsuite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _case_out(cell: Mapping[str, Any]) -> str:
    """The cell's verdict and each gated metric's figures, a line each."""
    lines = [f"verdict: {_xml_text(cell.get('verdict'))}"]
    for m in _metric_rows(cell):
        change = m.get("change_pct")
        lines.append(
            f"{_xml_text(m.get('metric'))}: base {m.get('median_base')}, head {m.get('median_head')}"
            + (f", {change:+.1f}%" if _number(change) else "")
            + f": {_xml_text(m.get('verdict'))}"
        )
    return "\n".join(lines)
