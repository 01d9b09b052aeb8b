"""Running a sweep: records as the checkpoint, resume, setting aside other machines' records, the loop."""

from __future__ import annotations

import shutil
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InfraError, RecordError, WorkDirFull
from harness.files import write_text_atomic
from harness.record import (
    Record,
    RecordDir,
    Sample,
    SampleTally,
    load_record,
    scan_records,
    sweep_records,
    write_record,
)
from harness.record.identity import disk_name
from harness.spec import Cell
from harness.sweep.planning import estimate_sample_s
from harness.sweep.rounds import Turn, rounds

if typing.TYPE_CHECKING:
    from harness.progress import Progress
    from harness.rounds.session import Session
    from harness.subject.binaries import QemuChoice


# -- records: the checkpoint ------------------------------------------------------


def set_aside(directory: Path, fingerprint: str, fingerprint_of: Callable[[Record], str]) -> list[Path]:
    """Move records of another machine or subject (and their logs) out of the way.

    They go to ``DIR/previous/FINGERPRINT/`` with their log paths rewritten:
    kept for reading, never resumed from or mixed into this sweep's table.
    Returns where they went.
    """
    here = RecordDir.flat(directory)
    moved: list[Path] = []
    for cell_id, record in scan_records(directory).items():
        theirs = fingerprint_of(record)
        if theirs == fingerprint:
            continue
        there = here.previous(theirs)
        old_logs = here.log_root(cell_id)
        new_logs = there.log_root(cell_id)
        if old_logs.exists():
            new_logs.parent.mkdir(parents=True, exist_ok=True)
            if new_logs.exists():
                shutil.rmtree(new_logs)
            shutil.move(old_logs, new_logs)
            record = record.with_log_paths(_moved(old_logs, new_logs))
        assert record.path is not None  # scanned from a file
        dest = there.directory / record.path.name
        write_record(dest, record)
        record.path.unlink()
        moved.append(dest)
    return moved


def _moved(old: Path, new: Path) -> Callable[[str], str]:
    prefix = str(old)
    return lambda value: str(new) + value[len(prefix) :] if value.startswith(prefix) else value


CORRUPT_DIR = Path("previous") / "corrupt"


def corrupt_records(directory: Path) -> list[tuple[Path, str]]:
    """The record files directly in ``directory`` that cannot be read, each with why."""
    found: list[tuple[Path, str]] = []
    if directory.is_dir():
        for path in sorted(directory.glob("*.json")):
            try:
                load_record(path)
            except RecordError as exc:
                found.append((path, exc.message))
    return found


def set_corrupt_aside(directory: Path) -> list[tuple[Path, str]]:
    """Move the records of ``directory`` that cannot be read to ``DIR/previous/corrupt/``.

    Each goes with a ``NAME.why.txt`` beside it that says what was wrong: kept as
    evidence, never resumed from; the sweep runs that cell's samples again.  Returns where
    each went and why.  Call with the results dir's lock held.
    """
    moved: list[tuple[Path, str]] = []
    for path, why in corrupt_records(directory):
        dest_dir = directory / CORRUPT_DIR
        dest_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        dest = dest_dir / f"{path.stem}.{stamp}{path.suffix}"
        shutil.move(path, dest)
        write_text_atomic(dest_dir / f"{dest.name}.why.txt", f"{why}\n")
        moved.append((dest, why))
    return moved


def recorded_samples(directory: Path, *, keep_failures: bool) -> dict[str, int]:
    """Samples per cell a rerun of the sweep in ``directory`` would keep (failed ones too if
    ``keep_failures``): what its plan counts as done.  A record that cannot be read counts
    nothing: the run sets it aside (:func:`set_corrupt_aside`)."""
    counts: dict[str, int] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            record = load_record(path)
        except RecordError:
            continue
        counts[record.cell_id] = sum(1 for s in record.samples if keep_failures or s.ok)
    return counts


