"""The report's blocks as one HTML page; charts as images, seed and failed rows set apart."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from harness.report.blocks import NUMERIC, Block, Bullets, Chart, Heading, Para, Table
from harness.report.charts import BarChart

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 80em; color: #111; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
th { background: #f0f0f0; text-align: center; }
td.num { text-align: right; }
td.verdict { white-space: nowrap; font-weight: 600; }
tr.seed td { font-style: italic; color: #555; background: #fafafa; }
tr.failed td { background: #fde0e0; }
p, li { overflow-wrap: break-word; }
caption { caption-side: bottom; font-size: 0.85em; color: #555; text-align: left; padding-top: 0.3em; }
.loud { border: 3px solid #b00020; background: #fff0f0; padding: 0.6em 1em; font-weight: bold; }
.note { background: #f5f7ff; border-left: 4px solid #4060c0; padding: 0.4em 0.8em; }
.machine { border-left: 4px solid #999; background: #f7f7f7; padding: 0.4em 0.8em; color: #333; }
.table { max-width: 100%; overflow-x: auto; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; margin: 0.5em 0.5em 1.5em 0; display: inline-block; vertical-align: top; }
"""


def _figure(text: str) -> str:
    """A figure that may wrap only before its spread: ``3.00&nbsp;s ±&nbsp;5.0%``."""
    return html.escape(text).replace(" ", "&nbsp;").replace("&nbsp;±", " ±")


def to_html(blocks: Sequence[Block], images: Mapping[str, str]) -> str:
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>diskbench report</title>",
    ]
    out.append(f"<style>{_CSS}</style></head><body>")
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{esc(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            cls = f' class="{block.kind}"' if block.kind else ""
            out.append(f"<p{cls}>{esc(block.text)}</p>")
        elif isinstance(block, Bullets):
            out.append("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Table):
            # a table wider than the page scrolls in its own box; the page never scrolls sideways
            rows = ['<div class="table"><table>']
            if block.caption:
                rows.append(f"<caption>{esc(block.caption)}</caption>")
            rows.append("<thead>")
            for group_row in block.groups:
                rows.append(
                    "<tr>"
                    + "".join(f'<th colspan="{span}">{esc(label)}</th>' for label, span in group_row)
                    + "</tr>"
                )
            rows.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for h in block.header) + "</tr></thead><tbody>")
            kinds = block.kinds or ("",) * len(block.rows)
            verdict = block.header.index("verdict") if "verdict" in block.header else -1
            for row, kind in zip(block.rows, kinds, strict=True):
                cls = f' class="{kind}"' if kind else ""
                tds = (
                    f'<td class="verdict">{esc(c)}</td>'
                    if i == verdict
                    else f'<td class="num">{_figure(c)}</td>'
                    if NUMERIC.match(c)
                    else f"<td>{esc(c)}</td>"
                    for i, c in enumerate(row)
                )
                rows.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
            rows.append("</tbody></table></div>")
            out.append("\n".join(rows))
        elif isinstance(block, Chart):
            chart = block.chart
            # what the chart is of, for readers that look for one chart per workload and family
            of = ""
            if isinstance(chart, BarChart) and chart.family:
                of = f' data-workload="{esc(chart.workload)}" data-family="{esc(chart.family)}"'
            out.append(f'<img src="{esc(images[block.name])}" alt="{esc(chart.title)}"{of}>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
