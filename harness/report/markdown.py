"""The report's blocks as Markdown, every text from the records inert; charts as image links."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.report.blocks import Block, Bullets, Chart, Heading, Para, Table
from harness.untrusted import inert_markdown


def to_markdown(blocks: Sequence[Block], images: Mapping[str, str]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * block.level + " " + inert_markdown(block.text))
        elif isinstance(block, Para):
            text = inert_markdown(block.text)
            out.append(f"> **{text}**" if block.kind == "loud" else text)
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {inert_markdown(item)}" for item in block.items))
        elif isinstance(block, Table):
            header = list(block.header)
            if block.groups:
                # Markdown has no spanning cells: prefix each column with the groups above it
                for group_row in reversed(block.groups):
                    col = 0
                    for label, span in group_row:
                        for i in range(col, col + span):
                            header[i] = f"{label} {header[i]}".strip() if label else header[i]
                        col += span
            lines = ["| " + " | ".join(inert_markdown(h) for h in header) + " |", "|" + "---|" * len(header)]
            kinds = block.kinds or ("",) * len(block.rows)
            for row, kind in zip(block.rows, kinds, strict=True):
                cells = [inert_markdown(c) for c in row]
                if kind == "seed":
                    cells = [f"*{c}*" if c else c for c in cells]
                elif kind == "failed":
                    cells[0] = f"**FAILED** {cells[0]}"
                lines.append("| " + " | ".join(cells) + " |")
            if block.caption:
                lines += ["", f"*{inert_markdown(block.caption)}*"]
            out.append("\n".join(lines))
        elif isinstance(block, Chart):
            out.append(f"![{inert_markdown(block.chart.title)}]({images[block.name]})")
    return "\n\n".join(out) + "\n"
