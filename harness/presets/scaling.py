"""``--scale``: a preset's parameters multiplied, rounded to what each can be, and the sweep names
that keep one scale's records apart from another's.  Pure."""

from __future__ import annotations

import math
import re
from typing import Any

from harness.errors import SpecError, UsageError
from harness.spec import format_size, parse_size

# what --scale can multiply, and how each is rounded (see scale_value)
SCALABLE = ("size", "dd_mib", "bonnie_size_mib", "bonnie_files", "fio_size_mib")
MAX_SCALE = 100.0
MIB = 1024**2
_SCALE_NAME_RE = re.compile(r"^(?P<base>.+?)-scale(?P<scale>[0-9][0-9.e+-]*)$")


def check_scale(scale: float) -> None:
    if not math.isfinite(scale) or scale <= 0 or scale > MAX_SCALE:
        raise UsageError(f"--scale {scale:g} is not allowed: use a number above 0 and at most {MAX_SCALE:g}")


def scaled_name(name: str, scale: float) -> str:
    """The sweep name of a preset at ``scale``: ``booth-2010``, ``booth-2010-scale0.25``."""
    return name if scale == 1 else f"{name}-scale{scale:g}"


def split_scaled_name(name: str) -> tuple[str, float]:
    """``"booth-2010-scale0.25"`` -> ``("booth-2010", 0.25)``; a plain name is scale 1."""
    match = _SCALE_NAME_RE.match(name)
    if match:
        try:
            return match.group("base"), float(match.group("scale"))
        except ValueError:
            pass
    return name, 1.0


def scale_value(key: str, value: Any, scale: float, *, floor: Any = None, chunk_mib: int = 2) -> Any:
    """One parameter at ``scale``, rounded to what it can be, never below ``floor``.

    ``size`` rounds to whole MiB; ``dd_mib`` to whole chunks (at least one);
    ``bonnie_size_mib`` and ``bonnie_files`` to integers (``bonnie_files = 0``,
    no file tests, stays 0).
    """
    if key == "size":
        scaled = max(MIB, round(parse_size(value) * scale / MIB) * MIB)
        if floor is not None:
            scaled = max(scaled, parse_size(floor, what="floor of size"))
        return format_size(scaled).upper()
    if key not in SCALABLE:
        raise SpecError(f"{key} cannot be scaled: use {', '.join(SCALABLE)}")
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(f"{key} {value!r} is not an integer, so it cannot be scaled")
    if key == "bonnie_files" and value == 0:
        return 0
    if key == "dd_mib":
        chunks = max(1, round(value * scale / chunk_mib))
        if floor is not None:
            chunks = max(chunks, math.ceil(int(floor) / chunk_mib))
        return chunks * chunk_mib
    scaled_int = max(1, round(value * scale))
    return max(scaled_int, int(floor)) if floor is not None else scaled_int