def clean_stale_temp_files(directory: Path) -> None:
    """Drop the temp files of a write that a kill interrupted (the record itself is intact)."""
    if directory.is_dir():
        for tmp in directory.glob(".*.json.*.tmp"):
            tmp.unlink(missing_ok=True)


# -- the loop ---------------------------------------------------------------------


def set_failures_aside(record: Record) -> tuple[Record, int]:
    """``record`` with its failed samples moved to its ``retried`` list, so a resume runs them
    again, and how many were moved.

    Their reasons and logs stay in the record as evidence; the good samples
    stay where they are.
    """
    return record.with_failures_aside()


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def work_dir_full(sample: Sample) -> bool:
    """Whether a failed sample failed because the work dir is full (QEMU's ENOSPC, qemu-img's)."""
    if sample.ok:
        return False
    return sample.error_type == "WorkDirFull" or "No space left on device" in str(sample.reason or "")


@dataclass(frozen=True)
class SweepResult(SampleTally):
    directory: Path
    records: list[Record]
    skipped_samples: int
    ran_samples: int
    set_aside: list[Path]

    @property
    def failed_cells(self) -> list[str]:
        return [r.cell_id for r in self.records if r.failed]


@dataclass(frozen=True)
class _Side:
    """One QEMU build of a sweep: its session, where its records go, its name in progress lines."""

    session: Session
    where: RecordDir
    name: str = ""


def run_sweep(
    name: str,
    cells: Sequence[Cell],
    session: Session,
    *,
    results_dir: Path,
    repeat: int,
    progress: Progress,
    retry_failures: bool = True,
    builds: Sequence[tuple[QemuChoice, Session]] = (),
) -> SweepResult:
    """Run every cell to ``repeat`` samples, resuming from the records already there.

    Records of this session's fingerprint are resumed (``existing=``);
    others are set aside first (see :func:`set_aside`).  A failed sample is
    a record entry like any other: the sweep goes on.  On a rerun, failed
    samples are run again (``retry_failures``, see :func:`set_failures_aside`)
    while the good ones are kept.

    With ``builds`` (a QEMU axis of two or more; ``session`` is then the first's) each round
    takes every cell's sample under each build in turn, as a gate takes its two sides, and
    each build's records go to its own directory (:meth:`RecordDir.build`). On a host disk
    model (the session's machine names it) the records go to the model's directory
    (:meth:`RecordDir.disk`); the native disk's, to the sweep's own.
    """
    where = sweep_records(results_dir, name)
    if (disk := disk_name(session.machine)) != "native":
        where = where.disk(disk)
    directory = where.directory
    sides = [_Side(s, where.build(b.name), b.name) for b, s in builds] if builds else [_Side(session, where)]
    records: dict[tuple[int, str], Record] = {}
    done = 0
    retried = 0
    moved: list[Path] = []
    for index, side in enumerate(sides):
        found, aside, again = _resume(side, cells, progress, retry_failures=retry_failures)
        moved += aside
        retried += again
        for cell_id, record in found.items():
            records[(index, cell_id)] = record
            done += min(len(record.samples), repeat)
    total = len(cells) * repeat * len(sides)
    turns = _turns(cells, sides, records, repeat)
    planned = [(cell, side) for (_, cell), (_, side) in ((t.cell, t.side) for t in turns)]
    progress.plan(
        [
            (
                c.workload.slug,
                estimate_sample_s(c, accel=side.session.opts.accel, start=side.session.opts.start),
            )
            for c, side in planned
        ]
    )
    if done:
        progress.note(f"resuming: {done} of {total} samples are recorded already and are skipped")
    if retried:
        progress.note(
            f"retrying {_plural(retried, 'failed sample')}: kept under 'retried' in the records, "
            "the good samples stay (--keep-failures keeps failures as they are)"
        )
    progress.start(total=total, done=done)
    ran = 0
    for turn in turns:
        ran += _take(turn, records, of=(repeat, len(cells)), progress=progress, directory=directory)
    progress.finish()
    return SweepResult(
        directory=directory,
        records=[records[(i, c.id)] for c in cells for i in range(len(sides)) if (i, c.id) in records],
        skipped_samples=done,
        ran_samples=ran,
        set_aside=moved,
    )


