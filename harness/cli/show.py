"""``diskbench show``: the figures of existing records, as a table, Markdown or JSON."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from harness.cli.common import METRIC_HELP, READ_RUNS, RECORDS_HELP, add_results_dir, named_records
from harness.cli.outputs import add_output_format, output_format
from harness.errors import ExitCode
from harness.record import Record, find_records
from harness.report import show
from harness.report.exports import EXPORTS, render_records
from harness.spec import split_list
from harness.units import Style, wants_color


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "show",
        help="print the figures of existing records: a table per cell",
        description=(
            "Read records (files, or directories such as results/records/RUN_ID or "
            "results/sweeps/NAME) and print a line per cell with the figures that matter for its "
            "workload (dd: MiB/s and total; fio: IOPS and latency p50/p99 per job; install: total "
            "and unpack; bonnie++: its rates; every cell: the device's write latency p50/p99), "
            "medians of the ok samples; failed samples with their reason. --all (or --metric) "
            "prints every metric of every cell: the median with its spread (coefficient of "
            "variation), min, max and the number of samples, in the metric's unit. Exit 2 when "
            "there is no record."
        ),
    )
    parser.add_argument(
        "records", nargs="+", metavar="RECORDS", help=f"what to show (repeatable): {RECORDS_HELP}"
    )
    add_output_format(
        parser,
        (*show.FORMATS, *EXPORTS),
        "text: a line per cell, or with --all aligned tables (colour on a terminal unless NO_COLOR is "
        "set); markdown: the tables in Markdown; json: every metric's figures and each sample's raw "
        "value; csv: a row per cell and metric; bmf: Bencher Metric Format (a benchmark per cell, a "
        "measure per metric); github-action-benchmark: its customSmallerIsBetter JSON (the metrics "
        "where smaller is better)",
    )
    parser.add_argument(
        "--metric", action="append", default=None, metavar="PATTERN", help=METRIC_HELP + ": shown"
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="every",
        help="text and markdown: every metric of every cell, a table per cell (--metric picks some)",
    )
    parser.add_argument("--samples", action="store_true", help="also print every sample's value")
    add_results_dir(parser, READ_RUNS)


def run(args: argparse.Namespace) -> int:
    records = find_records([named_records(name, args.results_dir) for name in args.records])
    patterns = [p for text in args.metric or [] for p in split_list(text)]
    metrics = show.select_metrics(records, patterns)
    fmt = output_format(args)
    if fmt in EXPORTS:
        chosen = [r for r in records] if metrics is None else [_only(r, metrics) for r in records]
        print(render_records(chosen, fmt), end="")
    elif fmt == "json":
        print(show.render_json(records, metrics=metrics), end="")
    elif fmt == "markdown":
        print(show.render_markdown(records, metrics=metrics, samples=args.samples), end="")
    else:
        style = Style(wants_color(isatty=sys.stdout.isatty(), environ=os.environ))
        text = show.render_text(records, metrics=metrics, samples=args.samples, style=style, every=args.every)
        print(text, end="")
    return ExitCode.OK


def _only(record: Record, metrics: list[str]) -> Record:
    """The record with only ``metrics`` among its samples' figures (for an export)."""
    from dataclasses import replace

    wanted = set(metrics)
    samples = tuple(
        replace(s, metrics={k: v for k, v in s.metrics.items() if k in wanted}) for s in record.samples
    )
    return replace(record, samples=samples)
