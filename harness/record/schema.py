"""The record schema (``harness/data/record.schema.json``) and the checks every loaded record passes."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from harness.paths import package_data

RECORD_SCHEMA_PATH = package_data("record.schema.json")


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
