"""PNG charts of a report (matplotlib, Agg backend: no display, no pyplot state).

Each chart is a plain value (:class:`BarChart`, :class:`ShapeChart`) built by
the report from records; :func:`render` draws one to a file.  Medians are the
bars, error bars run from the smallest to the largest sample, each sample is a
point over its bar, and the accelerator is printed above every chart: a TCG
chart is about emulation, and says so where it is looked at.  No text is drawn
inside the plot (the figures are in the report's tables), so none can cover a
bar, an error bar or another label.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.compare.samplestats import Stats

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# matplotlib's tab10, spelled out so the colours do not depend on its version's defaults
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
# a verdict of ``compare`` as the report marks it under its cell
MARKS = {"regression": "✗ regression", "improvement": "✓ improvement"}
MARK_COLOURS = {"regression": "#b00020", "improvement": "#1a7f37"}
_BYTE_UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024), ("B", 1))


@dataclass(frozen=True)
class BarChart:
    """Bars per group (x) and series (colour), medians with min-max error bars."""

    title: str
    ylabel: str
    unit: str
    groups: tuple[str, ...]
    series: tuple[str, ...]
    stats: Mapping[tuple[str, str], Stats]
    accel: str
    log: bool = False
    group_label: str = ""
    series_label: str = ""
    # a figure of the host alone (qemu-img create, allocation): the accelerator does not touch it
    host_side: bool = False
    # what the chart is of, where the report draws one chart per workload and metric family
    family: str = ""
    workload: str = ""
    # small multiples: one panel per key, each on its own scale and in its own unit; a group
    # ``KEY: label`` (or ``KEY``) belongs to panel KEY, shown as ``label``
    panels: tuple[str, ...] = ()
    # a verdict mark per group (a comparison report): "regression", "improvement" or absent
    marks: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ShapeChart:
    """The seed's ratios beside ours, on a log axis around 1."""

    title: str
    names: tuple[str, ...]
    seed: tuple[float | None, ...]
    ours: tuple[float | None, ...]
    accel: str
    seed_label: str = "seed"
    notes: tuple[str, ...] = field(default_factory=tuple)


def byte_unit(values: Sequence[float]) -> tuple[str, float]:
    """The largest binary unit the biggest value reaches: ``("MiB", 1048576)``."""
    top = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    for name, size in _BYTE_UNITS:
        if top >= size:
            return name, float(size)
    return "B", 1.0


_TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6))


def time_unit(values: Sequence[float], unit: str = "s") -> tuple[str, float]:
    """The time unit the biggest value reads best in (``unit`` is the values' own: s or ms),
    and the divisor that takes the values there: 0.35 s is ``("ms", 0.001)``."""
    scale = 1e-3 if unit == "ms" else 1.0
    top = max((abs(v) * scale for v in values if math.isfinite(v)), default=0.0)
    for name, size in _TIME_UNITS:
        if top >= size:
            return name, size / scale
    return ("ms", 1e-3 / scale) if top else (unit, 1.0)


def chart_unit(chart: BarChart) -> tuple[str, float]:
    """The unit a chart (or a panel) is drawn in, chosen from its values, and its divisor."""
    tops = [s.max for s in chart.stats.values() if s.n]
    if chart.unit == "B":
        return byte_unit(tops)
    if chart.unit in ("s", "ms"):
        return time_unit(tops, chart.unit)
    return chart.unit, 1.0


def panel_of(chart: BarChart, key: str) -> BarChart:
    """The part of a small-multiples chart that panel ``key`` draws, its groups without the key."""
    keep: dict[str, str] = {}
    for group in chart.groups:
        if group == key:
            keep[group] = ""
        elif group.startswith(f"{key}: "):
            keep[group] = group[len(key) + 2 :]
    stats = {(keep[g], s): v for (g, s), v in chart.stats.items() if g in keep}
    return BarChart(
        title=key,
        ylabel=key,
        unit=chart.unit,
        groups=tuple(keep.values()),
        series=chart.series,
        stats=stats,
        accel=chart.accel,
        log=chart.log,
        marks={keep[g]: m for g, m in chart.marks.items() if g in keep},
    )


def _figure(width: float, height: float) -> tuple[Figure, Axes]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _stamp_text(accel: str, *, host_side: bool = False) -> str:
    if host_side:
        return f"host-side figure (guests ran under {accel.upper()})"
    loud = accel.lower() != "kvm"
    return f"accel {accel.upper()}" + (": emulation, not disks" if loud else "")


def _stamp_colour(accel: str, *, host_side: bool = False) -> str:
    return "#b00020" if accel.lower() != "kvm" and not host_side else "#555555"


