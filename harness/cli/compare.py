"""``diskbench compare A B``: a verdict per cell, ``comparison.json`` and a markdown summary."""

from __future__ import annotations

import argparse
import json
import os
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.cli.common import (
    READ_RUNS,
    RECORDS_HELP,
    TESTS_WORDS,
    add_compare_options,
    add_pages_option,
    add_results_dir,
    err,
    named_records,
    pages_url_from_args,
    settings_from_args,
)
from harness.cli.outputs import add_junit_option, add_output_format, output_format
from harness.compare.comparison import COMPARISON_NAME, SUMMARY_NAME, compare_paths, verdict_exit_code
from harness.compare.model import Comparison
from harness.compare.pointers import Pointers
from harness.compare.settings import Settings
from harness.compare.text_table import SORTS, render_text
from harness.compare.verdict import Verdict
from harness.files import write_text_atomic
from harness.report.exports import EXPORTS, comparison_junit, render_comparison
from harness.units import Style, wants_color

if typing.TYPE_CHECKING:
    from harness.record import Record


def add_parser(sub: Any) -> None:
    """``diskbench compare``."""
    parser = sub.add_parser(
        "compare",
        help="compare the records of base and head: a verdict per cell, comparison.json, markdown",
        description=(
            "Compare two sets of records of the same cells (base, then head), e.g. the two sides of "
            "an interleaved run on one runner. Per cell and gated metric: a test, the bootstrap "
            "interval of the ratio of medians (paired by round when the rounds match) and a minimum "
            f"effect. {TESTS_WORDS} Structural counters that moved make a cell 'changed'. Prints a table of "
            "every cell (--output-format markdown: the summary a pull request gets; json: comparison.json)."
        ),
    )
    parser.add_argument("base", help=f"base's records: {RECORDS_HELP}")
    parser.add_argument("head", help="head's records, named as base's are (e.g. latest)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"write {COMPARISON_NAME} and {SUMMARY_NAME} into DIR (atomically)",
    )
    shown = parser.add_argument_group("what is printed")
    add_output_format(
        shown,
        ("text", "markdown", "json", *EXPORTS, "junit"),
        "text: an aligned table of every cell (colour on a terminal unless NO_COLOR is set); "
        f"markdown: the summary a pull request gets ({SUMMARY_NAME}); json: the comparison "
        f"document ({COMPARISON_NAME}, raw values); csv: a row per cell and metric; bmf: head's "
        "medians in Bencher Metric Format; github-action-benchmark: head's medians as its "
        "customSmallerIsBetter JSON; junit: the verdicts as JUnit XML",
    )
    add_junit_option(parser, default="none, or junit.xml in --out DIR")
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
    add_results_dir(parser, READ_RUNS)


def run(args: argparse.Namespace) -> int:
    from harness.record import find_records

    base, head = named_records(args.base, args.results_dir), named_records(args.head, args.results_dir)
    names = [
        n
        for path in (base, head)
        for r in find_records([path], recursive=True)
        for s in r.samples
        for n in s.metrics
    ]
    settings = settings_from_args(args, names=names)
    from harness.cli.reproduce import command_argv

    reproduce = command_argv(args, ["compare"], positionals=[str(base), str(head)], leave_out=OUTPUT_ONLY)
    result = compare_paths(
        base,
        head,
        settings=settings,
        out=args.out,
        warn=err,
        pointers=Pointers(pages_url=pages_url_from_args(args), reproduce=tuple(reproduce)),
    )
    fmt = output_format(args)
    comparison = result.comparison
    decide = decide_commands(comparison, base, settings=settings, args=args)
    junit = comparison_junit(comparison, decide=decide)
    if fmt in EXPORTS:
        print(render_comparison(comparison, fmt), end="")
    elif fmt == "junit":
        print(junit, end="")
    elif fmt == "json":
        print(json.dumps(comparison.to_json(), indent=2, allow_nan=False))
    elif fmt == "markdown":
        print(result.markdown, end="")
    else:
        style = Style(wants_color(isatty=sys.stdout.isatty(), environ=os.environ))
        print(render_text(comparison, only_changed=args.only_changed, sort=args.sort, style=style), end="")
    if fmt == "text":
        print(decide_text(comparison, base, settings=settings, args=args), end="")
    # beside a document on stdout, paths go to stderr: stdout stays one document
    say = print if fmt == "text" else err
    for path in [args.junit, *([args.out / JUNIT_NAME] if args.out is not None else [])]:
        if path is not None:
            write_text_atomic(path, junit)
            say(f"junit: {path}")
    if args.out is not None:
        say(f"comparison: {args.out / COMPARISON_NAME}")
    return verdict_exit_code(comparison)