# one sample of a sweep: the cell with its number, the side with its index, the round
_SweepTurn = Turn[tuple[int, Cell], tuple[int, _Side]]


def _turns(
    cells: Sequence[Cell], sides: Sequence[_Side], records: dict[tuple[int, str], Record], repeat: int
) -> list[_SweepTurn]:
    """One more sample for each cell per round, the cells in their order (numbered for the
    progress lines): a resume takes what the ``records`` lack in the order of a first run."""
    recorded = {key: len(record.samples) for key, record in records.items()}
    numbered = list(enumerate(cells, start=1))
    return [
        turn
        for turn in rounds(range(1, repeat + 1), lambda _n: numbered, list(enumerate(sides)))
        if recorded.get((turn.side[0], turn.cell[1].id), 0) < turn.round
    ]


def _take(
    turn: _SweepTurn,
    records: dict[tuple[int, str], Record],
    *,
    of: tuple[int, int],
    progress: Progress,
    directory: Path,
) -> int:
    """Take ``turn``'s sample into ``records`` (``of``: the sweep's repeat and cells, for the
    label); 0 where a cell listed twice had its sample of the round already, else 1.  Stops the
    sweep (WorkDirFull) when the sample found the work dir full."""
    (number, cell), (index, side), round_number = turn.cell, turn.side, turn.round
    repeat, count = of
    existing = records.get((index, cell.id))
    if existing is not None and len(existing.samples) >= round_number:
        return 0  # a cell listed twice: its first turn of the round took the sample
    path = side.where.path(cell.id)
    build = f", QEMU {side.name}" if side.name else ""
    label = (
        f"[round {round_number}/{repeat}, cell {number}/{count}{build}] "
        if repeat > 1
        else f"[{number}/{count}{build}] "
    )
    progress.begin(cell.id)
    t0 = time.monotonic()
    try:
        _, record = side.session.run_cell(
            cell,
            where=side.where,
            existing=existing,
            progress=progress.note,
            label=label,
            of=repeat,
            upto=round_number,
        )
    except OSError as exc:
        raise InfraError(f"cannot write the record {path}: {exc.strerror or exc}") from exc
    records[(index, cell.id)] = record
    last = record.samples[-1]
    progress.end(cell.id, time.monotonic() - t0, ok=last.ok, kind=cell.workload.slug)
    if work_dir_full(last):
        progress.finish()
        raise WorkDirFull(
            f"stopping the sweep: {'the work dir is full' if last.reason is None else last.reason}; "
            f"every later sample would fail the same way. {len(records)} record(s) "
            f"kept in {directory}: free some space or pass --work-dir on a larger disk, "
            "then run the same command to resume"
        )
    return 1


def _resume(
    side: _Side, cells: Sequence[Cell], progress: Progress, *, retry_failures: bool
) -> tuple[dict[str, Record], list[Path], int]:
    """One side's records to resume from (by cell id), the records it set aside, and how many
    failed samples it will run again."""
    from harness.record import record_fingerprint

    directory = side.where.directory
    clean_stale_temp_files(directory)
    for dest, why in set_corrupt_aside(directory):
        progress.note(f"set aside a record that cannot be read: {dest} ({why}); its cell runs again")
    moved = set_aside(directory, side.session.fingerprint, record_fingerprint)
    for dest in moved:
        progress.note(f"set aside a record of another machine or subject: {dest}")
    found = scan_records(directory)
    out: dict[str, Record] = {}
    retried = 0
    for cell in cells:
        if cell.id in found:
            record = found[cell.id]
            if retry_failures:
                record, moved_samples = set_failures_aside(record)
                retried += moved_samples
            out[cell.id] = record
    return out, moved, retried
