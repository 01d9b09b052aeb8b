"""Merge the record dirs of a sharded sweep into one.

A sweep fanned out over N runners comes back as N dirs of records.  Their
union is one sweep only when every record measured the same thing the same
way: same accelerator, QEMU and qemu-img versions, CPU, image filesystem,
guest recipe, storage policy and guest size.  The host name is *not* part of
that: shards run on different runners of one pool by design.

Records of different identities are refused (exit 2, naming a record of each
side) unless ``allow_mixed`` is given; then each identity gets its own
subdirectory of the output, so nothing downstream reads them as one series.
A cell found in several dirs keeps the record with the most ok samples.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.record import Record, RecordDir, load_record, store
from harness.record.identity import describe_identity, identity_slug, merge_identity


def ok_samples(record: Record) -> int:
    return record.ok_samples


@dataclass
class MergeResult:
    out_dir: Path
    written: list[Path] = field(default_factory=list)
    groups: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    mixed: bool = False


def _record_files(directory: Path) -> list[Path]:
    if not directory.exists():
        raise UsageError(f"{directory} is not a directory of records: pass the shards' record dirs")
    return store.record_files(directory)


def merge_dirs(
    dirs: Sequence[Path],
    out_dir: Path,
    *,
    allow_mixed: bool = False,
    log: Callable[[str], None] = lambda _msg: None,
) -> MergeResult:
    """Join record dirs into ``out_dir``; see the module docstring for the rules."""
    if not dirs:
        raise UsageError("merge: give one or more record dirs")
    out_dir = out_dir.resolve()
    for directory in dirs:
        if directory.resolve() == out_dir:
            raise UsageError(f"merge: --out {out_dir} is one of the inputs: pass a new directory")
    if out_dir.is_dir() and any(out_dir.rglob("*.json")):
        raise UsageError(f"merge: --out {out_dir} holds records already: pass an empty or new directory")

    loaded: list[tuple[Path, Path, Record]] = []
    for directory in dirs:
        files = _record_files(directory)
        if not files:
            raise UsageError(f"merge: {directory} holds no records (*.json)")
        loaded.extend((directory, path, load_record(path)) for path in files)

    identities: dict[str, tuple[dict[str, Any], Path]] = {}
    for _directory, path, record in loaded:
        identity = merge_identity(record)
        identities.setdefault(identity_slug(identity), (identity, path))
    mixed = len(identities) > 1
    if mixed:
        (first, first_path), *others = identities.values()
        second, second_path = others[0]
        differ = [k for k in first if first[k] != second[k]]
        sides = (
            f"{first_path} ({describe_identity(first, differ)}) vs "
            f"{second_path} ({describe_identity(second, differ)})"
        )
        if not allow_mixed:
            raise UsageError(
                f"merge: records of different machines or subjects would be mixed: {sides}: "
                "merge each side on its own, or pass --allow-mixed to keep them apart in subdirectories"
            )
        log(f"merge: WARNING: MIXED records, kept apart per identity under {out_dir}/<identity>/: {sides}")

    # per identity, per cell: the record with the most ok samples (then the most samples)
    chosen: dict[tuple[str, str], tuple[Path, Path, Record]] = {}
    result = MergeResult(out_dir=out_dir, mixed=mixed)
    for directory, path, record in loaded:
        slug = identity_slug(merge_identity(record))
        key = (slug, record.cell_id)
        if key not in chosen:
            chosen[key] = (directory, path, record)
            continue
        _, kept_path, kept = chosen[key]
        better = (ok_samples(record), len(record.samples)) > (ok_samples(kept), len(kept.samples))
        winner, loser = ((path, record), (kept_path, kept)) if better else ((kept_path, kept), (path, record))
        note = (
            f"duplicate cell {key[1]}: kept {winner[0]} ({ok_samples(winner[1])} ok of "
            f"{len(winner[1].samples)}) over {loser[0]} ({ok_samples(loser[1])} ok of {len(loser[1].samples)})"
        )
        result.notes.append(note)
        log(f"merge: {note}")
        if better:
            chosen[key] = (directory, path, record)

    for (slug, cell_id), (directory, _path, record) in sorted(chosen.items()):
        target = RecordDir.flat(out_dir / slug if mixed else out_dir)
        record = _copy_logs(RecordDir.flat(directory), cell_id, target, record)
        dest = target.path(cell_id)
        store.write_record(dest, record)
        result.written.append(dest)
        result.groups[slug] = result.groups.get(slug, 0) + 1
    return result


def _copy_logs(source_dir: RecordDir, cell_id: str, target: RecordDir, record: Record) -> Record:
    """Bring a cell's logs along (a sweep dir keeps them in ``logs/CELL_ID``); the record pointing
    at them."""
    source = source_dir.log_root(cell_id)
    if not source.is_dir():
        return record
    dest = target.log_root(cell_id)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest)
    marker = f"/logs/{cell_id}/"

    def moved(value: str) -> str:
        # the paths are the runner's; the part after logs/CELL_ID/ is the same here
        return str(dest / value.split(marker, 1)[1]) if marker in value else value

    return record.with_log_paths(moved)
