"""Series: records of one sweep on one machine identity, and the figures read from their samples.

Records are grouped into *series*: one sweep (a preset at one scale, or any
sweep or run) on one machine identity (accelerator, host, CPU, QEMU,
qemu-img, image filesystem, guest size).  Series are never merged: a TCG
series and a KVM series of the same preset are two sections.  A series of a
preset (found by its sweep name, ``booth-2010`` or ``booth-2010-scale0.25``)
gets the preset's seed reference and probes (:mod:`harness.presets`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compare.samplestats import Stats
from harness.errors import HarnessError, UsageError
from harness.presets import (
    Figure,
    Preset,
    SeedReference,
    cell_values,
    list_presets,
    load_preset,
    load_reference,
    matches,
    read_probes,
    split_scaled_name,
)
from harness.record import MachineInfo, Record, Sample, VMInfo, build_dirs, find_records
from harness.record.identity import build_identity, disk_name, series_identity
from harness.spec import Cell
from harness.sweep import HOST_DISK_AXIS, QEMU_AXIS, canonical
from harness.workloads import Metric, metric_info

# -- figures of a sample ----------------------------------------------------------------------


def _host(path: tuple[str, ...]) -> Callable[[Sample], float | None]:
    def get(sample: Sample) -> float | None:
        return sample.host_figure(*path)

    return get


# Figures read from a sample's host fields rather than its metrics.
EXTRA_FIGURES: dict[str, tuple[Metric, Callable[[Sample], float | None]]] = {
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


def sample_value(sample: Sample, name: str) -> float | None:
    if name in EXTRA_FIGURES:
        return EXTRA_FIGURES[name][1](sample)
    return sample.figure(name)


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


# -- series: records of one sweep on one machine identity ------------------------------------------


@dataclass
class CellResult:
    record: Record
    cell: Cell
    values: dict[str, Any]

    @property
    def id(self) -> str:
        return self.cell.id

    @property
    def ok(self) -> list[Sample]:
        return self.record.ok

    @property
    def failed(self) -> list[Sample]:
        return self.record.failed

    def stats(self, name: str) -> Stats:
        return Stats.of([v for s in self.ok if (v := sample_value(s, name)) is not None])

    def too_fast(self, name: str) -> bool:
        """Whether bonnie++ printed ``+++++`` for this figure in every ok sample."""
        return bool(self.ok) and all(name in s.too_fast for s in self.ok)


@dataclass
class Series:
    sweep: str
    machine: MachineInfo
    vm: VMInfo
    cells: list[CellResult]
    preset: Preset | None = None
    scale: float = 1.0
    reference: SeedReference | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def accel(self) -> str:
        return str(self.vm.get("accel") or self.machine.get("accel") or "unknown")

    @property
    def builds(self) -> list[str]:
        """The QEMU builds of the series' cells (the ``qemu`` axis), oldest version first."""
        return sorted({str(c.values[QEMU_AXIS]) for c in self.cells}, key=_version_key)

    @property
    def disks(self) -> list[str]:
        """The host disks of the series' cells (the ``host_disk`` axis), the native disk first."""
        return sorted({str(c.values[HOST_DISK_AXIS]) for c in self.cells}, key=lambda d: (d != "native", d))

    @property
    def on_disk(self) -> str:
        """`` on host disk MODEL`` where every cell ran on one model, else nothing."""
        disks = self.disks
        return f" on host disk {disks[0]}" if len(disks) == 1 and disks[0] != "native" else ""

    def select(self, where: Mapping[str, Sequence[Any]]) -> list[CellResult]:
        return [c for c in self.cells if matches({k: tuple(v) for k, v in where.items()}, c.values)]

    def resolve(self, figure: Figure, build: str | None = None) -> Stats | None:
        """Our figure for a seed figure: the one cell its selector matches (under ``build``, when
        the series has several), else None."""
        found = self.select(figure.where)
        if build is not None:
            found = [c for c in found if c.values[QEMU_AXIS] == build]
        if len(found) != 1:
            return None
        return found[0].stats(figure.metric)

    def resolver(self, build: str | None) -> Callable[[Figure], Stats | None]:
        """:meth:`resolve` under one build, as the seed's shape checks take it."""
        return lambda figure: self.resolve(figure, build)


