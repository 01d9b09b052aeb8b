"""``diskbench show``: the figures of existing records, as a table, Markdown or JSON."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from harness.errors import ExitCode
from harness.record import find_records
from harness.report import show
from harness.spec import split_list
from harness.units import Style, wants_color


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "show",
        help="print the figures of existing records: a table per cell",
        description=(
            "Read records (files, or directories such as results/records/RUN_ID or "
            "results/sweeps/NAME) and print each cell's figures: per metric the median with its "
            "spread (coefficient of variation), min, max and the number of samples, values in "
            "their unit (KiB/MiB/GiB, ms, s); failed samples with their reason. Exit 2 when "
            "there is no record."
        ),
    )
    parser.add_argument("records", nargs="+", type=Path, help="record files or directories of records")
    parser.add_argument(
        "--format",
        choices=show.FORMATS,
        default="text",
        help="text: aligned tables (colour on a terminal unless NO_COLOR is set); markdown: the same "
        "tables in Markdown; json: every metric's figures and each sample's raw value",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only metrics whose name matches this glob, e.g. 'total_s' or 'host.*' "
        "(repeatable, or comma-separated)",
    )
    parser.add_argument("--samples", action="store_true", help="also print every sample's value")


def run(args: argparse.Namespace) -> int:
    records = find_records(args.records)
    patterns = [p for text in args.metric for p in split_list(text)]
    metrics = show.select_metrics(records, patterns)
    if args.format == "json":
        print(show.render_json(records, metrics=metrics), end="")
    elif args.format == "markdown":
        print(show.render_markdown(records, metrics=metrics, samples=args.samples), end="")
    else:
        style = Style(wants_color(isatty=sys.stdout.isatty(), environ=os.environ))
        print(show.render_text(records, metrics=metrics, samples=args.samples, style=style), end="")
    return ExitCode.OK
