"""``diskbench compare A B``: a verdict per cell, ``comparison.json`` and a markdown summary."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import (
    add_compare_options,
    add_pages_option,
    compare_argv,
    err,
    pages_url_from_args,
    settings_from_args,
)
from harness.compare.comparison import COMPARISON_NAME, SUMMARY_NAME, compare_paths, verdict_exit_code
from harness.compare.pointers import Pointers
from harness.compare.settings import Settings
from harness.compare.text_table import SORTS, render_text
from harness.units import Style, wants_color


def add_parser(sub: Any) -> None:
    """``diskbench compare``."""
    parser = sub.add_parser(
        "compare",
        help="compare the records of base and head: a verdict per cell, comparison.json, markdown",
        description=(
            "Compare two sets of records of the same cells (base, then head), e.g. the two sides of "
            "an interleaved run on one runner. Per cell and gated metric: Mann-Whitney U test, "
            "bootstrap interval of the ratio of medians (paired by round when the rounds match) and "
            "a minimum effect; structural counters that moved make a cell 'changed'. Prints a table of "
            "every cell (--format markdown: the summary a pull request gets; json: comparison.json). "
            "Exit 1 when a cell regressed or changed (unless --changed-passes), 2 when a side has no "
            "record, else 0."
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
    shown = parser.add_argument_group("what is printed")
    shown.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default="text",
        help="text: an aligned table of every cell (colour on a terminal unless NO_COLOR is set); "
        f"markdown: the summary a pull request gets ({SUMMARY_NAME}); json: the comparison "
        f"document ({COMPARISON_NAME}, raw values)",
    )
    shown.add_argument(
        "--only-changed", action="store_true", help="text: leave out the cells whose verdict is unchanged"
    )
    shown.add_argument(
        "--sort",
        choices=SORTS,
        default="cell",
        help="text: order the cells by cell id, or by effect size (the largest change first)",
    )
    add_compare_options(parser)
    add_pages_option(parser)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    reproduce = ["diskbench", "compare", str(args.base), str(args.head), *compare_argv(args)]
    if settings.seed != Settings.seed:
        reproduce += ["--seed", str(settings.seed)]
    result = compare_paths(
        args.base,
        args.head,
        settings=settings,
        out=args.out,
        warn=err,
        pointers=Pointers(pages_url=pages_url_from_args(args), reproduce=tuple(reproduce)),
    )
    if args.format == "json":
        print(json.dumps(result.comparison.to_json(), indent=2, allow_nan=False))
    elif args.format == "markdown":
        print(result.markdown, end="")
    else:
        style = Style(wants_color(isatty=sys.stdout.isatty(), environ=os.environ))
        print(
            render_text(result.comparison, only_changed=args.only_changed, sort=args.sort, style=style),
            end="",
        )
    if args.out is not None:
        # beside JSON on stdout, the path goes to stderr: stdout stays one document
        (err if args.format == "json" else print)(f"comparison: {args.out / COMPARISON_NAME}")
    return verdict_exit_code(result.comparison)
