"""Figures and verdicts in the formats other tools ingest.  Pure: records or a comparison
(:class:`~harness.compare.model.Comparison`) in, text out; :func:`write_junit` writes its file.

Every export is in :data:`REGISTRY`, its name, what it holds and its two writers (records,
a comparison): ``show`` and ``compare`` offer the same names and the same shapes.

* **CSV** (:func:`records_csv`, :func:`comparison_csv`): one row per cell and metric, raw values
  in the metric's own unit to 10 significant digits (no float noise such as
  ``0.19390300000000002``), booleans ``true``/``false`` as JSON writes them, an empty field for none.
* **BMF**, the Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format):
  ``{benchmark: {measure: {value, lower_value, upper_value}}}``, a benchmark per cell and a
  measure per metric, every measure with all three (:func:`records_bmf`, :func:`comparison_bmf`):
  the median and the samples' range of records; head's median and its 95 % interval in a
  comparison (the median itself at both ends where a comparison has too few samples for one).
* **github-action-benchmark**'s ``customSmallerIsBetter`` JSON: a list of ``{name, unit, value,
  range, extra}`` (:func:`records_gab`, :func:`comparison_gab`).  Every value there is a cost
  (smaller is better): a rate where higher is better goes in as its inverse, as the history pages
  keep it (``mib_per_s`` as ``s_per_gib`` = 1024 / MiB/s), never upside down and never left out.
* **JUnit XML** of a comparison's verdicts (:func:`comparison_junit`, :func:`write_junit`): a
  testcase per cell, a regression (or a change of the IO, where it fails the comparison) a
  ``failure``, an error an ``error``, an inconclusive cell a ``skipped`` with its reason and the
  command that decides it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from harness.compare.model import ComparedCell, Comparison
from harness.compare.pointers import command_line, figure_name
from harness.compare.samplestats import Stats
from harness.errors import HarnessError
from harness.files import write_text_atomic
from harness.record import Record
from harness.report.tables import metric_order
from harness.untrusted import clean_line
from harness.workloads import metric_info

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


#: significant digits of a CSV figure: more than any clock or counter here resolves, fewer than
#: a float's noise (``0.19390300000000002``)
CSV_DIGITS = 10


def csv_field(value: Any) -> str:
    """One CSV field: ``""`` for none, ``true``/``false``, whole numbers whole, other numbers to
    :data:`CSV_DIGITS` significant digits (``nan``/``inf`` as Python spells them), text as it is."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(float(f"{value:.{CSV_DIGITS}g}"))
    return str(value)


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([csv_field(v) for v in row] for row in rows)
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
                    *(getattr(stats, k) for k in ("median", "mean", "stdev", "min", "max", "cv_pct")),
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


def _measure(value: float, low: float, high: float) -> dict[str, float]:
    """A BMF measure: always its value and both bounds, whichever export writes it."""
    return {"value": value, "lower_value": min(low, value), "upper_value": max(high, value)}


def records_bmf(records: Sequence[Record]) -> str:
    """BMF: a benchmark per cell, a measure per metric: the median, min and max of its samples."""
    doc: dict[str, dict[str, dict[str, float]]] = {}
    for record in records:
        measures = doc.setdefault(record.cell_id, {})
        for name, stats in _figures(record):
            measures[name] = _measure(stats.median, stats.min, stats.max)
    return _dump(doc)


def comparison_bmf(comparison: Comparison) -> str:
    """BMF of a comparison's head: a benchmark per cell, a measure per metric, its head median;
    the bounds are base's median moved by the ends of the change's interval, the median itself
    where there is none (too few samples for one)."""
    doc: dict[str, dict[str, dict[str, float]]] = {}
    for cell in comparison.cells:
        measures = doc.setdefault(cell.cell_id, {})
        for m in cell.figures:
            head, base = m.median_head, m.median_base
            if head is None or not _number(head):
                continue
            value = float(head)
            bounds = [value, value]
            lo, hi = m.ci_low_pct, m.ci_high_pct
            if base is not None and lo is not None and hi is not None:
                ends = sorted((float(base) * (1 + lo / 100), float(base) * (1 + hi / 100)))
                if all(math.isfinite(b) for b in ends):
                    bounds = ends
            measures[m.metric] = _measure(value, bounds[0], bounds[1])
    return _dump({cell: measures for cell, measures in doc.items() if measures})


def _range(stats: Stats) -> str:
    return f"± {stats.stdev:.6g}"


# a higher-is-better rate's unit -> the unit of its inverse and the factor (inverse = factor / rate),
# as the history pages keep it (benchmarks/history/layout.py)
_INVERSES = {"MiB/s": ("s/GiB", 1024.0), "KiB/s": ("s/GiB", 1024.0**2), "1/s": ("s/op", 1.0)}


@dataclass(frozen=True)
class _Cost:
    """How a metric goes into customSmallerIsBetter: its name there, unit, and the factor of an
    inverted rate (None: as it is)."""

    name: str
    unit: str
    factor: float | None = None

    def value(self, raw: float) -> float | None:
        if self.factor is None:
            return raw
        return self.factor / raw if raw > 0 else None

    def word(self, metric: str) -> str:
        return f"; inverse of {metric}" if self.factor is not None else ""