def _stamp(ax: Axes, accel: str, *, host_side: bool = False) -> None:
    """The accelerator, as the axes' right-hand title: above the plot, where no bar reaches."""
    ax.set_title(
        _stamp_text(accel, host_side=host_side),
        loc="right",
        fontsize=8,
        color=_stamp_colour(accel, host_side=host_side),
    )


def _title(fig: Figure, title: str) -> None:
    """The figure's title, above the axes' titles (the accelerator), wrapped to the figure's width."""
    # a character of 11 pt is about 0.09 inch wide
    chars = max(20, int(fig.get_figwidth() / 0.09))
    fig.suptitle(textwrap.fill(title, chars, break_long_words=False), fontsize=11)


def tick_labels(groups: Sequence[str], width_in: float) -> tuple[list[str], bool]:
    """The groups' labels wrapped at spaces to fit their share of the axis; vertical where a word
    does not fit (a slanted label's box reaches under its neighbour's)."""
    # about 0.8 of the figure is the plot; a character of 8 pt is about 0.065 inch wide
    chars = max(4, int(0.8 * width_in / max(1, len(groups)) / 0.065) - 1)
    wrapped = [textwrap.fill(g, chars, break_long_words=False) for g in groups]
    if any(len(line) > chars for label in wrapped for line in label.split("\n")):
        return list(groups), True
    return wrapped, False


def _draw_bars(ax: Axes, chart: BarChart, width_in: float) -> str:
    """The bars, error bars and samples of ``chart`` on ``ax``; returns the unit drawn in."""
    nseries = max(1, len(chart.series))
    labels, vertical = tick_labels(chart.groups, width_in)
    unit, divisor = chart_unit(chart)
    width = 0.8 / nseries
    for si, series in enumerate(chart.series):
        xs, heights, low, high, px, py = [], [], [], [], [], []
        for gi, group in enumerate(chart.groups):
            stats = chart.stats.get((group, series))
            if stats is None or not stats.n:
                continue
            x = gi - 0.4 + width * (si + 0.5)
            xs.append(x)
            heights.append(stats.median / divisor)
            low.append((stats.median - stats.min) / divisor)
            high.append((stats.max - stats.median) / divisor)
            # the samples, spread a little across the bar so that equal values stay apart
            n = len(stats.values)
            for k, value in enumerate(stats.values):
                px.append(x + (width * 0.5 * ((k + 0.5) / n - 0.5) if n > 1 else 0.0))
                py.append(value / divisor)
        if not xs:
            continue
        label = series if len(chart.series) > 1 or series else None
        ax.bar(xs, heights, width * 0.92, color=COLOURS[si % len(COLOURS)], label=label, zorder=2, alpha=0.85)
        ax.errorbar(
            xs, heights, yerr=[low, high], fmt="none", ecolor="#222222", capsize=3, linewidth=1, zorder=3
        )
        ax.scatter(px, py, s=9, color="#111111", edgecolors="white", linewidths=0.4, zorder=4)
    # a verdict's mark goes into its group's tick label, under the axis, where no bar reaches
    marked = [
        f"{label}\n{MARKS[chart.marks[g]]}" if g in chart.marks else label
        for g, label in zip(chart.groups, labels, strict=True)
    ]
    ax.set_xticks(range(len(chart.groups)), marked, rotation=90 if vertical else 0, fontsize=8)
    for tick, group in zip(ax.get_xticklabels(), chart.groups, strict=True):
        if group in chart.marks:
            tick.set_color(MARK_COLOURS[chart.marks[group]])
    tops = [s.max / divisor for s in chart.stats.values() if s.n and s.max > 0]
    lows = [s.min / divisor for s in chart.stats.values() if s.n and s.min > 0]
    # a log axis only where the bars span orders of magnitude; its floor well under the
    # smallest bar, so that every bar is seen to grow from the same base
    if chart.log and lows and max(tops) / min(lows) > 20:
        ax.set_yscale("log")
        ax.set_ylim(bottom=min(lows) / 4, top=max(tops) * 3)
    elif tops:
        ax.set_ylim(bottom=0, top=max(tops) * 1.08)
    ax.grid(axis="y", alpha=0.3, zorder=0)
    return unit


def _legend(fig_or_ax: Any, chart: BarChart) -> None:
    if len(chart.series) > 1:
        fig_or_ax.legend(
            title=chart.series_label or None,
            fontsize=8,
            title_fontsize=8,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0.0,
        )


