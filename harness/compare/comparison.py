"""Comparisons on disk: records in, ``comparison.json`` and a markdown summary out.

The I/O around :mod:`harness.compare` (which stays pure): find and load the
records of each side, warn loudly when they come from different machines,
write the outputs atomically, and read a comparison back
(:func:`load_comparison`).  ``diskbench compare`` is :mod:`harness.cli.compare`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import compare
from harness.compare import Settings
from harness.compare.document import Context, load_document
from harness.compare.model import Comparison, Side
from harness.compare.pointers import Pointers
from harness.errors import ExitCode, UsageError
from harness.files import parse_json, write_json_atomic, write_text_atomic
from harness.record import Record, find_records, identity_warnings
from harness.record.model import MachineInfo, SubjectInfo

COMPARISON_NAME = "comparison.json"
SUMMARY_NAME = "summary.md"


def side_info(label: str, records: Sequence[Record]) -> Side:
    """One side of records compared: its label, the rev, subject and machine of its first record,
    how many records."""
    subject = records[0].subject if records else None
    return Side(
        label=label,
        rev=subject.rev if subject is not None else None,
        subject=subject if subject is not None else SubjectInfo(),
        records=len(records),
        machine=records[0].machine if records else MachineInfo(),
        keys=Side.RECORDS,
    )


@dataclass(frozen=True)
class Compared:
    """A comparison of records and its markdown summary."""

    comparison: Comparison
    markdown: str

    @property
    def verdict(self) -> compare.Verdict:
        return self.comparison.verdict


def compare_paths(
    base: Path,
    head: Path,
    *,
    settings: Settings,
    out: Path | None = None,
    created_at: str | None = None,
    warn: Callable[[str], None] = lambda _msg: None,
    pointers: Pointers | None = None,
) -> Compared:
    """Compare the records under ``base`` and ``head``; write the outputs into ``out`` if given.

    ``pointers``: the history pages' URL and the command line, for the summary's links and its
    command that reproduces the comparison."""
    # a side is a record file, or every record under a directory (recursively, passing over
    # JSON documents of another kind such as a ``comparison.json``)
    base_records = find_records([base], recursive=True)
    head_records = find_records([head], recursive=True)
    warnings = identity_warnings(base_records, head_records)
    for warning in warnings:
        warn(f"diskbench: WARNING: {warning}")
    family = compare.judge_records(base_records, head_records, settings=settings)
    comparison = compare.build_comparison(
        family.cells,
        settings=family.settings,
        base=side_info(str(base), base_records),
        head=side_info(str(head), head_records),
        machine=head_records[0].machine,
        created_at=created_at or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        context=Context(warnings=warnings, pointers=pointers),
    )
    result = Compared(comparison, compare.render_markdown(comparison))
    if out is not None:
        write_outputs(out, result.comparison, result.markdown)
    return result


def write_comparison(path: Path, comparison: Comparison) -> None:
    """Write ``comparison.json`` atomically, byte for byte as :meth:`Comparison.to_json` gives it."""
    write_json_atomic(path, comparison.to_json())


def write_outputs(out: Path, comparison: Comparison, markdown: str) -> tuple[Path, Path]:
    """``OUT/comparison.json`` and ``OUT/summary.md``."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: pass a directory")
    json_path, md_path = out / COMPARISON_NAME, out / SUMMARY_NAME
    write_comparison(json_path, comparison)
    write_text_atomic(md_path, markdown)
    return json_path, md_path


def load_comparison(path: Path) -> Comparison:
    """Read a ``comparison.json``; a foreign, old, truncated or malformed file is a UsageError
    saying what to do."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"comparison {path} does not exist: run `diskbench compare --out DIR` first"
        ) from None
    data = parse_json(text, what=f"comparison {path}", fix="run `diskbench compare` again", error=UsageError)
    return load_document(data, source=str(path))


def verdict_exit_code(comparison: Comparison) -> int:
    """The exit code of ``compare`` and ``gate`` for a comparison.

    1 when the comparison fails (a regression, or a changed IO unless the
    spec lets changes pass), also when other cells are in error: a finding
    the pull request must see, and the cells in error are listed with it.
    3 when it does not fail but some cell is an error (both sides failed,
    base failed, a side lacks the cell): a head that loses a cell must not
    pass.  0 otherwise.
    """
    if comparison.summary.fails:
        return ExitCode.REGRESSION
    if any(cell.verdict is compare.Verdict.ERROR for cell in comparison.cells):
        return ExitCode.INFRA
    return ExitCode.OK
