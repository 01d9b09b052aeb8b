"""``diskbench report``: tables, plots and the seeds' figures beside ours.

Records are grouped into *series*: one sweep (a preset at one scale, or any
sweep or run) on one machine identity (accelerator, host, CPU, QEMU,
qemu-img, image filesystem, guest size).  Series are never merged: a TCG
series and a KVM series of the same preset are two sections.  A series of a
preset (found by its sweep name, ``booth-2010`` or ``booth-2010-scale0.25``)
gets the preset's tables and plots and, beside them, the seed's figures and
its shape claims checked against ours (:mod:`harness.presets`).

The report is first built as a list of blocks (headings, paragraphs, tables,
charts): pure, from the records.  Writers turn the blocks into text (stdout),
Markdown or HTML; the last two draw the charts into PNG files in a
``NAME_files/`` directory next to the output (:mod:`harness.plots`).  The
accelerator is stated at the top, loudly when it is not KVM.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, UsageError
from harness.plots import BarChart, ShapeChart, byte_unit
from harness.presets import (
    Figure,
    PlotSpec,
    Preset,
    SeedReference,
    TableSpec,
    cell_values,
    check_shape,
    display_value,
    list_presets,
    load_preset,
    load_reference,
    matches,
    read_probes,
    split_scaled_name,
)
from harness.record import load_record
from harness.spec import Cell
from harness.stats import Stats
from harness.sweep import canonical
from harness.untrusted import clean_line
from harness.workloads import Metric, metric_info

# what makes records one series (machine identity and guest size)
IDENTITY = ("accel", "hostname", "cpu", "qemu_version", "qemu_img_version", "work_dir_fs")


# -- figures of a sample ----------------------------------------------------------------------


def _host(path: tuple[str, ...]) -> Callable[[dict[str, Any]], float | None]:
    def get(sample: dict[str, Any]) -> float | None:
        value: Any = sample.get("host", {})
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    return get


# Figures read from a sample's host fields rather than its metrics.
EXTRA_FIGURES: dict[str, tuple[Metric, Callable[[dict[str, Any]], float | None]]] = {
    "image.allocated_before_bytes": (
        Metric(
            "image.allocated_before_bytes", "B", False, "host bytes allocated to the image before the run"
        ),
        _host(("allocated_before",)),
    ),
    "image.allocated_after_bytes": (
        Metric("image.allocated_after_bytes", "B", False, "host bytes allocated to the image after the run"),
        _host(("allocated_after",)),
    ),
    "image.data_after_bytes": (
        Metric(
            "image.data_after_bytes", "B", False, "guest bytes qemu-img map reports as data after the run"
        ),
        _host(("map_after", "data_bytes")),
    ),
    "priming.total_s": (
        Metric("priming.total_s", "s", False, "the unmeasured first run of a warm or cold sample"),
        _host(("priming", "total_s")),
    ),
}


def metric_of(name: str) -> Metric:
    """What a figure is; an unknown name gets a neutral description instead of an error."""
    if name in EXTRA_FIGURES:
        return EXTRA_FIGURES[name][0]
    try:
        return metric_info(name)
    except HarnessError:
        return Metric(name, "", False, name)


def sample_value(sample: dict[str, Any], name: str) -> float | None:
    if name in EXTRA_FIGURES:
        return EXTRA_FIGURES[name][1](sample)
    value = sample.get("metrics", {}).get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


_LABELS = {"mib_per_s": "rate", "total_s": "total", "host.write_amplification": "write amplification"}


def label_of(name: str) -> str:
    """``phase.write_s`` -> ``write``: a metric's column label (its unit is in every value)."""
    if name in _LABELS:
        return _LABELS[name]
    label = re.sub(r"^(phase|host|image|bonnie|mkfs|priming)\.", "", name)
    if name.startswith("priming."):
        label = "first run " + label
    for suffix in ("_kib_per_s", "_bytes", "_pct", "_s"):
        if label.endswith(suffix) and label != suffix:
            label = label[: -len(suffix)]
            break
    return label.replace("_", " ")


_DIGITS = {"s": 2, "MiB/s": 1, "ratio": 3, "%": 0}


def format_stats(stats: Stats, unit: str) -> str:
    """``12.30 s ± 2.1%``; bytes in the binary unit their median reaches; ``-`` without samples."""
    if not stats.n:
        return "-"
    if unit == "B":
        name, divisor = byte_unit([stats.median])
        scaled = Stats.of([v / divisor for v in stats.values])
        return scaled.format(name, digits=0 if name == "B" else 1)
    if unit == "s" and abs(stats.median) < 0.1:
        return Stats.of([v * 1000 for v in stats.values]).format("ms", digits=1)
    if unit in ("ratio", "count"):
        return stats.format("", digits=_DIGITS.get(unit, 0))
    return stats.format(unit, digits=_DIGITS.get(unit, 0))


