"""Sizes as qemu-img spells them: ``"64K"`` <-> 65536.  Pure."""

from __future__ import annotations

import re

from harness.errors import SpecError

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str | int, *, what: str = "size") -> int:
    """``"64K"`` -> 65536. Sizes are binary, as qemu-img reads them."""
    if isinstance(text, int):
        return text
    match = _SIZE_RE.match(text)
    if not match:
        raise SpecError(f"{what} {text!r} is not a size: use a number with an optional K, M, G or T suffix")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def format_size(size: int) -> str:
    """65536 -> ``"64k"``: the shortest exact binary spelling, for cell ids."""
    for suffix, unit in (("t", 1024**4), ("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)
