"""A comparison report: two record sets (base, then head) side by side.

``diskbench report HEAD --against BASE`` matches the two sets' cells by id and
shows, per workload, one table (each figure of base and head and the change of
the median) and one chart per metric family with base and head side by side.
It draws and describes; it decides nothing: the verdicts, with their tests, are
``diskbench compare``'s.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
from harness.report.families import Row, cell_label, family_charts, varying_axes, workload_words
from harness.report.series import CellResult, Series, label_of, metric_of

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


def _table(workload: str, rows: Sequence[Row], base: Side, head: Side) -> Table:
    cells = [c for _label, by_side in rows for c in by_side.values() if c is not None]
    metrics = [m for m in TABLE_METRICS if any(c.stats(m).n for c in cells)]
    header = ["cell"]
    groups: list[tuple[str, int]] = [("", 1)]
    for name in metrics:
        header += [base.label, head.label, "change"]
        groups.append((label_of(name), 3))
    header.append(f"ok {base.label}/{head.label}")
    groups.append(("", 1))
    body = []
    for label, by_side in rows:
        b, h = by_side.get(base.label), by_side.get(head.label)
        row = [label]
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
        caption=(
            f"{workload_words(workload)}: median ± coefficient of variation over the ok samples; "
            f"change: {head.label}'s median against {base.label}'s (no verdict: diskbench compare "
            "tests the difference)"
        ),
    )


def comparison_blocks(base: Side, head: Side) -> list[Block]:
    """The comparison report: both sides' machines, then per workload a table and its charts."""
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
                    f"{side.label} ({sweeps}): {machine_line(item)}; {len(item.cells)} cells",
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
        blocks.append(_table(workload, rows, base, head))
        for chart in family_charts(workload, rows, (base.label, head.label), accel):
            blocks.append(Chart(f"{file_slug(workload)}-{chart.family}", chart))
    if only:
        blocks.append(Heading(2, "Cells on one side only"))
        blocks.append(Bullets(tuple(f"{cell_id}: {label} only" for cell_id, label in only)))
    return blocks
