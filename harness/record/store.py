"""The one store of records: where a record lives, how every reader finds, loads and scans them,
and how they are written (atomically: a crash leaves the old file or the new one, never half).

JSON is this module's business only: everything above it builds, passes and reads
:class:`~harness.record.model.Record` values.

Where records live (:class:`RecordDir`, one file per cell and its logs beside):

- a run: ``RESULTS/records/RUN_ID/CELL_ID.json``, logs in ``RESULTS/logs/RUN_ID/CELL_ID/``
  (:func:`run_records`);
- a sweep: ``RESULTS/sweeps/NAME/CELL_ID.json``, logs in ``RESULTS/sweeps/NAME/logs/CELL_ID/``
  (:func:`sweep_records`); a merge's output and the records a sweep sets aside have the same
  shape (:meth:`RecordDir.flat`);
- a gate's side: ``OUT/records/SIDE/CELL_ID.json``, logs in ``OUT/logs/SIDE/CELL_ID/``
  (:func:`gate_records`).

One way in: :func:`find_records` (files and directories a person names), :func:`load_record`
(one file), :func:`scan_records` (a directory's records by cell id).  Every one of them goes
through :func:`load_record`, so a damaged file (binary bytes, truncated JSON, a directory named
``x.json``, ``"samples": "oops"``, a NaN figure) is one :class:`RecordError` naming the file
and the field, never merged, resumed from or compared.  One way out: :func:`write_record`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import RecordError, UsageError
from harness.files import parse_json, write_json_atomic
from harness.record.model import SCHEMA, VERSION, Record
from harness.record.schema import non_finite_problem, schema_problem

# directories beside the records that hold no record of this set: the records of another
# machine or subject set aside by a sweep, a preset's probe results, the logs
NOT_RECORDS = ("previous", "probes", "logs")


@dataclass(frozen=True)
class RecordDir:
    """A directory of records, one ``CELL_ID.json`` per cell, and where the cells' logs go."""

    directory: Path
    logs: Path

    @classmethod
    def flat(cls, directory: Path) -> RecordDir:
        """A sweep's shape: the records in ``directory``, their logs in ``directory/logs``."""
        return cls(directory, directory / "logs")

    def path(self, cell_id: str) -> Path:
        return self.directory / f"{cell_id}.json"

    def log_root(self, cell_id: str) -> Path:
        return self.logs / cell_id

    def previous(self, fingerprint: str) -> RecordDir:
        """Where records of another machine or subject are set aside: ``DIR/previous/FINGERPRINT``."""
        return RecordDir.flat(self.directory / "previous" / fingerprint)

    def disk(self, name: str) -> RecordDir:
        """Where the records of a sweep on host disk model ``name`` go (``DIR/host-disk-NAME``, logs
        ``LOGS/host-disk-NAME``; the native disk's stay in ``DIR``): the cells are the same, the
        disk under the work dir is not."""
        return RecordDir(self.directory / f"{DISK_PREFIX}{name}", self.logs / f"{DISK_PREFIX}{name}")

    def build(self, name: str) -> RecordDir:
        """Where the records of one QEMU build of a run or sweep with several go
        (``DIR/qemu-NAME``, logs ``LOGS/qemu-NAME``): the cells are the same, the builds are not."""
        slug = build_slug(name)
        return RecordDir(self.directory / slug, self.logs / slug)

    def write(self, record: Record) -> Path:
        """Write ``record`` as its cell's file here; returns the file."""
        path = self.path(record.cell_id)
        write_record(path, record)
        return path


#: the directories of a run's or sweep's QEMU builds (:meth:`RecordDir.build`) start so
BUILD_PREFIX = "qemu-"