def bars_figure(chart: BarChart) -> Figure:
    """The chart drawn: a bar per median, a min-max error bar, each sample a point over it.

    No figure is written on the bars (the report's tables carry them), the legend
    stands right of the plot and the titles above it: no text covers a bar.  A chart
    of ``panels`` is small multiples: one axis per panel, each on its own scale.
    """
    if chart.panels:
        return panels_figure(chart)
    nseries = max(1, len(chart.series))
    # wide enough for its bars, never wider than a page; two narrow charts share a row of the page
    bars = len(chart.groups) * nseries
    width = min(12.0, max(6.0, 0.3 * bars + 0.25 * len(chart.groups) + 2.5))
    labels, vertical = tick_labels(chart.groups, width)
    lines = max((label.count("\n") + 1 for label in labels), default=1) + (1 if chart.marks else 0)
    fig, ax = _figure(
        width, 4.0 + (0.07 * max(len(g) for g in chart.groups) if vertical else 0.15 * (lines - 1))
    )
    unit = _draw_bars(ax, chart, width)
    ax.set_ylabel(f"{chart.ylabel} [{unit}]" if unit else chart.ylabel)
    if chart.group_label:
        ax.set_xlabel(chart.group_label)
    _title(fig, chart.title)
    _legend(ax, chart)
    _stamp(ax, chart.accel, host_side=chart.host_side)
    return fig


def panels_figure(chart: BarChart) -> Figure:
    """Small multiples: one axis per panel in a row (wrapping after four), each on its own scale
    and in the unit its values read best in, the panel's name as its title."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    parts = [panel_of(chart, key) for key in chart.panels]
    columns = min(4, len(parts))
    rows = -(-len(parts) // columns)
    each = max(2.4, 0.35 * max(len(p.groups) * max(1, len(p.series)) for p in parts) + 1.2)
    width = min(12.0, each * columns + (1.0 if len(chart.series) > 1 else 0.0))
    fig = Figure(figsize=(width, 2.9 * rows + 0.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, squeeze=False)
    for index, part in enumerate(parts):
        ax = axes[index // columns][index % columns]
        unit = _draw_bars(ax, part, width / columns)
        ax.set_title(f"{part.title} [{unit}]" if unit else part.title, fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
    for index in range(len(parts), rows * columns):
        axes[index // columns][index % columns].set_axis_off()
    _title(fig, chart.title)
    if len(chart.series) > 1:
        handles, names = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, names, fontsize=8, loc="outside right upper")
    # the accelerator under the panels, where constrained layout keeps room for it
    fig.supxlabel(
        _stamp_text(chart.accel, host_side=chart.host_side),
        x=0.99,
        ha="right",
        fontsize=8,
        color=_stamp_colour(chart.accel, host_side=chart.host_side),
    )
    return fig


def render_bars(chart: BarChart, path: Path) -> None:
    bars_figure(chart).savefig(path, format="png")


def shape_figure(chart: ShapeChart) -> Figure:
    fig, ax = _figure(9.0, 0.45 * len(chart.names) + 1.8)
    ys = list(range(len(chart.names)))
    for offset, values, label, colour in (
        (-0.2, chart.seed, chart.seed_label, "#7f7f7f"),
        (0.2, chart.ours, "today", COLOURS[0]),
    ):
        pts = [(y + offset, v) for y, v in zip(ys, values, strict=True) if v is not None and v > 0]
        if pts:
            # bars grow from 1 (no change) to the ratio, left for below 1
            ax.barh(
                [p[0] for p in pts], [p[1] - 1 for p in pts], height=0.38, left=1, color=colour, label=label
            )
    ax.axvline(1.0, color="#222222", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(ys, list(chart.names), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ratio (log scale; 1 = the same)")
    _title(fig, chart.title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(axis="x", alpha=0.3)
    _stamp(ax, chart.accel)
    return fig


def render_shape(chart: ShapeChart, path: Path) -> None:
    shape_figure(chart).savefig(path, format="png")


def render(chart: BarChart | ShapeChart, path: Path) -> Path:
    """Draw ``chart`` to ``path`` (PNG); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(chart, BarChart):
        render_bars(chart, path)
    else:
        render_shape(chart, path)
    return path


def draw_charts(charts: Mapping[str, BarChart | ShapeChart], out: Path) -> dict[str, str]:
    """Draw every chart into ``STEM_files/`` next to ``out``; their paths relative to it, by name."""
    files = out.parent / f"{out.stem}_files"
    images = {}
    for name, chart in charts.items():
        path = render(chart, files / f"{name}.png")
        images[name] = f"{files.name}/{path.name}"
    return images
