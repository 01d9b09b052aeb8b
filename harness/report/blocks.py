"""The report as blocks: headings, paragraphs, bullets, tables and charts, built from series.

Pure: the blocks are built from the records alone, and the writers
(:mod:`~harness.report.text`, :mod:`~harness.report.markdown`,
:mod:`~harness.report.html`) turn them into text, Markdown or HTML.  A preset's
series gets the preset's tables and plots and, beside them, the seed's figures
and its shape claims checked against ours.  The accelerator is stated at the
top, loudly when it is not KVM.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.compare.samplestats import Stats
from harness.presets import PlotSpec, TableSpec, check_shape, display_value, matches
from harness.report.charts import BarChart, ShapeChart
from harness.report.families import family_charts, one_side_rows
from harness.report.series import CellResult, Series, label_of, metric_of
from harness.sweep import QEMU_AXIS, canonical
from harness.units import decimals, plural

_DIGITS = {"s": 2, "MiB/s": 1, "ratio": 3, "%": 0}


def format_stats(stats: Stats, unit: str, *, beside: Stats | None = None) -> str:
    """``12.30 s ± 2.1%``; ``-`` without samples.  One unit per metric whatever its size, so that
    two runs (or base and head, ``beside``) read alike: seconds in s (``0.00830 s``: three
    significant digits under 0.1 s, two decimals above), bytes in MiB (four significant digits).
    """
    del beside  # every figure of a metric takes its one unit
    if not stats.n:
        return "-"
    if unit == "B":
        scaled = Stats.of([v / 2**20 for v in stats.values])
        return scaled.format("MiB", digits=decimals(scaled.median, 4))
    if unit == "s" and abs(stats.median) < 0.1:
        return stats.format("s", digits=decimals(stats.median, 3))
    if unit in ("ratio", "count"):
        return stats.format("", digits=_DIGITS.get(unit, 0))
    return stats.format(unit, digits=_DIGITS.get(unit, 0))


# -- the blocks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str
    kind: str = ""  # "" | "loud" | "note" | "machine" (what a series ran on, said plainly)


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    # spanning header rows above ``header``: (label, columns) per row
    groups: tuple[tuple[tuple[str, int], ...], ...] = ()
    # per row: "" or "seed" (the seed's own figures, set apart) or "failed"
    kinds: tuple[str, ...] = ()
    # the leading columns that say which row it is (the cell, its verdict): a table too wide for
    # a terminal goes on in a second table that repeats them (harness.report.text)
    keys: int = 1


@dataclass(frozen=True)
class Chart:
    name: str
    chart: BarChart | ShapeChart


Block = Heading | Para | Bullets | Table | Chart


def accel_banner(series: Sequence[Series]) -> Para:
    accels = sorted({s.accel for s in series})
    if accels == ["kvm"]:
        return Para("Accelerator: KVM. Every figure below was measured with hardware virtualization.")
    if len(accels) > 1:
        return Para(
            f"MIXED ACCELERATORS ({', '.join(a.upper() for a in accels)}): each series below is one accelerator; "
            "never compare figures across them. TCG figures time QEMU's emulation of the guest, not the disks.",
            "loud",
        )
    accel = accels[0].upper() if accels else "UNKNOWN"
    return Para(
        f"ACCELERATOR: {accel}. These guests ran without hardware virtualization: the figures time QEMU's "
        "emulation of the guest CPU as much as the disks. Read ratios and orderings within this report; "
        "never compare these numbers with KVM numbers or with the seeds' absolute figures.",
        "loud",
    )


def _axes_shown(series: Series, cells: Sequence[CellResult]) -> list[str]:
    """The axes a table shows: the preset's own axes, else those that vary among the cells; the
    QEMU build last, where the cells ran under several."""
    if series.preset is not None:
        axes = [
            a for a in (*series.preset.spec.axes, QEMU_AXIS) if len({str(c.values.get(a)) for c in cells}) > 1
        ]
        return axes or list(series.preset.spec.axes)
    keys = list(cells[0].values) if cells else []
    # qcow2-only options (cluster_size, compat) are None on raw: that alone is no variation
    varying = [k for k in keys if len({str(c.values[k]) for c in cells if c.values.get(k) is not None}) > 1]
    return varying or ["workload"]


def _cell_label(cell: CellResult, axes: Sequence[str]) -> str:
    return " ".join(display_value(a, cell.values.get(a)) for a in axes)


def cells_table(series: Series, spec: TableSpec) -> Table | None:
    cells = series.select(spec.where)
    if not cells:
        return None
    axes = _axes_shown(series, cells)
    header = [*axes]
    header += [label_of(name) for name in spec.metrics]
    header.append("ok")
    rows = []
    for cell in cells:
        row = [display_value(a, cell.values.get(a)) for a in axes]
        row += [format_stats(cell.stats(name), metric_of(name).unit) for name in spec.metrics]
        row.append(f"{len(cell.ok)}/{len(cell.record.samples)}")
        rows.append(tuple(row))
    caption = "median ± coefficient of variation over the ok samples; (n=1): a single sample, no spread"
    return Table(
        tuple(header),
        tuple(rows),
        caption=f"{spec.title}: {caption}" if spec.title else caption,
        keys=max(1, len(axes)),
    )


# bonnie++'s own column layout
_IO_LAYOUT = (
    ("Sequential Output", (("Block", "seq_output_block", "K/sec"), ("Rewrite", "rewrite", "K/sec"))),
    ("Sequential Input", (("Block", "seq_input_block", "K/sec"),)),
    ("Random", (("Seeks", "random_seeks", "/sec"),)),
)
_FILE_LAYOUT = (
    (
        "Sequential Create",
        (("Create", "seq_create", "/sec"), ("Read", "seq_stat", "/sec"), ("Delete", "seq_delete", "/sec")),
    ),
    (
        "Random Create",
        (
            ("Create", "random_create", "/sec"),
            ("Read", "random_stat", "/sec"),
            ("Delete", "random_delete", "/sec"),
        ),
    ),
)


def _bonnie_rate(cell: CellResult, key: str) -> tuple[str, str]:
    from harness.workloads.bonnie import TESTS

    test = next(t for t in TESTS if t.key == key)
    if cell.too_fast(test.rate):
        return "+++++", "+++"
    rate = cell.stats(test.rate)
    cpu = cell.stats(test.cpu)
    if not rate.n:
        return "", ""
    # as bonnie++ prints them: seeks with one decimal, every other rate whole
    text = f"{rate.median:.1f}" if key == "random_seeks" else f"{rate.median:.0f}"
    if rate.n > 1:
        text += f" ±{rate.cv_pct:.0f}%"
    return text, f"{cpu.median:.0f}" if cpu.n else ""


def bonnie_tables(series: Series, spec: TableSpec) -> list[Table]:
    """bonnie++'s two tables, the seed's rows under the row of the cell they match."""
    cells = series.select(spec.where)
    if not cells:
        return []
    axes = [
        a
        for a in _axes_shown(series, cells)
        if a != "workload" and len({str(c.values.get(a)) for c in cells}) > 1
    ]
    seed_rows = list(series.reference.bonnie) if series.reference else []
    used: set[int] = set()
    out = []
    for layout, size_column in ((_IO_LAYOUT, "Size"), (_FILE_LAYOUT, "files")):
        groups: tuple[tuple[str, int], ...] = (("", 2), *((title, 2 * len(cols)) for title, cols in layout))
        sub: tuple[tuple[str, int], ...] = (
            ("", 2),
            *((name, 2) for _t, cols in layout for name, _k, _u in cols),
        )
        header = ["Machine", size_column]
        for _title, cols in layout:
            for _name, _key, unit in cols:
                header += [unit, "%CP"]
        rows: list[tuple[str, ...]] = []
        kinds: list[str] = []
        for number, cell in enumerate(cells):
            size = (
                f"{cell.values['bonnie_size_mib']}M"
                if size_column == "Size"
                else str(cell.values["bonnie_files"])
            )
            row = [_cell_label(cell, axes) or cell.id, size]
            for _title, cols in layout:
                for _name, key, _unit in cols:
                    row += list(_bonnie_rate(cell, key))
            rows.append(tuple(row))
            kinds.append("" if cell.ok else "failed")
            if number + 1 < len(cells) and cells[number + 1].id == cell.id:
                continue  # the seed's row comes after the cell's last QEMU build
            for index, seed_row in enumerate(seed_rows):
                if seed_row.where and matches(seed_row.where, cell.values):
                    used.add(index)
                    rows.append(_seed_bonnie_row(series, seed_row, layout, size_column))
                    kinds.append("seed")
        for index, seed_row in enumerate(seed_rows):
            if index not in used and not seed_row.where:
                rows.append(_seed_bonnie_row(series, seed_row, layout, size_column))
                kinds.append("seed")
        title = "bonnie++: sequential IO and seeks" if size_column == "Size" else "bonnie++: file creation"
        caption = (
            f"{title}; rates are medians (± coefficient of variation), +++++ too fast for bonnie++ to time"
        )
        if series.reference is not None:
            caption += f"; rows in italics: seed {series.reference.seed}"
        out.append(
            Table(tuple(header), tuple(rows), caption=caption, groups=(groups, sub), kinds=tuple(kinds))
        )
    return out


def _seed_bonnie_row(series: Series, seed_row: Any, layout: Any, size_column: str) -> tuple[str, ...]:
    seed = series.reference.seed if series.reference else "?"
    row = [f"seed {seed}: {seed_row.label}", seed_row.size if size_column == "Size" else str(seed_row.files)]
    for _title, cols in layout:
        for _name, key, _unit in cols:
            row += list(seed_row.values.get(key, ("", "")))
    return tuple(row)


def bar_chart(series: Series, spec: PlotSpec) -> BarChart | None:
    cells = [c for c in series.select(spec.where) if c.stats(spec.metric).n]
    if not cells:
        return None
    if QEMU_AXIS not in (*spec.group, spec.series) and len({c.values[QEMU_AXIS] for c in cells}) > 1:
        # the cells ran under several QEMU builds: each build's bars stand apart
        spec = replace(spec, group=(*spec.group, QEMU_AXIS))
    if series.preset is not None:
        # groups in the order of the grouping axes' values in the preset (the first axis outermost)
        axes = {a: series.preset.spec.axes.get(a, ()) for a in spec.group}

        def place(cell: CellResult) -> tuple[int, ...]:
            canon = {a: [canonical(a, v) for v in vals] for a, vals in axes.items()}
            wanted = {a: canonical(a, cell.values.get(a)) for a in axes}
            return tuple(canon[a].index(wanted[a]) if wanted[a] in canon[a] else len(canon[a]) for a in axes)

        cells = sorted(cells, key=place)
    groups = list(
        dict.fromkeys(" / ".join(display_value(a, c.values.get(a)) for a in spec.group) for c in cells)
    )
    series_axis = spec.series
    names = (
        list(dict.fromkeys(display_value(series_axis, c.values.get(series_axis)) for c in cells))
        if series_axis
        else [""]
    )
    stats: dict[tuple[str, str], Stats] = {}
    for cell in cells:
        group = " / ".join(display_value(a, cell.values.get(a)) for a in spec.group)
        name = display_value(series_axis, cell.values.get(series_axis)) if series_axis else ""
        stats[(group, name)] = cell.stats(spec.metric)
    metric = metric_of(spec.metric)
    return BarChart(
        title=spec.title,
        ylabel=label_of(spec.metric),
        unit=metric.unit,
        groups=tuple(groups),
        series=tuple(names),
        stats=stats,
        accel=series.accel,
        log=spec.log,
        group_label=" / ".join(spec.group),
        series_label=series_axis or "",
        host_side=spec.metric == "host.create_s" or spec.metric.startswith("image."),
    )


def seed_blocks(series: Series, slug: str) -> list[Block]:
    ref = series.reference
    if ref is None:
        return []
    blocks: list[Block] = [
        Heading(3, f"Seed {ref.seed} beside today"),
        Para(f"{ref.document}. Seed setup: {ref.setup}."),
    ]
    builds = series.builds
    several = len(builds) > 1
    today = [f"today, QEMU {b}{series.on_disk}" for b in builds] if several else [f"today{series.on_disk}"]
    seed_columns = [f"seed {ref.seed}, QEMU {v}" for v in ref.qemu] if ref.qemu else [f"seed {ref.seed}"]
    rows = []
    for fig in ref.figures:
        if fig.seed is None and not fig.seed_text:
            continue
        unit = metric_of(fig.metric).unit
        ours = [series.resolve(fig, b if several else None) for b in builds]
        seeds = [fig.older.get(v, "-") for v in ref.qemu[:-1]] + [fig.seed_text or f"{fig.seed:g}"]
        rows.append(
            (
                fig.name,
                label_of(fig.metric),
                *seeds,
                *(format_stats(o, unit) if o else "not measured" for o in ours),
            )
        )
    if rows:
        caption = (
            "the seed's figures as it writes them, ours at this scale and on this machine: compare shapes, "
            "not absolute values"
        )
        if ref.qemu:
            caption += f"; where the seed gives one figure for both of its QEMU versions, it stands under {ref.qemu[-1]}"
        blocks.append(Table(("figure", "metric", *seed_columns, *today), tuple(rows), caption=caption))
    for build in builds:
        blocks += _shape_blocks(
            series, f"{slug}-shape" + (f"-{file_slug(build)}" if several else ""), build if several else None
        )
    if ref.notes:
        blocks.append(Bullets(ref.notes))
    return blocks


def _shape_blocks(series: Series, name: str, build: str | None) -> list[Block]:
    """The seed's shape claims checked against our figures under one QEMU build (None: the one)."""
    ref = series.reference
    assert ref is not None
    checks = check_shape(ref, series.resolver(build))
    if not checks:
        return []
    under = (f" under QEMU {build}" if build else "") + series.on_disk
    blocks: list[Block] = [
        Table(
            ("claim", f"seed {ref.seed}", "today" + under, "verdict", "the seed's words"),
            tuple((c.name, c.seed, c.ours, c.verdict, c.claim) for c in checks),
            caption=(
                "the seed's shape against ours: a ratio holds when both lie on the same side of 1 "
                "(within ±10% counts as the same); an order holds when ours ranks the same"
            ),
        )
    ]
    ratios = [
        c for c in checks if c.kind == "ratio" and (c.seed_value is not None or c.our_value is not None)
    ]
    if any(c.our_value is not None for c in ratios):
        blocks.append(
            Chart(
                name,
                ShapeChart(
                    title=f"Seed {ref.seed}'s ratios and today's{under}",
                    names=tuple(c.name for c in ratios),
                    seed=tuple(c.seed_value for c in ratios),
                    ours=tuple(c.our_value for c in ratios),
                    accel=series.accel,
                    seed_label=f"seed {ref.seed}",
                ),
            )
        )
    held = sum(c.verdict == "holds" for c in checks)
    changed = [c.name for c in checks if c.verdict == "changed"]
    missing = sum(c.verdict == "not measured" for c in checks)
    measured = len(checks) - missing
    summary = (
        f"{held} of {measured} measured claims of seed {ref.seed} hold today{under}"
        if measured
        else f"no claim measured{under}"
    )
    if changed:
        summary += f"; changed: {'; '.join(changed)}"
    if missing:
        summary += f"; {missing} not measured in these records (their cells did not run)"
    blocks.append(Para(summary + ".", "note"))
    return blocks


