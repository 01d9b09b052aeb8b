"""Charts of records that no preset lays out: one per workload and metric family.

A *family* is a few figures of one unit that belong on one axis: a workload's
total time, its phases, its write rate, the host's bytes per guest byte, the
image's creation.  Figures of different workloads never share an axis (an
install of ~27 s would flatten a dd of ~3 s), and every title says in words
what the chart shows.  With two sides (a comparison report: base and head),
each cell's bars stand side by side, one colour per side.  Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.compare.samplestats import Stats
from harness.presets import display_value
from harness.report.charts import BarChart
from harness.report.series import CellResult, label_of, metric_of
from harness.workloads import registry


@dataclass(frozen=True)
class Family:
    """Figures of one unit drawn on one axis; ``words`` finishes the chart's title."""

    key: str
    words: str
    picks: Callable[[str], bool]
    # small multiples: the panel a figure is drawn in (each on its own scale) and its name there
    panel: Callable[[str], tuple[str, str]] | None = None
    # a log axis where the bars span orders of magnitude (a p50 beside a p99 a hundred times it)
    log: bool = False


_PHASE = re.compile(r"phase\.[a-z0-9_]+(?<!_per)_s$")
_LATENCY = re.compile(r"dev\.(write|read|flush)_(p\d+)_ms$")


def _latency_panel(name: str) -> tuple[str, str]:
    match = _LATENCY.match(name)
    assert match is not None
    return match.group(1), match.group(2)


FAMILIES: tuple[Family, ...] = (
    Family("total", "total time of the workload (guest clock)", lambda name: name == "total_s"),
    Family(
        "phases",
        "time of each phase (guest clock), each on its own scale",
        lambda name: bool(_PHASE.match(name)),
        lambda name: (label_of(name), ""),
    ),
    Family(
        "latency",
        "the device's latency percentiles (QEMU's histogram, host side; log scale)",
        lambda name: bool(_LATENCY.match(name)),
        _latency_panel,
        log=True,
    ),
    Family("rate", "write rate, flush included", lambda name: name == "mib_per_s"),
    Family(
        "amplification",
        "write amplification (host bytes per guest byte)",
        lambda name: name == "host.write_amplification",
    ),
    Family("create", "qemu-img create of the image (host)", lambda name: name == "host.create_s"),
)

# a cell of one side; the sides in order (base first), each a cell's result or None
Row = tuple[str, Mapping[str, CellResult | None]]


def workload_words(name: str) -> str:
    """What ``name`` does, for titles (its registry entry's words); a workload this harness does
    not know is named as it is."""
    return registry.kind(name).words if name in registry.names() else name


def varying_axes(values: Sequence[Mapping[str, object]]) -> list[str]:
    """The axes whose value differs among these cells (unset qcow2-only options are no difference)."""
    keys = list(values[0]) if values else []
    return [
        k
        for k in keys
        if k != "workload" and len({str(v.get(k)) for v in values if v.get(k) is not None}) > 1
    ]


def cell_label(values: Mapping[str, object], axes: Sequence[str]) -> str:
    return " ".join(display_value(a, values.get(a)) for a in axes) or str(values.get("workload", "cell"))


def metrics_of(cells: Sequence[CellResult]) -> list[str]:
    """Every figure the ok samples carry, in the order they first appear."""
    names: dict[str, None] = {}
    for cell in cells:
        for sample in cell.ok:
            names.update(dict.fromkeys(sample.metrics))
    return list(names)


def family_charts(
    workload: str,
    rows: Sequence[Row],
    sides: Sequence[str],
    accel: str,
    families: Sequence[Family] = FAMILIES,
) -> list[BarChart]:
    """One bar chart per family this workload's cells carry figures of.

    ``rows`` are the workload's cells (label, then each side's result by side
    label).  One side: the cells on the x axis, one colour per figure of the
    family.  Two sides: one colour per side, base and head of a cell side by side.
    """
    present = metrics_of([c for _label, by_side in rows for c in by_side.values() if c is not None])
    charts = []
    for family in families:
        names = [n for n in present if family.picks(n)]
        if not names:
            continue
        stats: dict[tuple[str, str], Stats] = {}
        groups: list[str] = []
        series: list[str]
        panels: list[str] = []
        if family.panel is not None:
            groups, series, stats, panels = _panelled(family.panel, names, rows, sides)
        elif len(sides) > 1:
            series = list(sides)
            for name in names:
                for label, by_side in rows:
                    group = label if len(names) == 1 else f"{label_of(name)}: {label}"
                    groups.append(group)
                    for side in sides:
                        cell = by_side.get(side)
                        if cell is not None:
                            stats[(group, side)] = cell.stats(name)
        elif len(names) == 1:
            series = [""]
            groups = [label for label, _ in rows]
            for label, by_side in rows:
                cell = next(iter(by_side.values()), None)
                if cell is not None:
                    stats[(label, "")] = cell.stats(names[0])
        else:
            # one side, several figures: each figure a group of bars, one colour per cell
            series = [label for label, _ in rows]
            groups = [label_of(n) for n in names]
            for label, by_side in rows:
                cell = next(iter(by_side.values()), None)
                for name in names:
                    if cell is not None:
                        stats[(label_of(name), label)] = cell.stats(name)
        if not any(s.n for s in stats.values()):
            continue
        metric = metric_of(names[0])
        if panels:
            groups = list(dict.fromkeys(groups))
        charts.append(
            BarChart(
                title=f"{workload_words(workload)}: {family.words}",
                ylabel=label_of(names[0]) if len(names) == 1 else "time",
                unit=metric.unit,
                groups=tuple(groups),
                series=tuple(series),
                stats=stats,
                accel=accel,
                series_label="" if len(sides) > 1 else ("cell" if len(names) > 1 else ""),
                host_side=family.key == "create",
                family=family.key,
                workload=workload,
                panels=tuple(panels),
                log=family.log,
            )
        )
    return charts


def _panelled(
    panel: Callable[[str], tuple[str, str]], names: Sequence[str], rows: Sequence[Row], sides: Sequence[str]
) -> tuple[list[str], list[str], dict[tuple[str, str], Stats], list[str]]:
    """Groups ``PANEL: inner cell`` with one colour per side (two sides), or ``PANEL: inner``
    with one colour per cell (one side); the panels in the order of their first figure."""
    stats: dict[tuple[str, str], Stats] = {}
    groups: list[str] = []
    panels: dict[str, None] = {}
    two = len(sides) > 1
    series = list(sides) if two else [label for label, _ in rows]
    for name in names:
        key, inner = panel(name)
        panels[key] = None
        for label, by_side in rows:
            words = " ".join(w for w in (inner, label if two else "") if w)
            group = f"{key}: {words}" if words else key
            groups.append(group)
            for side in sides:
                cell = by_side.get(side)
                if cell is not None:
                    stats[(group, side if two else label)] = cell.stats(name)
    return groups, series, stats, list(panels)


def one_side_rows(cells: Sequence[CellResult]) -> dict[str, list[Row]]:
    """The cells of one record set by workload, each labelled by the axes that vary within it."""
    by_workload: dict[str, list[CellResult]] = {}
    for cell in cells:
        by_workload.setdefault(str(cell.values.get("workload")), []).append(cell)
    out: dict[str, list[Row]] = {}
    for workload, members in by_workload.items():
        axes = varying_axes([c.values for c in members])
        out[workload] = [(cell_label(c.values, axes), {"": c}) for c in members]
    return out
