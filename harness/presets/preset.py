"""The preset file: a sweep spec with a ``[preset]`` table, at any ``--scale``.

``NAME.toml`` of the presets dir (``harness/data/presets``, shipped with the
package) is a sweep spec with one more table, ``[preset]``: which seed it
reproduces, which parameters ``--scale`` multiplies (and their floors), what
scale 1 means, the scale that fits a TCG run, and how the report lays it out
(``[[preset.table]]``, ``[[preset.plot]]``)::

    [preset]
    seed = "001"
    scaled = ["size", "dd_mib"]
    floor = { size = "64M" }
    below_1 = { payload = "small" }     # params for scales below 1
    scale_1 = "the seed's own sizes: ..."
    tcg_scale = 0.25

Scale 1 is always the seed's own setup.  A scaled preset is a sweep named
``NAME-scaleS`` (its records never mix with another scale's), expanded and
validated like any spec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.errors import SpecError, UsageError
from harness.paths import package_data
from harness.presets.scaling import SCALABLE, check_scale, scale_value, scaled_name, split_scaled_name
from harness.presets.select import Where, parse_where
from harness.sample.capabilities import PROBE_LABELS
from harness.spec import axis_names
from harness.sweep import (
    QEMU_AXIS,
    SweepSpec,
    estimate_sample_s,
    expand_spec,
    format_duration,
    parse_spec,
)
from harness.untrusted import toml_loads

PRESETS_DIR = package_data("presets")
SEED_SUFFIX = ".seed.toml"
LAYOUTS = ("cells", "bonnie")


@dataclass(frozen=True)
class TableSpec:
    """A table of the report: the cells ``where`` selects, one column per metric."""

    title: str
    metrics: tuple[str, ...] = ()
    where: Where = field(default_factory=dict)
    layout: str = "cells"


@dataclass(frozen=True)
class PlotSpec:
    """A bar chart: one group of bars per value of ``group``, one bar per ``series`` value."""

    metric: str
    title: str
    group: tuple[str, ...]
    series: str | None = None
    where: Where = field(default_factory=dict)
    log: bool = False


@dataclass(frozen=True)
class Preset:
    name: str
    path: Path
    spec: SweepSpec
    seed: str
    title: str
    scaled: tuple[str, ...]
    floor: Mapping[str, Any]
    below_1: Mapping[str, Any]
    scale_1: str
    tcg_scale: float
    tables: tuple[TableSpec, ...] = ()
    plots: tuple[PlotSpec, ...] = ()
    probes: tuple[str, ...] = ()

    @property
    def reference_path(self) -> Path:
        return self.path.with_name(self.name + SEED_SUFFIX)

    def at_scale(self, scale: float) -> SweepSpec:
        """The spec with every scaled parameter multiplied by ``scale`` (see :func:`scale_value`)."""
        check_scale(scale)
        params = dict(self.spec.params)
        axes = dict(self.spec.axes)
        chunk = int(params.get("dd_chunk_mib", 2))
        for key in self.scaled:
            floor = self.floor.get(key)
            if key in params:
                params[key] = scale_value(key, params[key], scale, floor=floor, chunk_mib=chunk)
            if key in axes:
                axes[key] = tuple(
                    dict.fromkeys(scale_value(key, v, scale, floor=floor, chunk_mib=chunk) for v in axes[key])
                )
        if scale < 1:
            params.update(self.below_1)
        return replace(
            self.spec,
            name=scaled_name(self.name, scale),
            source=self.spec.source if scale == 1 else f"{self.spec.source} at --scale {scale:g}",
            params=params,
            axes=axes,
        )


def list_presets(directory: Path = PRESETS_DIR) -> list[str]:
    return sorted(
        p.name.removesuffix(".toml") for p in directory.glob("*.toml") if not p.name.endswith(SEED_SUFFIX)
    )


def load_preset(name: str, directory: Path = PRESETS_DIR) -> Preset:
    """Read ``NAME.toml`` of the presets dir; an unknown name lists the known ones."""
    path = directory / f"{name}.toml"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or not path.is_file():
        known = ", ".join(list_presets(directory))
        raise UsageError(f"unknown preset {name!r}: use one of {known} (--preset list describes them)")
    return parse_preset(path.read_text(encoding="utf-8"), path=path)


def parse_preset(text: str, *, path: Path) -> Preset:
    """A preset from its text: the sweep part through :func:`parse_spec`, then ``[preset]``."""
    source = str(path)
    spec = parse_spec(text, source=source, default_name=path.stem, extra_keys=("preset",))
    if spec.name != path.stem:
        raise SpecError(
            f"{source}: name {spec.name!r} differs from the file's name {path.stem!r}: make them one"
        )
    table = toml_loads(text).get("preset")
    if not isinstance(table, dict):
        raise SpecError(f"{source}: a preset needs a [preset] table (seed, scaled, scale_1, tcg_scale)")

    axes = axis_names()

    def fail(key: str, message: str) -> SpecError:
        return SpecError(f"{source}: [preset] {key}: {message}")

    known = ("seed", "title", "scaled", "floor", "below_1", "scale_1", "tcg_scale", "table", "plot", "probes")
    for key in table:
        if key not in known:
            raise fail(key, f"unknown key: use {', '.join(known)}")
    for key in ("seed", "title", "scale_1"):
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise fail(key, "give a non-empty string")
    scaled = tuple(table.get("scaled", []))
    for key in scaled:
        if key not in SCALABLE:
            raise fail("scaled", f"{key!r} cannot be scaled: use {', '.join(SCALABLE)}")
        if key not in spec.params and key not in spec.axes:
            raise fail("scaled", f"{key!r} is in neither [params] nor [axes]")
        for ex in spec.excludes:
            if key in ex.match:
                raise fail(
                    "scaled", f"{key!r} is named by the [[exclude]] of line {ex.line}: scaling would miss it"
                )
    floor = table.get("floor", {})
    below_1 = table.get("below_1", {})
    for key, value in (("floor", floor), ("below_1", below_1)):
        if not isinstance(value, dict):
            raise fail(key, "give an inline table")
    for key in floor:
        if key not in scaled:
            raise fail("floor", f"{key!r} is not scaled")
    for key in below_1:
        if key not in axes or key in spec.axes:
            raise fail("below_1", f"{key!r} must be a [params] axis")
    tcg_scale = table.get("tcg_scale", 1.0)
    if isinstance(tcg_scale, bool) or not isinstance(tcg_scale, int | float):
        raise fail("tcg_scale", "give a number")
    tables = []
    for index, raw in enumerate(table.get("table", [])):
        what = f"{source}: [[preset.table]] {index + 1}"
        layout = raw.get("layout", "cells")
        if layout not in LAYOUTS:
            raise SpecError(f"{what}: layout {layout!r}: use one of {', '.join(LAYOUTS)}")
        metrics = tuple(raw.get("metrics", ()))
        if layout == "cells" and not metrics:
            raise SpecError(f"{what}: give the metrics to show")
        tables.append(
            TableSpec(
                title=str(raw.get("title", "")),
                metrics=metrics,
                where=parse_where(raw.get("where"), what),
                layout=layout,
            )
        )
    plots = _plots(table.get("plot", []), source, axes)
    probes = tuple(table.get("probes", ()))
    for probe in probes:
        if probe not in PROBE_LABELS:
            raise fail("probes", f"unknown probe {probe!r}: use {', '.join(PROBE_LABELS)}")
    return Preset(
        name=spec.name,
        path=path,
        spec=spec,
        seed=table["seed"],
        title=table["title"],
        scaled=scaled,
        floor=dict(floor),
        below_1=dict(below_1),
        scale_1=table["scale_1"],
        tcg_scale=float(tcg_scale),
        tables=tuple(tables),
        plots=tuple(plots),
        probes=probes,
    )


def _plots(raw_plots: Any, source: str, axes: tuple[str, ...]) -> list[PlotSpec]:
    """The preset's ``[[preset.plot]]`` entries: a metric grouped by known axes (or the QEMU axis)."""
    plots = []
    for index, raw in enumerate(raw_plots):
        what = f"{source}: [[preset.plot]] {index + 1}"
        group = tuple(raw.get("group", ()))
        series = raw.get("series")
        for axis in (*group, *([series] if series else [])):
            if axis not in axes and axis != QEMU_AXIS:
                raise SpecError(f"{what}: unknown axis {axis!r}: use {', '.join((*axes, QEMU_AXIS))}")
        if not raw.get("metric") or not group:
            raise SpecError(f"{what}: give a metric and the axes to group by")
        plots.append(
            PlotSpec(
                metric=str(raw["metric"]),
                title=str(raw.get("title", raw["metric"])),
                group=group,
                series=series,
                where=parse_where(raw.get("where"), what),
                log=bool(raw.get("log", False)),
            )
        )
    return plots


