"""A comparison report: two record sets (base, then head) side by side.

``diskbench report HEAD --against BASE`` matches the two sets' cells by id and
shows, per workload, one table (each figure of base and head and the change of
the median) and one chart per metric family with base and head side by side.
It decides nothing itself: the verdicts it shows (a column of the table, a mark
under a regressed or improved cell of a chart) are ``diskbench compare``'s, from the
same functions with their default settings.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from harness.errors import UsageError
from harness.report.blocks import (
    Block,
    Bullets,
    Chart,
    Heading,
    Para,
    Table,
    accel_banner,
    file_slug,
    format_stats,
    machine_line,
)
from harness.report.charts import BarChart
from harness.report.families import FAMILIES, Row, cell_label, family_charts, varying_axes, workload_words
from harness.report.series import CellResult, Series, label_of, metric_of
from harness.units import plural

# the figures a comparison table shows, where the cells carry them
TABLE_METRICS = ("total_s", "mib_per_s", "host.write_amplification", "host.create_s")
# machine fields that, when they differ between the sides, the reader must be told of
_IDENTITY = (
    ("accel", "accelerator"),
    ("qemu_version", "QEMU"),
    ("qemu_img_version", "qemu-img"),
    ("hostname", "host"),
    ("cpu", "CPU"),
    ("work_dir_fs", "image filesystem"),
)


# ``diskbench compare``'s verdicts by (cell id, metric); metric "": the cell's own
Verdicts = Mapping[tuple[str, str], str]
# the verdicts a chart marks under its cell; the others are in the table's verdict column
MARKED = ("regression", "improvement")


@dataclass(frozen=True)
class Side:
    """One record set of a comparison report: its label and its series."""

    label: str
    series: tuple[Series, ...]

    def cells(self) -> dict[str, CellResult]:
        """The side's cells by id; a cell twice (two sweeps of it) is refused: which one is meant?"""
        out: dict[str, CellResult] = {}
        where: dict[str, str] = {}
        for item in self.series:
            for cell in item.cells:
                if cell.id in out:
                    raise UsageError(
                        f"the {self.label} records hold cell {cell.id} twice (sweeps {where[cell.id]} "
                        f"and {item.sweep}): pass one sweep's records per side"
                    )
                out[cell.id] = cell
                where[cell.id] = item.sweep
        return out


