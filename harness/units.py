"""Figures for people: a value in its unit, scaled (KiB/MiB/GiB, ms/s/min), and terminal colour.

Pure: what a terminal shows.  The raw values stay in records and JSON; only text output scales them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

KIB = 1024


def human_bytes(value: float) -> str:
    """``185765888`` -> ``"177.2 MiB"``; under 1 KiB in bytes."""
    size = abs(value)
    for unit, scale in (("GiB", KIB**3), ("MiB", KIB**2), ("KiB", KIB)):
        if size >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def human_seconds(value: float) -> str:
    """``0.0123`` -> ``"12.3 ms"``, ``28.66`` -> ``"28.66 s"``, ``439.6`` -> ``"7 min 20 s"``."""
    size = abs(value)
    if size == 0:
        return "0 s"
    if size < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if size < 1.0:
        return f"{value * 1e3:.3g} ms"
    if size < 120.0:
        return f"{value:.2f} s"
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds:02d} s"


def human(value: float | None, unit: str) -> str:
    """A value of a metric in its unit, scaled for a person: ``-`` for none, ``n/a`` for not finite."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "n/a"
    if unit == "B":
        return human_bytes(value)
    if unit == "s":
        return human_seconds(value)
    if unit == "ms":
        return human_seconds(value / 1e3)
    if unit == "MiB/s":
        return f"{value:.1f} MiB/s"
    if unit == "ratio":
        return f"{value:.3f}"
    if unit == "%":
        return f"{value:.1f}%"
    if unit in ("", "count"):
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.4g}"
    return f"{value:.4g} {unit}"


# -- colour ---------------------------------------------------------------------------------

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


@dataclass(frozen=True)
class Style:
    """ANSI colour where ``enabled``, else the text as it is (a file, a pipe, ``NO_COLOR``)."""

    enabled: bool = False

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles or not text:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"


PLAIN = Style(False)


def wants_color(*, isatty: bool, environ: Mapping[str, str]) -> bool:
    """Colour only on a terminal, never with ``NO_COLOR`` set (https://no-color.org) or ``TERM=dumb``."""
    return isatty and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"


def pad(text: str, width: int, *, right: bool = False) -> str:
    """``text`` padded to ``width`` columns; colour codes take none."""
    visible = len(_strip(text))
    fill = " " * max(0, width - visible)
    return fill + text if right else text + fill


def _strip(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\033":
            end = text.find("m", i)
            i = len(text) if end < 0 else end + 1
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def table(header: list[str], rows: list[list[str]], *, numeric: set[int] | None = None) -> list[str]:
    """An aligned plain-text table: two spaces between columns, numeric columns right-aligned."""
    numeric = numeric or set()
    widths = [len(_strip(h)) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(_strip(cell)))
    lines = []
    for row in (header, *rows):
        cells = [pad(c, widths[i], right=i in numeric) for i, c in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return lines