def _cost(name: str) -> _Cost | None:
    """``name`` as a cost: itself where smaller is better, a rate's inverse where higher is
    (``mib_per_s`` -> ``s_per_gib``); None for an informational figure or one of no known kind."""
    try:
        info = metric_info(name)
    except HarnessError:
        return None
    if info.informational:
        return None
    if not info.higher_is_better:
        return _Cost(name, info.unit)
    inverse = figure_name(name)
    if inverse == name or info.unit not in _INVERSES:
        return None
    unit, factor = _INVERSES[info.unit]
    return _Cost(inverse, unit, factor)


def records_gab(records: Sequence[Record]) -> str:
    """github-action-benchmark's ``customSmallerIsBetter``: an entry per cell and metric (a rate
    as its inverse), its median, ± the standard deviation, n and min-max in ``extra``."""
    entries = []
    for record in records:
        for name, raw in _figures(record):
            cost = _cost(name)
            if cost is None:
                continue
            values = [v for v in map(cost.value, raw.values) if v is not None]
            if not values:
                continue
            stats = Stats.of(values)
            entries.append(
                {
                    "name": f"{record.cell_id} {cost.name}",
                    "unit": cost.unit,
                    "value": stats.median,
                    "range": _range(stats),
                    "extra": f"median of {stats.n} samples, min {stats.min:.6g}, max {stats.max:.6g}"
                    + cost.word(name),
                }
            )
    return _dump(entries)


def comparison_gab(comparison: Comparison) -> str:
    """``customSmallerIsBetter`` of a comparison's head: its median per cell and metric (a rate as
    its inverse), the verdict and change against base in ``extra``."""
    entries = []
    for cell in comparison.cells:
        for m in cell.figures:
            cost = _cost(m.metric)
            head = m.median_head
            value = (
                cost.value(float(head)) if cost is not None and head is not None and _number(head) else None
            )
            if cost is None or value is None:
                continue
            change = m.change_pct
            against = f", {change:+.1f}% against base" if _number(change) else ""
            entries.append(
                {
                    "name": f"{cell.cell_id} {cost.name}",
                    "unit": cost.unit if cost.factor is not None else str(m.unit or cost.unit),
                    "value": value,
                    "extra": f"{m.verdict.value}{against} (n {m.n_base} + {m.n_head}){cost.word(m.metric)}",
                }
            )
    return _dump(entries)


@dataclass(frozen=True)
class Export:
    """A format other tools ingest: its name (``--output-format``), what it holds, and its writer
    of records (``show``) and of a comparison (``compare``)."""

    name: str
    help: str
    records: Callable[[Sequence[Record]], str]
    comparison: Callable[[Comparison], str]


#: every export ``show`` and ``compare`` offer besides their own text, markdown and JSON
REGISTRY: dict[str, Export] = {
    e.name: e
    for e in (
        Export("csv", "a row per cell and metric", records_csv, comparison_csv),
        Export(
            "bmf",
            "Bencher Metric Format: the medians (head's) with their bounds",
            records_bmf,
            comparison_bmf,
        ),
        Export(
            "github-action-benchmark",
            "the medians (head's) as its customSmallerIsBetter JSON, a rate as its inverse (s_per_gib)",
            records_gab,
            comparison_gab,
        ),
    )
}
EXPORTS = tuple(REGISTRY)


def exports_help() -> str:
    """What each export holds, for a command's help: ``csv: a row per cell and metric; ...``."""
    return "; ".join(f"{e.name}: {e.help}" for e in REGISTRY.values())


def render_records(records: Sequence[Record], fmt: str) -> str:
    """Records in one of :data:`EXPORTS`."""
    return REGISTRY[fmt].records(records)


def render_comparison(comparison: Comparison, fmt: str) -> str:
    """A comparison in one of :data:`EXPORTS`."""
    return REGISTRY[fmt].comparison(comparison)


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
    command that would decide it, by default the one the comparison's summary gives
    (:func:`decide_commands`)."""
    if decide is None:
        decide = decide_commands(comparison)
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
            command = decide.get(cell.cell_id)
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


def decide_commands(comparison: Comparison) -> dict[str, str]:
    """Per inconclusive cell, the command the comparison's summary says would decide it (a gate's
    own command with the rounds it needs); none where it names none."""
    entry = comparison.summary.screen.inconclusive if comparison.summary.screen is not None else None
    if entry is None or entry.command is None:
        return {}
    line = command_line(entry.command)
    return {comparison.cells[i].cell_id: line for i in entry.cells if 0 <= i < len(comparison.cells)}


def write_junit(path: Path, comparison: Comparison, *, decide: Mapping[str, str] | None = None) -> None:
    """The comparison's verdicts as JUnit XML in ``path`` (atomically): the one writer of the file
    ``compare --junit`` and ``gate`` write (``decide``: as :func:`comparison_junit`)."""
    write_text_atomic(path, comparison_junit(comparison, decide=decide))