def parse_labels(text: str) -> tuple[str, str]:
    """``--labels BASE,HEAD``: two different, non-empty names."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise UsageError(
            f"--labels {text!r}: give two different names, base's then head's, such as --labels base,head"
        )
    return parts[0], parts[1]


def change(base: CellResult | None, head: CellResult | None, name: str) -> str:
    """Head's median against base's, in percent; ``-`` where a side has no figure."""
    if base is None or head is None:
        return "-"
    b, h = base.stats(name), head.stats(name)
    if not b.n or not h.n or b.median == 0:
        return "-"
    return f"{100.0 * (h.median / b.median - 1.0):+.1f}%"


def _identity_notes(base: Side, head: Side) -> list[str]:
    notes = []
    for key, words in _IDENTITY:
        left = sorted({str(s.machine.get(key, "?")) for s in base.series})
        right = sorted({str(s.machine.get(key, "?")) for s in head.series})
        if left != right:
            notes.append(f"{words}: {', '.join(left)} ({base.label}) and {', '.join(right)} ({head.label})")
    return notes


def _table(workload: str, rows: Sequence[Row], base: Side, head: Side, verdicts: Sequence[str]) -> Table:
    cells = [c for _label, by_side in rows for c in by_side.values() if c is not None]
    metrics = [m for m in TABLE_METRICS if any(c.stats(m).n for c in cells)]
    # the verdict beside the cell's name: seen first, never past the figures' columns
    header = ["cell", *(["verdict"] if verdicts else [])]
    groups: list[tuple[str, int]] = [("", len(header))]
    for name in metrics:
        header += [base.label, head.label, "change"]
        groups.append((label_of(name), 3))
    header.append(f"ok {base.label}/{head.label}")
    groups.append(("", 1))
    body = []
    for (label, by_side), verdict in zip(rows, verdicts or [""] * len(rows), strict=True):
        b, h = by_side.get(base.label), by_side.get(head.label)
        row = [label, *([verdict] if verdicts else [])]
        for name in metrics:
            unit = metric_of(name).unit
            row += [
                format_stats(b.stats(name), unit, beside=h.stats(name) if h else None) if b else "-",
                format_stats(h.stats(name), unit, beside=b.stats(name) if b else None) if h else "-",
                change(b, h, name),
            ]
        row.append(f"{len(b.ok) if b else '-'}/{len(h.ok) if h else '-'}")
        body.append(tuple(row))
    return Table(
        tuple(header),
        tuple(body),
        groups=(tuple(groups),),
        keys=2 if verdicts else 1,
        caption=(
            f"{workload_words(workload)}: median ± coefficient of variation over the ok samples; "
            f"change: {head.label}'s median against {base.label}'s"
            + ("; verdict: diskbench compare's, with its default settings" if verdicts else "")
        ),
    )


def _marked(chart: BarChart, rows: Sequence[Row], ids: Sequence[str], verdicts: Verdicts) -> BarChart:
    """``chart`` with a mark under each cell whose figure ``compare`` found regressed or improved
    (charts of one figure a cell; the panels' figures are marked in no chart)."""
    family = next((f for f in FAMILIES if f.key == chart.family), None)
    if family is None or chart.panels or len(chart.groups) != len(rows):
        return chart
    marks = {}
    for (label, _by_side), cell_id in zip(rows, ids, strict=True):
        for (vid, metric), verdict in verdicts.items():
            if vid == cell_id and metric and family.picks(metric) and verdict in MARKED:
                marks[label] = verdict
    return replace(chart, marks=marks) if marks else chart


def comparison_blocks(base: Side, head: Side, verdicts: Verdicts | None = None) -> list[Block]:
    """The comparison report: both sides' machines, then per workload a table and its charts;
    with ``verdicts`` (``compare``'s), a verdict column and a mark under each regressed or
    improved cell of a chart."""
    verdicts = verdicts or {}
    everything = [*base.series, *head.series]
    blocks: list[Block] = [
        Heading(1, f"diskbench report: {head.label} against {base.label}"),
        accel_banner(everything),
    ]
    notes = _identity_notes(base, head)
    # each side's machine, plainly: an alarm only where the two sides' machines differ
    for side in (base, head):
        sweeps = ", ".join(s.sweep for s in side.series)
        for item in side.series:
            blocks.append(
                Para(
                    f"{side.label} ({sweeps}): {machine_line(item)}; {plural(len(item.cells), 'cell')}",
                    "loud" if notes else "machine",
                )
            )
    if notes:
        blocks.append(Para(f"The two sides ran on different machines or QEMU: {'; '.join(notes)}.", "note"))
    left, right = base.cells(), head.cells()
    ids = list(dict.fromkeys([*left, *right]))
    only = [(i, base.label if i in left else head.label) for i in ids if (i in left) != (i in right)]
    by_workload: dict[str, list[str]] = {}
    for cell_id in ids:
        cell = left.get(cell_id) or right[cell_id]
        by_workload.setdefault(str(cell.values.get("workload")), []).append(cell_id)
    accels = sorted({s.accel for s in everything})
    accel = accels[0] if len(accels) == 1 else "/".join(accels)
    for workload, members in by_workload.items():
        values = [(left.get(i) or right[i]).values for i in members]
        axes = varying_axes(values)
        rows: list[Row] = [
            (cell_label(v, axes), {base.label: left.get(i), head.label: right.get(i)})
            for i, v in zip(members, values, strict=True)
        ]
        blocks.append(Heading(2, workload_words(workload)))
        cell_verdicts = [verdicts.get((i, ""), "-") for i in members] if verdicts else []
        blocks.append(_table(workload, rows, base, head, cell_verdicts))
        for chart in family_charts(workload, rows, (base.label, head.label), accel):
            chart = _marked(chart, rows, members, verdicts)
            blocks.append(Chart(f"{file_slug(workload)}-{chart.family}", chart))
    if only:
        blocks.append(Heading(2, "Cells on one side only"))
        blocks.append(Bullets(tuple(f"{cell_id}: {label} only" for cell_id, label in only)))
    return blocks
