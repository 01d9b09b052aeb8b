"""Records: versioned, self-describing JSON of one cell's samples.

A record lives at ``RESULTS/records/RUN_ID/CELL_ID.json`` and is written
atomically (temp file in the same directory, fsync, rename), so a crash
leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import RecordError, SpecError

SCHEMA = "diskbench-record"
VERSION = 1


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` through a temp file in the same directory, fsync, rename: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=False) + "\n")


def read_input_text(path: Path, *, what: str, hint: str) -> str:
    """The text of an input file (a spec, a policy); a missing or unreadable one is a usage error.

    ``what`` names the input ("sweep spec"), ``hint`` says what to pass instead.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{what} {path} does not exist: {hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{what} {path} cannot be read: {exc}") from None


def record_path(results_dir: Path, run_id: str, cell_id: str) -> Path:
    return results_dir / "records" / run_id / f"{cell_id}.json"


def new_record(
    *,
    cell: dict[str, Any],
    machine: dict[str, Any],
    subject: dict[str, Any],
    vm: dict[str, Any],
    run_id: str,
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "run_id": run_id,
        "cell": cell,
        "machine": machine,
        "subject": subject,
        "vm": vm,
        "samples": [],
    }


def load_record(path: Path) -> dict[str, Any]:
    """Read a record; an old, foreign or truncated file gets a message saying what to do."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordError(f"record {path} does not exist: check the path") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(
            f"record {path} is not valid JSON (truncated?, line {exc.lineno}): delete it and re-run its cell"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise RecordError(f"{path} is not a diskbench record: pass record files only")
    version = data.get("version")
    if version != VERSION:
        raise RecordError(
            f"record {path} has version {version!r}, this diskbench reads version {VERSION}: "
            "re-run its cell with this version"
        )
    for key in ("cell", "machine", "samples"):
        if key not in data:
            raise RecordError(f"record {path} lacks {key!r}: delete it and re-run its cell")
    return data
