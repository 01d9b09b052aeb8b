"""The report's blocks as plain text (stdout): aligned tables, charts named but not drawn, every
line within :data:`WIDTH` columns: paragraphs wrap, and a table too wide goes on in a second table
(and a third...) that repeats its key columns (the cell, its verdict)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import replace

from harness.report.blocks import NUMERIC, Block, Bullets, Chart, Heading, Para, Table

#: the columns of a terminal the report fits
WIDTH = 120


def _text_table(table: Table) -> list[str]:
    cols = len(table.header)
    widths = [max(len(r[i]) if i < len(r) else 0 for r in (table.header, *table.rows)) for i in range(cols)]
    for group_row in table.groups:
        col = 0
        for label, span in group_row:
            # a spanning label wider than its columns widens the last of them
            short = len(label) + 2 - (sum(widths[col : col + span]) + 2 * (span - 1))
            if short > 0:
                widths[col + span - 1] += short
            col += span
    lines = []
    for group_row in table.groups:
        parts, col = [], 0
        for label, span in group_row:
            width = sum(widths[col : col + span]) + 2 * (span - 1)
            parts.append(label.center(width, "-") if label else " " * width)
            col += span
        lines.append("  ".join(parts).rstrip())
    lines.append("  ".join(h.ljust(w) for h, w in zip(table.header, widths, strict=True)).rstrip())
    for row, kind in zip(table.rows, table.kinds or ("",) * len(table.rows), strict=True):
        text = "  ".join(
            c.rjust(w) if i and NUMERIC.match(c) else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        lines.append(text.rstrip() + ("  <- FAILED" if kind == "failed" else ""))
    if table.caption:
        lines += textwrap.wrap(f"({table.caption})", WIDTH, break_long_words=False, break_on_hyphens=False)
    return lines


def _units(table: Table) -> list[list[int]]:
    """The columns after the keys in the pieces a table may be cut into: a spanning label's
    columns stay together."""
    keys = min(max(1, table.keys), len(table.header))
    if not table.groups:
        return [[i] for i in range(keys, len(table.header))]
    units, col = [], 0
    for _label, span in table.groups[0]:
        columns = list(range(col, col + span))
        col += span
        kept = [i for i in columns if i >= keys]
        if kept:
            units.append(kept)
    return units


def _columns(table: Table, columns: Sequence[int], *, last: bool) -> Table:
    """``table`` with only ``columns`` (in order); the caption under the last part only."""
    keep = set(columns)
    groups = []
    for group_row in table.groups:
        row, col = [], 0
        for label, span in group_row:
            n = sum(1 for i in range(col, col + span) if i in keep)
            if n:
                row.append((label, n))
            col += span
        groups.append(tuple(row))
    return replace(
        table,
        header=tuple(table.header[i] for i in columns),
        rows=tuple(tuple(r[i] for i in columns) for r in table.rows),
        groups=tuple(groups),
        caption=table.caption if last else "",
    )


def _fitted(table: Table) -> list[list[str]]:
    """The table's lines; where wider than :data:`WIDTH`, in parts that each repeat the keys."""
    whole = _text_table(table)
    if max(map(len, whole), default=0) <= WIDTH:
        return [whole]
    keys = list(range(min(max(1, table.keys), len(table.header))))
    parts: list[list[int]] = []
    current: list[int] = []
    for unit in _units(table):
        trial = [*keys, *current, *unit]
        if current and max(map(len, _text_table(_columns(table, trial, last=False)))) > WIDTH:
            parts.append(current)
            current = list(unit)
        else:
            current += unit
    if current:
        parts.append(current)
    return [
        _text_table(_columns(table, [*keys, *part], last=n == len(parts) - 1)) for n, part in enumerate(parts)
    ]


def _wrap(text: str, first: str = "", rest: str = "") -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def to_text(blocks: Sequence[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            lines += ["", block.text, "=" * len(block.text) if block.level == 1 else "-" * len(block.text)]
        elif isinstance(block, Para):
            lines += ["", *(_wrap(block.text, "!! ", "   ") if block.kind == "loud" else _wrap(block.text))]
        elif isinstance(block, Bullets):
            lines += [""] + [line for item in block.items for line in _wrap(item, "- ", "  ")]
        elif isinstance(block, Table):
            for part in _fitted(block):
                lines += ["", *part]
        elif isinstance(block, Chart):
            lines += ["", *_wrap(f"[chart: {block.chart.title}: in the --html and --markdown reports]")]
    return "\n".join(lines).lstrip("\n") + "\n"
