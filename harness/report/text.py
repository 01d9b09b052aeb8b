"""The report's blocks as plain text (stdout): aligned tables, charts named but not drawn."""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.blocks import NUMERIC, Block, Bullets, Chart, Heading, Para, Table


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
        lines.append(f"({table.caption})")
    return lines


def to_text(blocks: Sequence[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            lines += ["", block.text, "=" * len(block.text) if block.level == 1 else "-" * len(block.text)]
        elif isinstance(block, Para):
            lines += ["", ("!! " + block.text) if block.kind == "loud" else block.text]
        elif isinstance(block, Bullets):
            lines += [""] + [f"- {item}" for item in block.items]
        elif isinstance(block, Table):
            lines += ["", *_text_table(block)]
        elif isinstance(block, Chart):
            lines += ["", f"[chart: {block.chart.title}: in the --html and --markdown reports]"]
    return "\n".join(lines).lstrip("\n") + "\n"