# -- series: records of one sweep on one machine identity ------------------------------------------


@dataclass
class CellResult:
    record: dict[str, Any]
    cell: Cell
    values: dict[str, Any]

    @property
    def id(self) -> str:
        return self.cell.id

    @property
    def ok(self) -> list[dict[str, Any]]:
        return [s for s in self.record["samples"] if s.get("status") == "ok"]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [s for s in self.record["samples"] if s.get("status") != "ok"]

    def stats(self, name: str) -> Stats:
        return Stats.of([v for s in self.ok if (v := sample_value(s, name)) is not None])

    def too_fast(self, name: str) -> bool:
        """Whether bonnie++ printed ``+++++`` for this figure in every ok sample."""
        return bool(self.ok) and all(name in s.get("too_fast", ()) for s in self.ok)


@dataclass
class Series:
    sweep: str
    machine: dict[str, Any]
    vm: dict[str, Any]
    cells: list[CellResult]
    preset: Preset | None = None
    scale: float = 1.0
    reference: SeedReference | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def accel(self) -> str:
        return str(self.vm.get("accel") or self.machine.get("accel") or "unknown")

    def select(self, where: Mapping[str, Sequence[Any]]) -> list[CellResult]:
        return [c for c in self.cells if matches({k: tuple(v) for k, v in where.items()}, c.values)]

    def resolve(self, figure: Figure) -> Stats | None:
        """Our figure for a seed figure: the one cell its selector matches, else None."""
        found = self.select(figure.where)
        if len(found) != 1:
            return None
        return found[0].stats(figure.metric)


def spec_position(preset: Preset, values: Mapping[str, Any]) -> tuple[int, ...]:
    """Where a cell comes in its preset: the order of the spec's axis values, at any scale."""
    position = []
    for axis, options in preset.spec.axes.items():
        wanted = canonical(axis, values.get(axis))
        canon = [canonical(axis, v) for v in options]
        position.append(canon.index(wanted) if wanted in canon else len(canon))
    return tuple(position)


def sweep_name(record: dict[str, Any]) -> str:
    """The sweep a record belongs to (its run id ``sweep-NAME``), or its run id."""
    run_id = str(record.get("run_id", ""))
    return run_id.removeprefix("sweep-") if run_id.startswith("sweep-") else run_id


def identity(record: dict[str, Any]) -> tuple[Any, ...]:
    machine, vm = record.get("machine", {}), record.get("vm", {})
    return (
        *(machine.get(k) if k != "accel" else vm.get("accel", machine.get("accel")) for k in IDENTITY),
        vm.get("mem_mib"),
        vm.get("smp"),
    )


def load_records(paths: Sequence[Path]) -> tuple[list[dict[str, Any]], list[Path]]:
    """Records of files and directories (``*.json`` directly inside); the directories too, for probes."""
    records: list[dict[str, Any]] = []
    dirs: list[Path] = []
    for path in paths:
        if path.is_dir():
            dirs.append(path)
            records += [load_record(p) for p in sorted(path.glob("*.json"))]
        elif path.exists():
            records.append(load_record(path))
        else:
            raise UsageError(
                f"{path} does not exist: pass record files or directories such as results/sweeps/NAME"
            )
    if not records:
        raise UsageError(
            f"no records in {', '.join(map(str, paths))}: pass record files or sweep directories"
        )
    return records, dirs