def build_slug(name: str) -> str:
    """``10.0`` -> ``qemu-10.0``; a path is kept short and unique (``qemu-path-1a2b3c4d``)."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+~_-]{0,79}", name):
        return BUILD_PREFIX + name.replace(":", "_")
    return f"{BUILD_PREFIX}path-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


#: the directories of a sweep's host disk models (:meth:`RecordDir.disk`) start so
DISK_PREFIX = "host-disk-"


def build_dirs(directory: Path) -> list[Path]:
    """The record directories below a run's or sweep's directory: its QEMU builds' (none: one
    build), its host disk models' (none: the native disk only) and their builds'."""
    if not directory.is_dir():
        return []
    disks = sorted(p for p in directory.glob(DISK_PREFIX + "*") if p.is_dir())
    return sorted(
        p
        for d in (directory, *disks)
        for p in (*d.glob(BUILD_PREFIX + "*"), *([d] if d in disks else []))
        if p.is_dir()
    )


def run_records(results_dir: Path, run_id: str) -> RecordDir:
    return RecordDir(results_dir / "records" / run_id, results_dir / "logs" / run_id)


def sweep_records(results_dir: Path, name: str) -> RecordDir:
    return RecordDir.flat(results_dir / "sweeps" / name)


def gate_records(out_dir: Path, side: str) -> RecordDir:
    return RecordDir(out_dir / "records" / side, out_dir / "logs" / side)


def record_path(results_dir: Path, run_id: str, cell_id: str) -> Path:
    return run_records(results_dir, run_id).path(cell_id)


def sweep_dir(results_dir: Path, name: str) -> Path:
    return sweep_records(results_dir, name).directory


def _load_document(path: Path) -> dict[str, Any]:
    """A record file's JSON document, checked (see :func:`load_record`)."""
    if path.is_dir():
        raise RecordError(f"record {path} is a directory, not a record file: move it out of the way")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RecordError(f"record {path} does not exist: check the path") from None
    except OSError as exc:
        raise RecordError(f"record {path} cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(
            f"record {path} is not text (binary bytes at offset {exc.start}): delete it and re-run its cell"
        ) from None
    try:
        data = parse_json(text, what=f"record {path}", fix="delete it and re-run its cell", error=RecordError)
    except RecursionError:
        raise RecordError(f"record {path} nests too deeply: delete it and re-run its cell") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise RecordError(f"{path} is not a diskbench record: pass record files only")
    version = data.get("version")
    if version != VERSION:
        raise RecordError(
            f"record {path} has version {version!r}, this diskbench reads version {VERSION}: "
            "re-run its cell with this version"
        )
    problem = schema_problem(data) or non_finite_problem(data)
    if problem:
        raise RecordError(f"record {path}: {problem}: delete it and re-run its cell")
    return data


def load_record(path: Path) -> Record:
    """Read a record, checked against ``harness/data/record.schema.json``, as a :class:`Record`.

    Every reader goes through here, so a damaged file (binary bytes, truncated
    JSON, a directory named ``x.json``, ``"samples": "oops"``, a NaN figure)
    is one :class:`RecordError` naming the file and the field, never merged,
    resumed from or compared.
    """
    return Record.from_json(_load_document(path), path=path)


def write_record(path: Path, record: Record) -> None:
    """Write a record atomically, byte for byte as :meth:`Record.to_json` gives it: the one writer."""
    write_json_atomic(path, record.to_json())