def file_slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "series"


def machine_line(series: Series) -> str:
    """The accelerator, QEMU, host and guest a series ran on, in one line."""
    machine = series.machine
    builds = series.builds
    qemu = (
        f"QEMU builds side by side: {', '.join(builds)}"
        if len(builds) > 1
        else f"QEMU {machine.get('qemu_version', '?')}, qemu-img {machine.get('qemu_img_version', '?')}"
    )
    return (
        f"accel {series.accel.upper()}; {qemu}; host {machine.get('hostname', '?')} "
        f"({machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, {machine.get('host_kernel', '?')}); "
        f"images on {machine.get('work_dir_fs', '?')}; guest RAM {series.vm.get('mem_mib', '?')} MiB, "
        f"{series.vm.get('smp', '?')} vCPU"
    )


def series_blocks(series: Series, index: int) -> list[Block]:
    slug = f"{index:02d}-{file_slug(series.sweep)}-{series.accel}"
    title = (
        f"{series.preset.title} (preset {series.preset.name}, seed {series.preset.seed}){series.on_disk}"
        if series.preset
        else f"{'sweep' if _swept(series) else 'run'} {series.sweep}"
    )
    samples = sum(len(c.record.samples) for c in series.cells)
    failed = sum(len(c.failed) for c in series.cells)
    blocks: list[Block] = [Heading(2, title)]
    if series.preset is not None:
        blocks.append(Para(series.preset.spec.description))
        scale = "scale 1, the seed's own sizes" if series.scale == 1 else f"scale {series.scale:g}"
        blocks.append(Para(f"Sweep {series.sweep}: {scale} (scale 1: {series.preset.scale_1})."))
    blocks.append(
        Para(
            f"{machine_line(series)}; {plural(len({c.id for c in series.cells}), 'cell')}"
            + (f" under {len(series.builds)} QEMU builds" if len(series.builds) > 1 else "")
            + f", {plural(samples, 'sample')}"
            + (f", {failed} FAILED" if failed else ""),
            "machine",
        )
    )
    tables = (
        series.preset.tables
        if series.preset and series.preset.tables
        else (TableSpec(title="", metrics=_default_metrics(series)),)
    )
    for spec in tables:
        if spec.layout == "bonnie":
            blocks += bonnie_tables(series, spec)
        else:
            table = cells_table(series, spec)
            if table is not None:
                blocks.append(table)
    for probe in series.probes:
        state = "supported" if probe.get("supported") else "UNSUPPORTED on this QEMU"
        blocks.append(
            Para(f"{probe.get('label', probe.get('probe'))}: {state}: {probe.get('reason', '')}", "note")
        )
    plots = series.preset.plots if series.preset else ()
    charts = [(f"{slug}-{n}", bar_chart(series, p)) for n, p in enumerate(plots, start=1)]
    if not plots:
        # no preset lays the charts out: one per workload and metric family
        charts = [
            (f"{slug}-{file_slug(workload)}-{chart.family}", chart)
            for workload, rows in one_side_rows(series.cells).items()
            for chart in family_charts(workload, rows, [""], series.accel)
        ]
    blocks += [Chart(name, chart) for name, chart in charts if chart is not None]
    blocks += seed_blocks(series, slug)
    failures = [(c, s) for c in series.cells for s in c.failed]
    if failures:
        blocks.append(Heading(3, "Failed samples"))
        blocks.append(
            Bullets(
                tuple(
                    f"{c.id} sample {'?' if s.index is None else s.index}: {'?' if s.reason is None else s.reason} "
                    f"(console: {s.logs.get('console', '-')})"
                    for c, s in failures
                )
            )
        )
    return blocks