def rounds_to_decide(comparison: Comparison, settings: Settings) -> tuple[list[str], int | None]:
    """The inconclusive cells' ids, and how many samples a cell each side would decide them
    (None: more samples would not, their change sits on the minimum effect)."""
    rows = [r for r in comparison.summary.sensitivity if r.verdict is Verdict.INCONCLUSIVE]
    needed: list[int] = []
    for row in rows:
        have = row.rounds
        if row.rounds_to_decide is not None:
            needed.append(max(row.rounds_to_decide, settings.min_samples))
        elif have < settings.min_samples:
            needed.append(settings.min_samples)
    cells = list(dict.fromkeys(r.cell_id for r in rows))
    return cells, max(needed) if needed else None


JUNIT_NAME = "junit.xml"


#: what says only where and how a comparison is printed or written: left out of its command again
OUTPUT_ONLY = ("out", "junit", "output_format", "only_changed", "sort", "pages_url")


def decide_argvs(
    records: Sequence[Record], samples: int, args: argparse.Namespace
) -> tuple[list[str], list[str]]:
    """What decides the cells of ``records``: the ``diskbench run`` of those cells, ``samples``
    a cell (run once per side), with the accelerator they ran under and the results dir; then the
    ``diskbench compare`` of those two runs with this comparison's own options.  The one builder
    of both, for the text and for JUnit."""
    from harness.cli.reproduce import command_argv
    from harness.cli.run import run_argv
    from harness.spec import Cell

    run = run_argv([Cell.from_dict(r.cell.data) for r in records], repeat=samples)
    accels = {r.accel for r in records}
    if len(accels) == 1 and None not in accels:
        run += ["--accel", str(accels.pop())]
    again = command_argv(args, ["compare"], positionals=["latest~1", "latest"], leave_out=OUTPUT_ONLY)
    run += _results_dir(again[again.index("latest") + 1 :])
    return run, again


def _results_dir(options: list[str]) -> list[str]:
    """``--results-dir DIR`` among a command's options, or nothing: a run writes where compare reads."""
    if "--results-dir" in options:
        at = options.index("--results-dir")
        return options[at : at + 2]
    return []


def decide_commands(
    comparison: Comparison, base: Path, *, settings: Settings, args: argparse.Namespace
) -> dict[str, str]:
    """Per inconclusive cell, the ``diskbench run`` of that cell with the samples that would
    decide it (run once per side, then compare); none where more samples would not."""
    from harness.compare.pointers import command_line
    from harness.record import find_records

    cells, samples = rounds_to_decide(comparison, settings)
    if not cells or samples is None:
        return {}
    records = {r.cell_id: r for r in find_records([base], recursive=True) if r.cell_id in cells}
    decide = {}
    for cell_id, record in records.items():
        run, again = decide_argvs([record], samples, args)
        decide[cell_id] = f"{command_line(run)} (once per side), then {command_line(again)}"
    return decide


def decide_text(comparison: Comparison, base: Path, *, settings: Settings, args: argparse.Namespace) -> str:
    """What to run to decide the inconclusive cells: their ``diskbench run`` with enough samples,
    once per side, and the comparison of those two runs; empty when nothing is inconclusive."""
    from harness.record import find_records

    cells, samples = rounds_to_decide(comparison, settings)
    if not cells:
        return ""
    count = f"{len(cells)} inconclusive cell{'s' if len(cells) != 1 else ''}"
    if samples is None:
        return (
            f"\nMore samples would not decide the {count}: the change sits on the minimum effect; "
            "set that metric's own with --rule METRIC:PCT\n"
        )
    records = [r for r in find_records([base], recursive=True) if r.cell_id in cells]
    run, again = decide_argvs(records, samples, args)
    return "\n".join(
        [
            "",
            f"To decide the {count}: {samples} samples a cell on each side. Run, once with each side:",
            *wrap_command(run),
            "then compare the two runs:",
            *wrap_command(again),
            "",
        ]
    )


def wrap_command(argv: list[str], *, width: int = 100, indent: str = "  ") -> list[str]:
    """A command line as shell lines within ``width`` columns, continued with backslashes."""
    import shlex

    words: list[str] = []
    for arg in argv:  # a flag and its value stay on one line
        quoted = shlex.quote(arg)
        if words and words[-1].startswith("--") and " " not in words[-1] and not arg.startswith("--"):
            words[-1] += " " + quoted
        else:
            words.append(quoted)
    lines: list[str] = []
    line = indent
    for word in words:
        if line.strip() and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = indent + "    "
        line += ("" if not line.strip() else " ") + word
    return [*lines, line]
