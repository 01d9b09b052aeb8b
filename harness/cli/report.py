"""``diskbench report``: tables and charts of records (text, HTML, Markdown)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import ExitCode
from harness.report.command import make_report


def add_parser(sub: Any) -> None:
    report = sub.add_parser(
        "report",
        help="tables and plots of records, the seeds' figures beside a preset's (text, HTML, Markdown)",
        description=(
            "Read records (files, or directories such as results/sweeps/NAME), group them by sweep and "
            "machine identity, and report each series: median ± spread per cell, bonnie++'s table as "
            "bonnie++ prints it, bar charts with min-max error bars, and for a preset the seed's figures "
            "and shape claims beside ours. Prints the text version; --html and --markdown also write "
            "files, with the charts as PNG files in OUT_files/ next to them: those need matplotlib "
            "(pip install 'diskbench[plots]'), the text version does not."
        ),
    )
    report.add_argument("records", nargs="+", type=Path, help="record files or directories of records")
    report.add_argument("--html", type=Path, default=None, metavar="OUT", help="write an HTML report here")
    report.add_argument(
        "--markdown", type=Path, default=None, metavar="OUT", help="write a Markdown report here"
    )


def run(args: argparse.Namespace) -> int:
    result = make_report(args.records, html_out=args.html, markdown_out=args.markdown)
    print(result.text, end="")
    for path in result.written:
        print(f"report: {path}")
    return ExitCode.OK