def group_series(records: Iterable[dict[str, Any]], dirs: Sequence[Path] = ()) -> list[Series]:
    """Records grouped by sweep and machine identity; a preset's series gets its seed reference."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((sweep_name(record), identity(record)), []).append(record)
    known = set(list_presets())
    probes = read_probes(dirs)
    out = []
    for (name, _ident), members in groups.items():
        cells = []
        for record in members:
            cell = Cell.from_dict(record["cell"])
            cells.append(CellResult(record=record, cell=cell, values=cell_values(cell)))
        base, scale = split_scaled_name(name)
        preset = load_preset(base) if base in known else None
        reference = None
        if preset is not None and preset.reference_path.is_file():
            reference = load_reference(preset.reference_path)
        cells.sort(key=lambda c: (spec_position(preset, c.values) if preset else (), c.id))
        mine = [p for p in probes if preset is not None and p.get("probe") in preset.probes]
        out.append(
            Series(
                sweep=name,
                machine=members[0].get("machine", {}),
                vm=members[0].get("vm", {}),
                cells=cells,
                preset=preset,
                scale=scale,
                reference=reference,
                probes=mine,
            )
        )
    out.sort(key=lambda s: (s.sweep, s.accel))
    return out


# -- the document: blocks ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str
    kind: str = ""  # "" | "loud" | "note"


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
    """The axes a table shows: the preset's own axes, else those that vary among the cells."""
    if series.preset is not None:
        axes = [a for a in series.preset.spec.axes if len({str(c.values.get(a)) for c in cells}) > 1]
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
        row.append(f"{len(cell.ok)}/{len(cell.record['samples'])}")
        rows.append(tuple(row))
    caption = "median ± coefficient of variation over the ok samples; (n=1): a single sample, no spread"
    return Table(tuple(header), tuple(rows), caption=f"{spec.title}: {caption}" if spec.title else caption)


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
        for cell in cells:
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


def default_chart(series: Series) -> BarChart | None:
    metric = "total_s"
    axes = _axes_shown(series, series.cells)
    spec = PlotSpec(
        metric=metric,
        title=f"{series.sweep}: {metric}",
        group=tuple(axes[:2]),
        series=axes[2] if len(axes) > 2 else None,
    )
    return bar_chart(series, spec)