# a run's own table: its time, dd's write rate (its headline), the image's creation and the write
# amplification, each where a cell has it (the total always)
DEFAULT_METRICS = ("total_s", "mib_per_s", "host.create_s", "host.write_amplification")


def _default_metrics(series: Series) -> tuple[str, ...]:
    return tuple(m for m in DEFAULT_METRICS if m == "total_s" or any(c.stats(m).n for c in series.cells))


def _swept(series: Series) -> bool:
    """Whether the series is a sweep's (its records' run id ``sweep-NAME``), else a run's."""
    return any(str(c.record.run_id).startswith("sweep-") for c in series.cells)


def build_report(series: Sequence[Series]) -> list[Block]:
    """The whole report as blocks: the accelerator first, then each series."""
    blocks: list[Block] = [Heading(1, "diskbench report"), accel_banner(series)]
    for index, item in enumerate(series, start=1):
        blocks += series_blocks(item, index)
    return blocks


def charts_in(blocks: Sequence[Block]) -> dict[str, BarChart | ShapeChart]:
    """The charts among ``blocks``, by their file name."""
    return {block.name: block.chart for block in blocks if isinstance(block, Chart)}


# a figure (right-aligned in tables) rather than words
NUMERIC = re.compile(r"(x?[-+]?[\d.]+( [A-Za-z/%]+)?( ± [\d.]+%| \(n=\d+\)| ±\d+%)?|\++|-|\d+/\d+)$")