def resolve_spec(spec_path: Path | None, *, preset: str | None, scale: float | None) -> SweepSpec:
    """What ``diskbench sweep`` runs: a spec file, or a preset at a scale."""
    from harness.sweep import load_spec

    if preset is not None and spec_path is not None:
        raise UsageError(f"give a spec file or --preset, not both ({spec_path} and --preset {preset})")
    if preset is None:
        if scale is not None:
            raise UsageError("--scale applies to presets: use it with --preset NAME")
        if spec_path is None:
            raise UsageError("give a sweep spec file, or --preset NAME (--preset list shows them)")
        return load_spec(spec_path)
    return load_preset(preset).at_scale(1.0 if scale is None else scale)


def estimate_s(spec: SweepSpec, *, accel: str = "tcg", repeat: int | None = None) -> tuple[int, float]:
    """Cells and the prior wall time of a whole spec (see :func:`harness.sweep.estimate_sample_s`)."""
    plan = expand_spec(spec)
    reps = (spec.repeat if repeat is None else repeat) * max(1, len(spec.qemu))
    return len(plan.cells), sum(estimate_sample_s(c, accel=accel) for c in plan.cells) * reps


def render_list(directory: Path = PRESETS_DIR) -> str:
    """``--preset list``: every preset with its seed, description, scale and time estimates."""
    lines = []
    for name in list_presets(directory):
        preset = load_preset(name, directory)
        cells, tcg_s = estimate_s(preset.at_scale(preset.tcg_scale), repeat=1)
        _, kvm_s = estimate_s(preset.spec, accel="kvm")
        lines.append(f"{name}  (seed {preset.seed}) {preset.title}")
        lines.append(f"  {preset.spec.description}")
        lines.append(f"  scale 1: {preset.scale_1}")
        lines.append(
            f"  estimate: TCG at --scale {preset.tcg_scale:g}, 1 repeat: {cells} cells, about "
            f"{format_duration(tcg_s)}; KVM at scale 1, {preset.spec.repeat} repeats: about {format_duration(kvm_s)}"
        )
        lines.append(f"  diskbench sweep --preset {name} --scale {preset.tcg_scale:g} --repeat 1")
        lines.append("")
    return "\n".join(lines)


def probes_of(spec: SweepSpec) -> tuple[str, ...]:
    """The probes of the preset ``spec`` is at some scale (see :mod:`harness.sample.capabilities`); () for any other spec."""
    base, _scale = split_scaled_name(spec.name)
    if base not in list_presets():
        return ()
    return load_preset(base).probes