def seed_blocks(series: Series, slug: str) -> list[Block]:
    ref = series.reference
    if ref is None:
        return []
    blocks: list[Block] = [
        Heading(3, f"Seed {ref.seed} beside today"),
        Para(f"{ref.document}. Seed setup: {ref.setup}."),
    ]
    rows = []
    for fig in ref.figures:
        if fig.seed is None and not fig.seed_text:
            continue
        ours = series.resolve(fig)
        unit = metric_of(fig.metric).unit
        rows.append(
            (
                fig.name,
                label_of(fig.metric),
                fig.seed_text or f"{fig.seed:g}",
                format_stats(ours, unit) if ours else "not measured",
            )
        )
    if rows:
        blocks.append(
            Table(
                ("figure", "metric", f"seed {ref.seed}", "today"),
                tuple(rows),
                caption="the seed's figures as it writes them, ours at this scale and on this machine: compare shapes, not absolute values",
            )
        )
    checks = check_shape(ref, series.resolve)
    if checks:
        blocks.append(
            Table(
                ("claim", f"seed {ref.seed}", "today", "verdict", "the seed's words"),
                tuple((c.name, c.seed, c.ours, c.verdict, c.claim) for c in checks),
                caption=(
                    "the seed's shape against ours: a ratio holds when both lie on the same side of 1 "
                    "(within ±10% counts as the same); an order holds when ours ranks the same"
                ),
            )
        )
        ratios = [
            c for c in checks if c.kind == "ratio" and (c.seed_value is not None or c.our_value is not None)
        ]
        if any(c.our_value is not None for c in ratios):
            blocks.append(
                Chart(
                    f"{slug}-shape",
                    ShapeChart(
                        title=f"Seed {ref.seed}'s ratios and today's",
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
            f"{held} of {measured} measured claims of seed {ref.seed} hold today"
            if measured
            else "no claim measured"
        )
        if changed:
            summary += f"; changed: {'; '.join(changed)}"
        if missing:
            summary += f"; {missing} not measured in these records (their cells did not run)"
        blocks.append(Para(summary + ".", "note"))
    if ref.notes:
        blocks.append(Bullets(ref.notes))
    return blocks


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "series"


def series_blocks(series: Series, index: int) -> list[Block]:
    machine = series.machine
    slug = f"{index:02d}-{_slug(series.sweep)}-{series.accel}"
    title = (
        f"{series.preset.title} (preset {series.preset.name}, seed {series.preset.seed})"
        if series.preset
        else f"sweep {series.sweep}"
    )
    samples = sum(len(c.record["samples"]) for c in series.cells)
    failed = sum(len(c.failed) for c in series.cells)
    blocks: list[Block] = [Heading(2, title)]
    if series.preset is not None:
        blocks.append(Para(series.preset.spec.description))
        scale = "scale 1, the seed's own sizes" if series.scale == 1 else f"scale {series.scale:g}"
        blocks.append(Para(f"Sweep {series.sweep}: {scale} (scale 1: {series.preset.scale_1})."))
    blocks.append(
        Para(
            f"accel {series.accel.upper()}; QEMU {machine.get('qemu_version', '?')}, qemu-img "
            f"{machine.get('qemu_img_version', '?')}; host {machine.get('hostname', '?')} "
            f"({machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, {machine.get('host_kernel', '?')}); "
            f"images on {machine.get('work_dir_fs', '?')}; guest {series.vm.get('mem_mib', '?')} MiB, "
            f"{series.vm.get('smp', '?')} vCPU; {len(series.cells)} cells, {samples} samples"
            + (f", {failed} FAILED" if failed else ""),
            "loud" if series.accel != "kvm" else "",
        )
    )
    tables = (
        series.preset.tables
        if series.preset and series.preset.tables
        else (TableSpec(title="", metrics=("total_s", "host.create_s", "host.write_amplification")),)
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
        charts = [(f"{slug}-1", default_chart(series))]
    blocks += [Chart(name, chart) for name, chart in charts if chart is not None]
    blocks += seed_blocks(series, slug)
    failures = [(c, s) for c in series.cells for s in c.failed]
    if failures:
        blocks.append(Heading(3, "Failed samples"))
        blocks.append(
            Bullets(
                tuple(
                    f"{c.id} sample {s.get('index', '?')}: {s.get('reason', '?')} (console: {s.get('logs', {}).get('console', '-')})"
                    for c, s in failures
                )
            )
        )
    return blocks


def build_report(series: Sequence[Series]) -> list[Block]:
    """The whole report as blocks: the accelerator first, then each series."""
    blocks: list[Block] = [Heading(1, "diskbench report"), accel_banner(series)]
    for index, item in enumerate(series, start=1):
        blocks += series_blocks(item, index)
    return blocks


# -- writers ---------------------------------------------------------------------------------------------


# a figure (right-aligned in tables) rather than words
_NUMERIC = re.compile(r"(x?[-+]?[\d.]+( [A-Za-z/%]+)?( ± [\d.]+%| \(n=\d+\)| ±\d+%)?|\++|-|\d+/\d+)$")


def _text_table(table: Table) -> list[str]:
    cols = len(table.header)
    widths = [max(len(r[i]) if i < len(r) else 0 for r in (table.header, *table.rows)) for i in range(cols)]
    for group_row in table.groups:
        col = 0
        for label, span in group_row:
            # a spanning label wider than its columns widens the last of them
            short = len(label) + 2 - (sum(widths[col : col + span]) + 2 * (span - 1))
            if short > 0:
                widths[col + span - 1] += short
            col += span
    lines = []
    for group_row in table.groups:
        parts, col = [], 0
        for label, span in group_row:
            width = sum(widths[col : col + span]) + 2 * (span - 1)
            parts.append(label.center(width, "-") if label else " " * width)
            col += span
        lines.append("  ".join(parts).rstrip())
    lines.append("  ".join(h.ljust(w) for h, w in zip(table.header, widths, strict=True)).rstrip())
    for row, kind in zip(table.rows, table.kinds or ("",) * len(table.rows), strict=True):
        text = "  ".join(
            c.rjust(w) if i and _NUMERIC.match(c) else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        lines.append(text.rstrip() + ("  <- FAILED" if kind == "failed" else ""))
    if table.caption:
        lines.append(f"({table.caption})")
    return lines


def to_text(blocks: Sequence[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            lines += ["", block.text, "=" * len(block.text) if block.level == 1 else "-" * len(block.text)]
        elif isinstance(block, Para):
            lines += ["", ("!! " + block.text) if block.kind == "loud" else block.text]
        elif isinstance(block, Bullets):
            lines += [""] + [f"- {item}" for item in block.items]
        elif isinstance(block, Table):
            lines += ["", *_text_table(block)]
        elif isinstance(block, Chart):
            lines += ["", f"[chart: {block.chart.title}: in the --html and --markdown reports]"]
    return "\n".join(lines).lstrip("\n") + "\n"


# markdown and HTML syntax characters, backslash-escaped or as entities so they render as themselves
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")


def _md_cell(text: str) -> str:
    """Text from records (guest output, reasons, a pull request's preset) as inert markdown.

    One line, no control or bidi characters, no HTML tag, link, image, code span, emphasis or
    table break; ``://`` is broken with a zero-width space so no bare URL becomes a link.
    """
    text = clean_line(str(text), max_chars=2000)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text).replace("://", ":&#8203;//")


def to_markdown(blocks: Sequence[Block], images: Mapping[str, str]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * block.level + " " + _md_cell(block.text))
        elif isinstance(block, Para):
            text = _md_cell(block.text)
            out.append(f"> **{text}**" if block.kind == "loud" else text)
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md_cell(item)}" for item in block.items))
        elif isinstance(block, Table):
            header = list(block.header)
            if block.groups:
                # Markdown has no spanning cells: prefix each column with the groups above it
                for group_row in reversed(block.groups):
                    col = 0
                    for label, span in group_row:
                        for i in range(col, col + span):
                            header[i] = f"{label} {header[i]}".strip() if label else header[i]
                        col += span
            lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
            kinds = block.kinds or ("",) * len(block.rows)
            for row, kind in zip(block.rows, kinds, strict=True):
                cells = [_md_cell(c) for c in row]
                if kind == "seed":
                    cells = [f"*{c}*" if c else c for c in cells]
                elif kind == "failed":
                    cells[0] = f"**FAILED** {cells[0]}"
                lines.append("| " + " | ".join(cells) + " |")
            if block.caption:
                lines += ["", f"*{_md_cell(block.caption)}*"]
            out.append("\n".join(lines))
        elif isinstance(block, Chart):
            out.append(f"![{_md_cell(block.chart.title)}]({images[block.name]})")
    return "\n\n".join(out) + "\n"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 80em; color: #111; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
th { background: #f0f0f0; text-align: center; }
td.num { text-align: right; white-space: nowrap; }
tr.seed td { font-style: italic; color: #555; background: #fafafa; }
tr.failed td { background: #fde0e0; }
caption { caption-side: bottom; font-size: 0.85em; color: #555; text-align: left; padding-top: 0.3em; }
.loud { border: 3px solid #b00020; background: #fff0f0; padding: 0.6em 1em; font-weight: bold; }
.note { background: #f5f7ff; border-left: 4px solid #4060c0; padding: 0.4em 0.8em; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0.5em 1.5em 0; display: inline-block; vertical-align: top; }
"""


def to_html(blocks: Sequence[Block], images: Mapping[str, str]) -> str:
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>diskbench report</title>",
    ]
    out.append(f"<style>{_CSS}</style></head><body>")
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{esc(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            cls = f' class="{block.kind}"' if block.kind else ""
            out.append(f"<p{cls}>{esc(block.text)}</p>")
        elif isinstance(block, Bullets):
            out.append("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Table):
            rows = ["<table>"]
            if block.caption:
                rows.append(f"<caption>{esc(block.caption)}</caption>")
            rows.append("<thead>")
            for group_row in block.groups:
                rows.append(
                    "<tr>"
                    + "".join(f'<th colspan="{span}">{esc(label)}</th>' for label, span in group_row)
                    + "</tr>"
                )
            rows.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for h in block.header) + "</tr></thead><tbody>")
            kinds = block.kinds or ("",) * len(block.rows)
            for row, kind in zip(block.rows, kinds, strict=True):
                cls = f' class="{kind}"' if kind else ""
                tds = (
                    f'<td class="num">{esc(c)}</td>' if _NUMERIC.match(c) else f"<td>{esc(c)}</td>"
                    for c in row
                )
                rows.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
            rows.append("</tbody></table>")
            out.append("\n".join(rows))
        elif isinstance(block, Chart):
            out.append(f'<img src="{esc(images[block.name])}" alt="{esc(block.chart.title)}">')
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def draw_charts(blocks: Sequence[Block], out: Path) -> dict[str, str]:
    """Draw every chart into ``STEM_files/`` next to ``out``; their paths relative to it."""
    from harness.plots import render

    files = out.parent / f"{out.stem}_files"
    images = {}
    for block in blocks:
        if isinstance(block, Chart):
            path = render(block.chart, files / f"{block.name}.png")
            images[block.name] = f"{files.name}/{path.name}"
    return images


@dataclass(frozen=True)
class ReportResult:
    text: str
    written: tuple[Path, ...]
    series: int


def make_report(
    paths: Sequence[Path], *, html_out: Path | None = None, markdown_out: Path | None = None
) -> ReportResult:
    """Load, group, build; write HTML and Markdown where asked; return the text version too."""
    records, dirs = load_records(paths)
    series = group_series(records, dirs)
    blocks = build_report(series)
    written = []
    for out, writer in ((html_out, to_html), (markdown_out, to_markdown)):
        if out is None:
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        images = draw_charts(blocks, out)
        out.write_text(writer(blocks, images), encoding="utf-8")
        written.append(out)
    return ReportResult(text=to_text(blocks), written=tuple(written), series=len(series))
