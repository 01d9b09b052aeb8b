"""``diskbench compare A B``: a verdict per cell, ``comparison.json`` and a markdown summary."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import add_compare_options, err, settings_from_args
from harness.comparison import COMPARISON_NAME, SUMMARY_NAME, compare_paths, verdict_exit_code


def add_parser(sub: Any) -> None:
    """``diskbench compare``."""
    parser = sub.add_parser(
        "compare",
        help="compare the records of base and head: a verdict per cell, comparison.json, markdown",
        description=(
            "Compare two sets of records of the same cells (base, then head), e.g. the two sides of "
            "an interleaved run on one runner. Per cell and gated metric: Mann-Whitney U test, "
            "bootstrap interval of the ratio of medians (paired by round when the rounds match) and "
            "a minimum effect; structural counters that moved make a cell 'changed'. Prints the markdown "
            "summary. Exit 1 when a cell regressed or changed (unless --changed-passes), else 0."
        ),
    )
    parser.add_argument("base", type=Path, help="base records: a record file or a directory of them")
    parser.add_argument("head", type=Path, help="head records: a record file or a directory of them")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"write {COMPARISON_NAME} and {SUMMARY_NAME} into DIR (atomically)",
    )
    add_compare_options(parser)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    result = compare_paths(
        args.base,
        args.head,
        settings=settings,
        out=args.out,
        warn=err,
    )
    print(result.markdown, end="")
    if args.out is not None:
        print(f"comparison: {args.out / COMPARISON_NAME}")
    return verdict_exit_code(result.document)
