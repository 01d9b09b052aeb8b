"""The report's blocks as Markdown, every text from the records inert; charts as image links."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from harness.report.blocks import Block, Bullets, Chart, Heading, Para, Table
from harness.untrusted import clean_line

# markdown and HTML syntax characters, backslash-escaped or as entities so they render as themselves
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")


def _md_cell(text: str) -> str:
    """Text from records (guest output, reasons, a pull request's preset) as inert markdown.

    One line, no control or bidi characters, no HTML tag, link, image, code span, emphasis or
    table break; ``://`` is broken with a zero-width space so no bare URL becomes a link.
    """
    text = clean_line(str(text), max_chars=2000)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text).replace("://", ":&#8203;//")


def to_markdown(blocks: Sequence[Block], images: Mapping[str, str]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * block.level + " " + _md_cell(block.text))
        elif isinstance(block, Para):
            text = _md_cell(block.text)
            out.append(f"> **{text}**" if block.kind == "loud" else text)
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md_cell(item)}" for item in block.items))
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
            lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
            kinds = block.kinds or ("",) * len(block.rows)
            for row, kind in zip(block.rows, kinds, strict=True):
                cells = [_md_cell(c) for c in row]
                if kind == "seed":
                    cells = [f"*{c}*" if c else c for c in cells]
                elif kind == "failed":
                    cells[0] = f"**FAILED** {cells[0]}"
                lines.append("| " + " | ".join(cells) + " |")
            if block.caption:
                lines += ["", f"*{_md_cell(block.caption)}*"]
            out.append("\n".join(lines))
        elif isinstance(block, Chart):
            out.append(f"![{_md_cell(block.chart.title)}]({images[block.name]})")
    return "\n\n".join(out) + "\n"