def spec_position(preset: Preset, values: Mapping[str, Any]) -> tuple[int, ...]:
    """Where a cell comes in its preset: the order of the spec's axis values, at any scale."""
    position = []
    for axis, options in preset.spec.axes.items():
        wanted = canonical(axis, values.get(axis))
        canon = [canonical(axis, v) for v in options]
        position.append(canon.index(wanted) if wanted in canon else len(canon))
    return tuple(position)


def sweep_name(record: Record) -> str:
    """The sweep a record belongs to (its run id ``sweep-NAME``), or its run id."""
    run_id = record.run_id or ""
    return run_id.removeprefix("sweep-") if run_id.startswith("sweep-") else run_id


def load_records(paths: Sequence[Path]) -> tuple[list[Record], list[Path]]:
    """Records of files and directories (the records directly inside, found by the record store);
    the directories too, for probes."""
    for path in paths:
        if not path.exists():
            raise UsageError(
                f"{path} does not exist: pass record files or directories such as results/sweeps/NAME"
            )
    # a run's or sweep's QEMU builds keep their records in directories of their own
    searched = [p for path in paths for p in (path, *(build_dirs(path) if path.is_dir() else ()))]
    try:
        records = find_records(searched)
    except UsageError:
        raise UsageError(
            f"no records in {', '.join(map(str, paths))}: pass record files or sweep directories"
        ) from None
    return records, [p for p in paths if p.is_dir()]


def _version_key(label: str) -> tuple[Any, ...]:
    """``7.2.22`` before ``10.0.2``: a version's numbers as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"[.+~:-]", label))


def build_labels(records: Sequence[Record]) -> dict[tuple[Any, ...], str]:
    """A short name for each QEMU build among ``records`` (:func:`build_identity`): its version,
    with its Debian version, then its binary's digest, where another build shares it."""
    builds = list(dict.fromkeys(build_identity(r) for r in records))
    by_build = {build_identity(r): r.machine for r in records}

    def name(build: tuple[Any, ...], depth: int) -> str:
        machine = by_build[build]
        parts = [str(machine.get("qemu_version") or "?")]
        if depth >= 1:
            parts.append(f"Debian {machine.get('qemu_debian_version') or '?'}")
        if depth >= 2:
            parts.append(f"sha256 {str(machine.get('qemu_sha256') or '?')[:12]}")
        return parts[0] + (f" ({', '.join(parts[1:])})" if parts[1:] else "")

    labels: dict[tuple[Any, ...], str] = {}
    for build in builds:
        for depth in range(3):
            label = name(build, depth)
            if sum(name(other, depth) == label for other in builds) == 1 or depth == 2:
                labels[build] = label
                break
    return labels


def group_series(records: Iterable[Record], dirs: Sequence[Path] = ()) -> list[Series]:
    """Records grouped by sweep and machine identity; a preset's series gets its seed reference.

    The QEMU build is not part of a series: records of one sweep under several builds (a QEMU
    axis, or runs a person puts side by side) are one series whose cells carry their build as
    the value of the ``qemu`` axis (:func:`build_labels`). Nor is the host disk model, but in a
    preset's series (its seed's claims are checked per disk, a section each): the cells carry it
    as the value of the ``host_disk`` axis."""
    known = set(list_presets())
    groups: dict[tuple[Any, ...], list[Record]] = {}
    for record in records:
        name = sweep_name(record)
        apart = split_scaled_name(name)[0] in known
        groups.setdefault((name, series_identity(record, build=False, disk=apart)), []).append(record)
    probes = read_probes(dirs)
    out = []
    for (name, _ident), members in groups.items():
        cells = []
        labels = build_labels(members)
        for record in members:
            cell = Cell.from_dict(record.cell.data)
            values = {
                **cell_values(cell),
                QEMU_AXIS: labels[build_identity(record)],
                HOST_DISK_AXIS: disk_name(record.machine),
            }
            cells.append(CellResult(record=record, cell=cell, values=values))
        base, scale = split_scaled_name(name)
        preset = load_preset(base) if base in known else None
        reference = None
        if preset is not None and preset.reference_path.is_file():
            reference = load_reference(preset.reference_path)
        cells.sort(
            key=lambda c: (
                spec_position(preset, c.values) if preset else (),
                c.id,
                c.values[HOST_DISK_AXIS] != "native",
                str(c.values[HOST_DISK_AXIS]),
                _version_key(str(c.values[QEMU_AXIS])),
            )
        )
        mine = [p for p in probes if preset is not None and p.get("probe") in preset.probes]
        out.append(
            Series(
                sweep=name,
                machine=members[0].machine,
                vm=members[0].vm,
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
