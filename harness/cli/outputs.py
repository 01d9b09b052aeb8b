"""What a command writes and prints besides its result: the output format and its refused old
spelling, files it writes (checked before any work), a run's saved name and export, JUnit.

argparse lives only in :mod:`harness.cli`; the domain functions take plain values.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import err
from harness.errors import ExitCode, UsageError

# how a deprecated spelling's help starts: the new name follows
DEPRECATED = "deprecated: the old spelling of"
# how the help of a flag a command refuses starts: the flag to use follows
REFUSED = "refused here, use"


class _RefusedFormat(argparse.Action):
    """``--format`` where it is not the image format: bad usage, one line naming the flag to use."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        parser.exit(
            ExitCode.USAGE,
            f"{parser.prog}: error: --format {values}: --format is the image format (diskbench run "
            f"--format qcow2); what this command prints is chosen with --output-format\n",
        )


def add_output_format(parser: Any, formats: tuple[str, ...], help_text: str) -> None:
    """``--output-format FORMAT`` (what a command prints); ``--format`` is refused there (exit 2):
    it is the image format, in ``run`` and in sweep specs."""
    parser.add_argument(
        "--output-format",
        choices=formats,
        default="text",
        metavar="FORMAT",
        help=f"{help_text}; one of %(choices)s",
    )
    parser.add_argument(
        "--format",
        dest="refused_format",
        action=_RefusedFormat,
        default=None,
        metavar="FORMAT",
        help=f"{REFUSED} --output-format: --format is the image format (run)",
    )


def output_path(flag: str, path: Path) -> Path:
    """A file a command will write, checked before any work: its directory is made if only that
    level is missing; a missing parent of it, a directory in its place or a directory that cannot
    be written is bad input naming the flag."""
    import tempfile

    directory = path.parent
    if path.is_dir():
        raise UsageError(f"{flag} {path}: a directory: name a file in it")
    if not directory.exists():
        if not directory.parent.is_dir():
            raise UsageError(
                f"{flag} {path}: {directory.parent} does not exist: create it first, or write elsewhere"
            )
        return path
    if not directory.is_dir():
        raise UsageError(f"{flag} {path}: {directory} is not a directory: write elsewhere")
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".diskbench-probe-"):
            pass
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write in {directory} ({exc.strerror or exc}): write elsewhere"
        ) from None
    return path


def add_save_and_export(group: Any) -> None:
    """``--save NAME`` and ``--output-format FORMAT --output FILE`` of ``run``: a name for the
    run, and an export of its records written by the run itself."""
    from harness.report.exports import EXPORTS

    group.add_argument(
        "--save",
        metavar="NAME",
        default=None,
        help="name the run: `diskbench show NAME` and `diskbench compare NAME latest` find it "
        "(RESULTS/saved/NAME; saving a name again moves it to the new run)",
    )
    group.add_argument(
        "--output-format",
        choices=EXPORTS,
        default=None,
        metavar="FORMAT",
        help="also write the records as this export, one of %(choices)s (as show writes it), to --output",
    )
    group.add_argument(
        "--output", type=Path, default=None, metavar="FILE", help="where --output-format writes"
    )


def check_save_and_export(args: argparse.Namespace) -> None:
    """The options of :func:`add_save_and_export` checked before anything runs."""
    from harness.record.store import check_save_name

    if args.save is not None:
        check_save_name(args.save)
    if (args.output_format is None) != (args.output is None):
        raise UsageError(
            "--output-format and --output go together: give both, e.g. --output-format csv --output run.csv"
        )
    if args.output is not None:
        output_path("--output", args.output)


def leave_saved_and_exported(args: argparse.Namespace, records: Any, run_dir: Path) -> None:
    """After a run: its name saved, its export written (each said on stderr)."""
    from harness.files import write_text_atomic
    from harness.record.store import save_run
    from harness.report.exports import render_records

    if args.save is not None:
        save_run(args.results_dir, args.save, run_dir)
        err(f"saved as {args.save}: `diskbench compare {args.save} latest` compares a later run with it")
    if args.output is not None and records:
        write_text_atomic(args.output, render_records(records, args.output_format))
        err(f"{args.output_format}: {args.output}")


def output_format(args: argparse.Namespace) -> str:
    """The output format asked for."""
    return str(args.output_format)


def add_junit_option(parser: Any, *, default: str) -> None:
    """``--junit FILE``: the verdicts as JUnit XML (``compare`` and ``gate``)."""
    parser.add_argument(
        "--junit",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"write the verdicts as JUnit XML here: a testcase per cell, a regression a failure, an "
        f"inconclusive cell skipped with its reason (without it: {default})",
    )
