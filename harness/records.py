"""Records: versioned, self-describing JSON of one cell's samples.

A record lives at ``RESULTS/records/RUN_ID/CELL_ID.json`` and is written
atomically (temp file in the same directory, fsync, rename), so a crash
leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import RecordError, SpecError
from harness.paths import REPO_ROOT

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
    """Read a record and validate it against ``docs/record.schema.json``.

    Every reader goes through here, so a damaged file (binary bytes, truncated
    JSON, a directory named ``x.json``, ``"samples": "oops"``, a NaN figure)
    is one :class:`RecordError` naming the file and the field, never merged,
    resumed from or compared.
    """
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
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(
            f"record {path} is not valid JSON (truncated?, line {exc.lineno}): delete it and re-run its cell"
        ) from None
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


RECORD_SCHEMA_PATH = REPO_ROOT / "docs" / "record.schema.json"


@functools.cache
def _validator() -> Any:
    import jsonschema

    schema = json.loads(RECORD_SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def schema_problem(data: Any) -> str | None:
    """What in ``data`` breaks the record schema (``field samples[0].status: ...``, ``lacks 'cell.id'``); None if nothing."""
    import jsonschema.exceptions

    error = jsonschema.exceptions.best_match(_validator().iter_errors(data))
    if error is None:
        return None
    field = _field_name(error.absolute_path)
    if error.validator == "required" and isinstance(error.validator_value, list):
        instance = error.instance if isinstance(error.instance, dict) else {}
        missing = next((k for k in error.validator_value if k not in instance), "?")
        field = f"{field}.{missing}" if field != "(top level)" else str(missing)
        return f"lacks {field!r}"
    return f"field {field}: {_short(error.message)}"


def non_finite_problem(data: Any, where: tuple[str | int, ...] = ()) -> str | None:
    """The first NaN or infinite number in ``data`` (Python's json reads them; no figure may be one)."""
    if isinstance(data, float) and not math.isfinite(data):
        return f"field {_field_name(where)} is {data!r}: figures must be finite numbers"
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return None
    for key, value in items:
        problem = non_finite_problem(value, (*where, key))
        if problem:
            return problem
    return None


def _field_name(path: Any) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "(top level)"


def _short(message: str, limit: int = 120) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."
