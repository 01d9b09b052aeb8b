"""``diskbench report``: tables, plots and the seeds' figures beside ours.

:func:`make_report` loads records, groups them into series
(:mod:`~harness.report.series`), builds the blocks
(:mod:`~harness.report.blocks`) and writes them as text, and as HTML and
Markdown where asked; the last two draw the charts into PNG files in a
``NAME_files/`` directory next to the output (:mod:`~harness.report.charts`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ExitCode
from harness.report.blocks import build_report, charts_in
from harness.report.charts import draw_charts
from harness.report.html import to_html
from harness.report.markdown import to_markdown
from harness.report.series import group_series, load_records
from harness.report.text import to_text


@dataclass(frozen=True)
class ReportResult:
    text: str
    written: tuple[Path, ...]
    series: int


def make_report(
    paths: Sequence[Path], *, html_out: Path | None = None, markdown_out: Path | None = None
) -> ReportResult:
    """Load, group, build; write HTML and Markdown where asked; return the text version too."""
    records, dirs = load_records(paths)
    series = group_series(records, dirs)
    blocks = build_report(series)
    written = []
    for out, writer in ((html_out, to_html), (markdown_out, to_markdown)):
        if out is None:
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        images = draw_charts(charts_in(blocks), out)
        out.write_text(writer(blocks, images), encoding="utf-8")
        written.append(out)
    return ReportResult(text=to_text(blocks), written=tuple(written), series=len(series))


# -- the command -------------------------------------------------------------------------------------------


def add_report_parser(sub: Any) -> None:
    report = sub.add_parser(
        "report",
        help="tables and plots of records, the seeds' figures beside a preset's (text, HTML, Markdown)",
        description=(
            "Read records (files, or directories such as results/sweeps/NAME), group them by sweep and "
            "machine identity, and report each series: median ± spread per cell, bonnie++'s table as "
            "bonnie++ prints it, bar charts with min-max error bars, and for a preset the seed's figures "
            "and shape claims beside ours. Prints the text version; --html and --markdown also write "
            "files, with the charts as PNG files in OUT_files/ next to them."
        ),
    )
    report.add_argument("records", nargs="+", type=Path, help="record files or directories of records")
    report.add_argument("--html", type=Path, default=None, metavar="OUT", help="write an HTML report here")
    report.add_argument(
        "--markdown", type=Path, default=None, metavar="OUT", help="write a Markdown report here"
    )


def cmd_report(args: argparse.Namespace) -> int:
    result = make_report(args.records, html_out=args.html, markdown_out=args.markdown)
    print(result.text, end="")
    for path in result.written:
        print(f"report: {path}")
    return ExitCode.OK
