"""``diskbench report``: tables and charts of records (text, HTML, Markdown)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import READ_RUNS, RECORDS_HELP, add_results_dir, named_records
from harness.cli.outputs import output_path
from harness.errors import ExitCode, UsageError
from harness.report.command import make_report
from harness.report.sides import parse_labels


def add_parser(sub: Any) -> None:
    report = sub.add_parser(
        "report",
        help="tables and plots of records, the seeds' figures beside a preset's (text, HTML, Markdown)",
        description=(
            "Read records (files, or directories such as results/sweeps/NAME), group them by sweep and "
            "machine identity, and report each series: median ± spread per cell, bonnie++'s table as "
            "bonnie++ prints it, bar charts (one per workload and metric family: the median, a min-max "
            "error bar and every sample as a point), and for a preset the seed's figures and shape claims "
            "beside ours. With --against BASE, a comparison report: base's and head's figures side by "
            "side, and the change of each median. Prints the text version; --html and --markdown also write "
            "files, with the charts as PNG files in OUT_files/ next to them: those need matplotlib "
            "(pip install 'diskbench[plots]'), the text version does not."
        ),
    )
    report.add_argument(
        "records",
        nargs="+",
        metavar="RECORDS",
        help=f"what to report (head's, with --against): {RECORDS_HELP}",
    )
    report.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="BASE",
        help="base's records, named as RECORDS are (repeatable): a comparison report, base and head "
        "side by side in every table and chart",
    )
    report.add_argument(
        "--labels",
        default="base,head",
        metavar="BASE,HEAD",
        help="with --against: the two sides' names in tables and legends",
    )
    report.add_argument("--html", type=Path, default=None, metavar="FILE", help="write an HTML report here")
    report.add_argument(
        "--markdown", type=Path, default=None, metavar="FILE", help="write a Markdown report here"
    )
    add_results_dir(report, READ_RUNS)


def run(args: argparse.Namespace) -> int:
    if args.labels != "base,head" and not args.against:
        raise UsageError(f"--labels {args.labels!r} names the two sides of a comparison: add --against BASE")
    for flag, path in (("--html", args.html), ("--markdown", args.markdown)):
        if path is not None:
            output_path(flag, path)
    result = make_report(
        [named_records(name, args.results_dir) for name in args.records],
        against=[named_records(name, args.results_dir) for name in args.against],
        labels=parse_labels(args.labels),
        html_out=args.html,
        markdown_out=args.markdown,
    )
    print(result.text, end="")
    for path in result.written:
        print(f"report: {path}")
    return ExitCode.OK
