"""Cells as flat values (the axis names of specs, selectors and plots), and selectors over them.

A selector (``where``) maps axis names to the values it accepts: the tables and plots of a preset
and the figures of a seed pick their cells with one.  Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.backing import Backing, parse_backing
from harness.errors import SpecError
from harness.spec import Cell, axis_names, format_size
from harness.sweep import QEMU_AXIS, canonical

Where = Mapping[str, tuple[Any, ...]]
_SIZE_KEYS = ("size", "cluster_size")


def cell_values(cell: Cell) -> dict[str, Any]:
    """A cell as ``make_cell`` keywords (the axis names of specs, selectors and plots)."""
    img, drv, wl = cell.image, cell.drive, cell.workload
    return {
        "format": img.format.value,
        "preallocation": img.preallocation,
        "size": img.size,
        "cluster_size": img.cluster_size,
        "lazy_refcounts": img.lazy_refcounts,
        "compat": img.compat,
        "encrypt": img.encrypt,
        "extended_l2": img.extended_l2,
        "backing": None if cell.backing is None else cell.backing.spelled(),
        "cache": drv.cache.value,
        "aio": drv.aio.value,
        "interface": drv.interface.value,
        "workload": wl.name.value,
        **wl.params(),
        "cache_state": cell.cache_state.value,
        "measure": cell.measure.value,
    }


def matches(where: Where, values: Mapping[str, Any]) -> bool:
    """Whether a cell's values have, for every key of ``where``, one of its values."""
    return all(
        key in values and canonical(key, values[key]) in {canonical(key, v) for v in wanted}
        for key, wanted in where.items()
    )


def display_value(key: str, value: Any) -> str:
    """An axis value as a column shows it: sizes in their short binary spelling, unset as ``-``."""
    if value is None:
        return "-"
    if key == "backing" and isinstance(value, str):
        return _chain_words(value)
    if key in _SIZE_KEYS and isinstance(value, int) and not isinstance(value, bool):
        return format_size(value).upper()
    return str(value)


def _chain_words(text: str) -> str:
    """A chain as a column shows it: ``depth 2, fill 50% scattered``, the base's options where not the default."""
    try:
        chain = parse_backing(text, 1 << 60)
    except SpecError:
        return text
    words = f"depth {chain.depth}, fill {chain.fill_text}"
    if chain.pattern != "sequential":
        words += f" {chain.pattern}"
    default = Backing()
    if (chain.format, chain.cluster_size, chain.extended_l2) != (
        default.format,
        default.cluster_size,
        default.extended_l2,
    ):
        words += f" ({chain.slug.split('-', 4)[-1]} base)"
    return words


def parse_where(raw: Any, what: str) -> dict[str, tuple[Any, ...]]:
    """A ``where`` inline table of a preset or seed file; ``what`` names the entry in errors."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecError(f'{what}: where must be an inline table such as {{ format = "raw" }}')
    # the QEMU build a cell ran under is an axis of the report (its version, as records name it)
    axes = (*axis_names(), QEMU_AXIS)
    out: dict[str, tuple[Any, ...]] = {}
    for key, value in raw.items():
        if key not in axes:
            raise SpecError(f"{what}: unknown axis {key!r} in where: use {', '.join(axes)}")
        out[key] = tuple(value) if isinstance(value, list) else (value,)
    return out