def _foreign(path: Path) -> bool:
    """A JSON document that says it is something other than a record (a ``comparison.json``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False  # load_record says what is wrong with it
    schema = data.get("schema") if isinstance(data, dict) else None
    return isinstance(schema, str) and schema != SCHEMA


def record_files(path: Path, *, recursive: bool = False) -> list[Path]:
    """The record files of ``path``: the file itself, or the ``*.json`` of a directory.

    ``recursive`` also looks in subdirectories, but never in those of :data:`NOT_RECORDS`.
    JSON documents of another kind (any whose ``schema`` is not a record's) are passed over.
    A path that does not exist is a :class:`UsageError`.
    """
    if not path.exists():
        raise UsageError(f"{path} does not exist: pass a record file or a directory of records")
    if not path.is_dir():
        if path.suffix != ".json":
            raise UsageError(
                f"{path} is not a diskbench record (records are RESULTS/records/RUN_ID/CELL_ID.json): "
                "pass a record file, a run's directory or latest"
            )
        return [path]
    found = path.rglob("*.json") if recursive else path.glob("*.json")
    return [
        p
        for p in sorted(found)
        if not any(part in NOT_RECORDS for part in p.relative_to(path).parts[:-1]) and not _foreign(p)
    ]


def find_records(paths: Sequence[Path], *, recursive: bool = False) -> list[Record]:
    """The records of record files and directories; none at all is a :class:`UsageError`."""
    records = [load_record(p) for path in paths for p in record_files(path, recursive=recursive)]
    if not records:
        deep = ", searched recursively" if recursive else ""
        raise UsageError(
            f"{', '.join(map(str, paths))}: no records found (*.json{deep}): "
            "pass a record file or a directory of diskbench records"
        )
    return records


def scan_records(directory: Path) -> dict[str, Record]:
    """The records directly in ``directory`` (a sweep's) by cell id (each knows its ``path``).

    A record that cannot be read is a :class:`RecordError`: records are written atomically, so
    an unreadable one was damaged by something else; the message says which file.
    """
    found: dict[str, Record] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*.json")):
        record = load_record(path)
        found[record.cell_id] = record
    return found


# --- naming a set of records: a record, a run or sweep directory, a results directory, latest ------

LATEST = "latest"


@dataclass(frozen=True)
class Named:
    """What a name a person gave stands for: the records' path, and how it was read from the name
    (None where the name was that path already)."""

    path: Path
    note: str | None = None


def runs(results_dir: Path) -> list[Path]:
    """The run and sweep directories under ``results_dir`` that hold records, oldest first (by
    their newest record's time; a run's id, which starts with its time, breaks ties)."""
    found = [
        d
        for parent in (results_dir / "records", results_dir / "sweeps")
        if parent.is_dir()
        for d in parent.iterdir()
        if d.is_dir() and any(d.glob("*.json"))
    ]

    def newest(directory: Path) -> tuple[float, str]:
        return max(p.stat().st_mtime for p in directory.glob("*.json")), directory.name

    return sorted(found, key=newest)


#: a results dir's saved names (``run --save NAME``): ``RESULTS/saved/NAME`` holds the run's path
SAVED = "saved"
_SAVE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_save_name(name: str) -> str:
    """A name a run can be saved as, or bad input that says what one looks like."""
    if not _SAVE_NAME.fullmatch(name) or _LATEST.fullmatch(name) or name.endswith(".json"):
        raise UsageError(
            f"--save {name!r}: use letters, digits, '.', '_' and '-' (64 at most, not latest or a "
            "file name), e.g. --save baseline"
        )
    return name


def save_run(results_dir: Path, name: str, run_dir: Path) -> Path:
    """Name ``run_dir`` ``name`` in ``results_dir`` (a name saved again moves to the new run)."""
    from harness.files import write_text_atomic

    path = results_dir / SAVED / check_save_name(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, f"{run_dir.resolve()}\n")
    return path


def _saved(name: str, results_dir: Path) -> Named | None:
    """The run saved as ``name`` under ``results_dir``, or None where none is."""
    path = results_dir / SAVED / name
    if not _SAVE_NAME.fullmatch(name) or not path.is_file():
        return None
    target = Path(path.read_text(encoding="utf-8").strip())
    if not target.is_dir():
        raise UsageError(f"{name}: saved as {target}, which is gone: save another run as {name}")
    return Named(target, f"{name}: {target}")


def _is_results_dir(path: Path) -> bool:
    return (
        path.is_dir()
        and not any(path.glob("*.json"))
        and any((path / sub).is_dir() for sub in ("records", "sweeps"))
    )


def name_records(name: str, *, results_dir: Path) -> Named:
    """The records ``name`` names: a record file or a directory of records as it is; a results
    directory (``results``: its ``records/`` and ``sweeps/``) stands for its newest run;
    ``latest`` for the newest run under ``results_dir``, ``latest~1`` the one before it.

    A name that is none of these is a :class:`UsageError` that says what exists."""
    path = Path(name)
    match = _LATEST.fullmatch(name)
    if match and not path.exists():
        back = int(match.group(1) or 0)
        found = runs(results_dir)
        if len(found) <= back:
            have = f"{len(found)} run{'s' if len(found) != 1 else ''}"
            raise UsageError(
                f"{name}: {results_dir} holds {have}: run `diskbench run` first, or pass "
                "--results-dir (or $DISKBENCH_RESULTS_DIR) where your runs are"
            )
        chosen = found[-1 - back]
        return Named(chosen, f"{name}: {chosen}")
    saved = None if path.exists() else _saved(name, results_dir)
    if saved is not None:
        return saved
    if _is_results_dir(path):
        found = runs(path)
        if not found:
            raise UsageError(f"{path}: a results directory with no run in it: run `diskbench run` first")
        others = f" (of {len(found)} runs)" if len(found) > 1 else ""
        return Named(found[-1], f"{path}: its newest run, {found[-1].relative_to(path)}{others}")
    return Named(path)


_LATEST = re.compile(r"latest(?:~(\d+))?")
