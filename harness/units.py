"""Figures for people: a value in its unit, scaled (KiB/MiB/GiB, ms/s/min), and terminal colour.

Pure: what a terminal shows.  The raw values stay in records and JSON; only text output scales them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

KIB = 1024


def human_bytes(value: float) -> str:
    """``185765888`` -> ``"177.2 MiB"``; under 1 KiB in bytes."""
    size = abs(value)
    for unit, scale in (("GiB", KIB**3), ("MiB", KIB**2), ("KiB", KIB)):
        if size >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def significant(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits in fixed notation, trailing zeros kept:
    ``1.1`` -> ``"1.10"``, ``87.54`` -> ``"87.5"``, ``42140.3`` -> ``"42140"`` (never ``4.214e+04``)."""
    places = decimals(value, digits)
    # 9.9996 rounds up to 10.00: the rounded value's own places (10.0) keep the digits the same
    return f"{value:.{min(places, decimals(round(value, places), digits))}f}"


def decimals(value: float, digits: int = 3) -> int:
    """How many decimals give ``value`` ``digits`` significant digits (0 for large values)."""
    size = abs(value)
    if size == 0 or not math.isfinite(size):
        return 0
    return max(0, digits - (math.floor(math.log10(size)) + 1))


def human_seconds(value: float) -> str:
    """``0.0123`` -> ``"12.3 ms"``, ``1.1`` -> ``"1.10 s"``, ``439.6`` -> ``"7 min 20 s"``."""
    size = abs(value)
    if size == 0:
        return "0 s"
    if size < 1e-3:
        return f"{significant(value * 1e6)} µs"
    if size < 1.0:
        return f"{significant(value * 1e3)} ms"
    if size < 120.0:
        return f"{significant(value)} s"
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds:02d} s"


def human(value: float | None, unit: str) -> str:
    """A value of a metric in its unit, for a person: ``-`` for none, ``n/a`` for not finite.

    One unit per metric, whatever the value, so that two runs of a cell read alike: seconds in
    s (``0.972 s``, never ``972 ms`` beside another run's ``1.54 s``), bytes in MiB (four
    significant digits: ``177.2 MiB``, ``0.1914 MiB``), every other metric in its own unit (a
    ``_ms`` latency in ms, whatever its size).  Three significant digits with their trailing
    zeros, counts as whole numbers, never scientific notation."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "n/a"
    if unit == "B":
        return f"{significant(value / KIB**2, 4)} MiB"
    if unit == "s":
        return f"{significant(value)} s"
    if unit == "ratio":
        return f"{value:.3f}"
    if unit in ("", "count"):
        return f"{value:.0f}" if float(value).is_integer() or abs(value) >= 100 else significant(value)
    return f"{significant(value)} {unit}"


# -- columns: one scale and one precision per column ---------------------------------------


@dataclass(frozen=True)
class Column:
    """How a column of one metric's values is printed: the unit its header names (``ms``,
    ``MiB``), the factor from the metric's unit to it, and whether its values are whole counts;
    every other value gets the same significant digits."""

    unit: str
    factor: float = 1.0
    whole: bool = False
    digits: int = 3

    def __call__(self, value: float | None) -> str:
        if value is None:
            return "-"
        if not math.isfinite(value):
            return "n/a"
        scaled = value / self.factor
        if self.whole or abs(scaled) >= 10 ** (self.digits - 1):
            return f"{scaled:.0f}"
        return significant(scaled, self.digits)


def column(values: Sequence[float], unit: str, *, digits: int = 3) -> Column:
    """The one format of a column of values of a metric in ``unit``: the metric's own unit
    whatever the values (a column of seconds stays in s however short, so that two runs of a cell
    name the same unit), bytes in MiB; counts whole, the rest with ``digits`` significant digits
    (``1.10``, ``87.5``, ``0.0452``)."""
    finite = [abs(v) for v in values if math.isfinite(v)]
    if unit in ("", "count") and all(float(v).is_integer() for v in finite):
        return Column(unit, whole=True)
    if unit == "B":
        return Column("MiB", float(KIB**2), digits=digits)
    return Column(unit, digits=digits)


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 cell``, ``2 cells``, ``0 cells`` (``words``: the plural where it is not ``word + "s"``)."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


def short_names(names: Sequence[str], sep: str = ".", dash: str = "-") -> tuple[str, list[str]]:
    """What every one of ``names`` shares, and each name without it.

    First the parts (split at ``sep``) they all share go, then, within each remaining part, the
    words (split at ``dash``) that part has in every name, as long as the names stay apart:
    ``["raw-off-2g.wb.dd", "qcow2-off-2g.wb.dd"]`` -> ``("off-2g, wb.dd", ["raw", "qcow2"])``.
    A single name keeps its first part."""
    split = [n.split(sep) for n in names]
    if not split:
        return "", []
    width = min(len(parts) for parts in split)
    shared = [i for i in range(width) if len({p[i] for p in split}) == 1 and (len(names) > 1 or i > 0)]
    kept = [[p for i, p in enumerate(parts) if i not in shared] for parts in split]
    common: list[str] = []
    if len(names) > 1 and len({len(k) for k in kept}) == 1:
        for i in range(len(kept[0])):
            words = [part[i].split(dash) for part in kept]
            same = set(words[0]).intersection(*words[1:])
            trimmed = [dash.join(w for w in ws if w not in same) for ws in words]
            whole = [sep.join([*k[:i], t, *k[i + 1 :]]) for k, t in zip(kept, trimmed, strict=True)]
            if same and all(trimmed) and len(set(whole)) == len(whole):
                for part, text in zip(kept, trimmed, strict=True):
                    part[i] = text
                common.append(dash.join(w for w in words[0] if w in same))
    common += [sep.join(split[0][i] for i in shared)] if shared else []
    shorts = [sep.join(k) or name for k, name in zip(kept, names, strict=True)]
    return ", ".join(common), shorts


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


def visible_width(text: str) -> int:
    """The columns ``text`` takes on a terminal (its colour codes take none)."""
    return len(_strip(text))


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
