"""Presets: the seed experiments as named sweeps, scalable, with the seeds' own figures.

A preset is a sweep spec in ``sweeps/presets/NAME.toml`` with one more table,
``[preset]``: which seed it reproduces, which parameters ``--scale`` multiplies
(and their floors), what scale 1 means, the scale that fits a TCG run, and
how the report lays it out (``[[preset.table]]``, ``[[preset.plot]]``)::

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

``sweeps/presets/NAME.seed.toml`` holds the seed's figures as the seed text
writes them: ``[[figure]]`` (a cell selector, a metric, the seed's value),
``[[ratio]]`` and ``[[order]]`` (the *shape* claims to check against ours),
and ``[[bonnie]]`` rows of bonnie++'s table.  Loading and comparing is pure;
:func:`record_probes` probes this QEMU for what a preset can only report
(qcow2 compressed writes) and writes the result next to the records.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.binaries import ON_PATH, Binaries
from harness.errors import SpecError, UsageError
from harness.paths import REPO_ROOT
from harness.spec import Cell, format_size, parse_size
from harness.stats import Stats
from harness.sweep import (
    AXES,
    SweepSpec,
    canonical,
    estimate_sample_s,
    expand_spec,
    format_duration,
    parse_spec,
)

PRESETS_DIR = REPO_ROOT / "sweeps" / "presets"
SEED_SUFFIX = ".seed.toml"
# what --scale can multiply, and how each is rounded (see scale_value)
SCALABLE = ("size", "dd_mib", "bonnie_size_mib", "bonnie_files")
LAYOUTS = ("cells", "bonnie")
MAX_SCALE = 100.0
# a ratio within this factor of 1 counts as "about the same"
SAME_TOLERANCE = 0.10
MIB = 1024**2
_SIZE_KEYS = ("size", "cluster_size")
_SCALE_NAME_RE = re.compile(r"^(?P<base>.+?)-scale(?P<scale>[0-9][0-9.e+-]*)$")


# -- cells as flat values, and selectors over them -------------------------------------------


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
        "cache": drv.cache.value,
        "aio": drv.aio.value,
        "interface": drv.interface.value,
        "workload": wl.name.value,
        **wl.params(),
        "cache_state": cell.cache_state.value,
    }


Where = Mapping[str, tuple[Any, ...]]


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
    if key in _SIZE_KEYS and isinstance(value, int) and not isinstance(value, bool):
        return format_size(value).upper()
    return str(value)


def _where(raw: Any, what: str) -> dict[str, tuple[Any, ...]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecError(f'{what}: where must be an inline table such as {{ format = "raw" }}')
    out: dict[str, tuple[Any, ...]] = {}
    for key, value in raw.items():
        if key not in AXES:
            raise SpecError(f"{what}: unknown axis {key!r} in where: use {', '.join(AXES)}")
        out[key] = tuple(value) if isinstance(value, list) else (value,)
    return out


# -- the preset file ----------------------------------------------------------------------------


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


def check_scale(scale: float) -> None:
    if not math.isfinite(scale) or scale <= 0 or scale > MAX_SCALE:
        raise UsageError(f"--scale {scale:g} is not allowed: use a number above 0 and at most {MAX_SCALE:g}")


def scaled_name(name: str, scale: float) -> str:
    """The sweep name of a preset at ``scale``: ``booth-2010``, ``booth-2010-scale0.25``."""
    return name if scale == 1 else f"{name}-scale{scale:g}"


def split_scaled_name(name: str) -> tuple[str, float]:
    """``"booth-2010-scale0.25"`` -> ``("booth-2010", 0.25)``; a plain name is scale 1."""
    match = _SCALE_NAME_RE.match(name)
    if match:
        try:
            return match.group("base"), float(match.group("scale"))
        except ValueError:
            pass
    return name, 1.0


def scale_value(key: str, value: Any, scale: float, *, floor: Any = None, chunk_mib: int = 2) -> Any:
    """One parameter at ``scale``, rounded to what it can be, never below ``floor``.

    ``size`` rounds to whole MiB; ``dd_mib`` to whole chunks (at least one);
    ``bonnie_size_mib`` and ``bonnie_files`` to integers (``bonnie_files = 0``,
    no file tests, stays 0).
    """
    if key == "size":
        scaled = max(MIB, round(parse_size(value) * scale / MIB) * MIB)
        if floor is not None:
            scaled = max(scaled, parse_size(floor, what="floor of size"))
        return format_size(scaled).upper()
    if key not in SCALABLE:
        raise SpecError(f"{key} cannot be scaled: use {', '.join(SCALABLE)}")
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(f"{key} {value!r} is not an integer, so it cannot be scaled")
    if key == "bonnie_files" and value == 0:
        return 0
    if key == "dd_mib":
        chunks = max(1, round(value * scale / chunk_mib))
        if floor is not None:
            chunks = max(chunks, math.ceil(int(floor) / chunk_mib))
        return chunks * chunk_mib
    scaled_int = max(1, round(value * scale))
    return max(scaled_int, int(floor)) if floor is not None else scaled_int


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
    table = tomllib.loads(text).get("preset")
    if not isinstance(table, dict):
        raise SpecError(f"{source}: a preset needs a [preset] table (seed, scaled, scale_1, tcg_scale)")

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
        if key not in AXES or key in spec.axes:
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
                where=_where(raw.get("where"), what),
                layout=layout,
            )
        )
    plots = []
    for index, raw in enumerate(table.get("plot", [])):
        what = f"{source}: [[preset.plot]] {index + 1}"
        group = tuple(raw.get("group", ()))
        series = raw.get("series")
        for axis in (*group, *([series] if series else [])):
            if axis not in AXES:
                raise SpecError(f"{what}: unknown axis {axis!r}: use {', '.join(AXES)}")
        if not raw.get("metric") or not group:
            raise SpecError(f"{what}: give a metric and the axes to group by")
        plots.append(
            PlotSpec(
                metric=str(raw["metric"]),
                title=str(raw.get("title", raw["metric"])),
                group=group,
                series=series,
                where=_where(raw.get("where"), what),
                log=bool(raw.get("log", False)),
            )
        )
    probes = tuple(table.get("probes", ()))
    for probe in probes:
        if probe not in PROBES:
            raise fail("probes", f"unknown probe {probe!r}: use {', '.join(PROBES)}")
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
    reps = spec.repeat if repeat is None else repeat
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


# -- the seed's figures ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One figure of a seed: the cell it belongs to, the metric, and the seed's value (if any)."""

    name: str
    where: Where
    metric: str
    seed: float | None = None
    seed_text: str = ""


@dataclass(frozen=True)
class Ratio:
    """A shape claim: figure ``of`` over figure ``to``; the seed's ratio or the expected direction."""

    name: str
    of: str
    to: str
    seed: float | None = None
    expect: str | None = None  # ">", "<" or "=" when the seed gives no figures
    claim: str = ""


@dataclass(frozen=True)
class Order:
    """A shape claim: these figures, smallest first."""

    name: str
    items: tuple[str, ...]
    claim: str = ""


@dataclass(frozen=True)
class BonnieRow:
    """A row of the seed's bonnie++ table: per test, (rate, %CP) as printed."""

    label: str
    where: Where
    size: str
    files: int
    values: Mapping[str, tuple[str, str]]


@dataclass(frozen=True)
class SeedReference:
    seed: str
    document: str
    setup: str
    notes: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    ratios: tuple[Ratio, ...] = ()
    orders: tuple[Order, ...] = ()
    bonnie: tuple[BonnieRow, ...] = ()

    def figure(self, name: str) -> Figure:
        for fig in self.figures:
            if fig.name == name:
                return fig
        raise KeyError(name)


def direction(ratio: float, tolerance: float = SAME_TOLERANCE) -> str:
    """``>`` above 1 by more than the tolerance, ``<`` below, else ``=``."""
    if ratio > 1 + tolerance:
        return ">"
    if ratio < 1 / (1 + tolerance):
        return "<"
    return "="


def load_reference(path: Path) -> SeedReference:
    """Read a ``NAME.seed.toml``; a bad entry names the file and the entry."""
    source = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"seed reference {source} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: {exc}: not valid TOML") from None
    from harness.workloads.bonnie import TESTS

    figures = []
    for index, raw in enumerate(data.get("figure", [])):
        what = f"{source}: [[figure]] {index + 1}"
        if not raw.get("name") or not raw.get("metric"):
            raise SpecError(f"{what}: give a name and a metric")
        seed = raw.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | float)):
            raise SpecError(f"{what}: seed must be a number, as the seed text gives it")
        figures.append(
            Figure(
                name=str(raw["name"]),
                where=_where(raw.get("where"), what),
                metric=str(raw["metric"]),
                seed=None if seed is None else float(seed),
                seed_text=str(raw.get("seed_text", "" if seed is None else f"{seed:g}")),
            )
        )
    names = {f.name for f in figures}
    if len(names) != len(figures):
        raise SpecError(f"{source}: two figures have the same name")
    by_name = {f.name: f for f in figures}
    ratios = []
    for index, raw in enumerate(data.get("ratio", [])):
        what = f"{source}: [[ratio]] {index + 1}"
        for key in ("of", "to"):
            if raw.get(key) not in names:
                raise SpecError(f"{what}: {key} = {raw.get(key)!r} names no figure")
        of, to = by_name[raw["of"]], by_name[raw["to"]]
        seed = raw.get("seed")
        if seed is None and of.seed is not None and to.seed:
            seed = of.seed / to.seed
        expect = raw.get("expect")
        if expect not in (None, ">", "<", "="):
            raise SpecError(f"{what}: expect {expect!r}: use >, < or =")
        if seed is None and expect is None:
            raise SpecError(f'{what}: the figures have no seed values: give expect = ">", "<" or "="')
        ratios.append(
            Ratio(
                name=str(raw.get("name", f"{of.name} / {to.name}")),
                of=of.name,
                to=to.name,
                seed=None if seed is None else float(seed),
                expect=expect,
                claim=str(raw.get("claim", "")),
            )
        )
    orders = []
    for index, raw in enumerate(data.get("order", [])):
        items = tuple(raw.get("items", ()))
        bad = [i for i in items if i not in names]
        if len(items) < 2 or bad:
            raise SpecError(
                f"{source}: [[order]] {index + 1}: list two or more figure names ({bad or items})"
            )
        orders.append(Order(name=str(raw.get("name", "")), items=items, claim=str(raw.get("claim", ""))))
    rows = []
    keys = {t.key for t in TESTS}
    for index, raw in enumerate(data.get("bonnie", [])):
        what = f"{source}: [[bonnie]] {index + 1}"
        values: dict[str, tuple[str, str]] = {}
        for key, value in raw.items():
            if key in ("label", "where", "size", "files"):
                continue
            if key not in keys or not (isinstance(value, list) and len(value) == 2):
                raise SpecError(
                    f"{what}: {key}: use a bonnie++ test ({', '.join(sorted(keys))}) = [rate, %CP]"
                )
            values[key] = (str(value[0]), str(value[1]))
        rows.append(
            BonnieRow(
                label=str(raw.get("label", "")),
                where=_where(raw.get("where"), what),
                size=str(raw.get("size", "")),
                files=int(raw.get("files", 0)),
                values=values,
            )
        )
    return SeedReference(
        seed=str(data.get("seed", "")),
        document=str(data.get("document", "")),
        setup=str(data.get("setup", "")),
        notes=tuple(str(n) for n in data.get("notes", ())),
        figures=tuple(figures),
        ratios=tuple(ratios),
        orders=tuple(orders),
        bonnie=tuple(rows),
    )


# -- the seed's shape against ours (pure) ------------------------------------------------------------


@dataclass(frozen=True)
class ShapeCheck:
    """One claim of a seed checked against our figures: ``holds``, ``changed`` or ``not measured``."""

    kind: str  # "ratio" or "order"
    name: str
    claim: str
    seed: str
    ours: str
    verdict: str
    seed_value: float | None = None
    our_value: float | None = None


Resolve = Callable[[Figure], Stats | None]


def _ratio_text(value: float) -> str:
    return f"x{value:.0f}" if value >= 100 else f"x{value:.3g}"


def check_ratio(ratio: Ratio, ref: SeedReference, resolve: Resolve) -> ShapeCheck:
    of, to = resolve(ref.figure(ratio.of)), resolve(ref.figure(ratio.to))
    expected = ratio.expect or direction(ratio.seed or 1.0)
    seed_text = (
        _ratio_text(ratio.seed)
        if ratio.seed is not None
        else {">": "above 1", "<": "below 1", "=": "about 1"}[expected]
    )
    if of is None or to is None or not of.n or not to.n or to.median == 0:
        return ShapeCheck("ratio", ratio.name, ratio.claim, seed_text, "-", "not measured", ratio.seed)
    ours = of.median / to.median
    verdict = "holds" if direction(ours) == expected else "changed"
    return ShapeCheck(
        "ratio", ratio.name, ratio.claim, seed_text, _ratio_text(ours), verdict, ratio.seed, ours
    )


def check_order(order: Order, ref: SeedReference, resolve: Resolve) -> ShapeCheck:
    found = {name: resolve(ref.figure(name)) for name in order.items}
    seed_text = " < ".join(order.items)
    if any(s is None or not s.n for s in found.values()):
        return ShapeCheck("order", order.name, order.claim, seed_text, "-", "not measured")
    medians = {name: stats.median for name, stats in found.items() if stats is not None}
    ranked = sorted(order.items, key=lambda n: medians[n])
    # figures within the tolerance of each other are tied: a tie does not contradict the order
    ours = ranked[0]
    for before, after in itertools.pairwise(ranked):
        ours += (" ≈ " if direction(medians[after] / medians[before]) == "=" else " < ") + after
    held = all(
        direction(medians[b] / medians[a]) != "<" for a, b in itertools.pairwise(order.items) if medians[a]
    )
    return ShapeCheck("order", order.name, order.claim, seed_text, ours, "holds" if held else "changed")


def check_shape(ref: SeedReference, resolve: Resolve) -> list[ShapeCheck]:
    return [check_ratio(r, ref, resolve) for r in ref.ratios] + [
        check_order(o, ref, resolve) for o in ref.orders
    ]


# -- probes: what a preset reports but cannot run ------------------------------------------------------


def probe_compressed_writes(work_dir: Path, binaries: Binaries = ON_PATH) -> dict[str, Any]:
    """Whether a guest could write to a compressed qcow2: QEMU's compress filter, probed.

    qcow2 compresses only what ``qemu-img convert -c`` writes or what goes
    through the ``compress`` filter driver; a guest filesystem rewrites its
    blocks, so the probe writes a cluster twice through the filter.
    """
    import tempfile

    from harness import proc
    from harness.errors import CommandError

    qemu_io = binaries.qemu_io
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".diskbench-compress-", dir=work_dir) as tmp:
        image = Path(tmp) / "probe.qcow2"
        node = {
            "driver": "compress",
            "file": {"driver": "qcow2", "file": {"driver": "file", "filename": str(image)}},
        }
        steps = [
            ("create", [binaries.qemu_img, "create", "-q", "-f", "qcow2", str(image), "16M"]),
            ("write", [qemu_io, "-c", "write -P 0x5a 0 64k", "json:" + json.dumps(node)]),
            ("rewrite", [qemu_io, "-c", "write -P 0xa5 0 64k", "json:" + json.dumps(node)]),
        ]
        for step, argv in steps:
            try:
                result = proc.run(argv, timeout_s=60, check=False)
            except CommandError as exc:
                return {"supported": False, "reason": exc.message, "argv": argv}
            text = (result.stdout + result.stderr).strip()
            if result.ok and "failed" not in text:
                continue
            last = text.splitlines()[-1] if text else f"exit {result.returncode}"
            why = {
                "create": "qemu-img cannot create a qcow2 here",
                "write": "the compress filter cannot write",
                "rewrite": "a compressed cluster cannot be rewritten through the compress filter, "
                "so a guest filesystem (which rewrites its blocks) cannot run on a compressed qcow2",
            }[step]
            return {"supported": False, "reason": f"{why} ({' '.join(argv[:3])}: {last})", "argv": argv}
    return {"supported": True, "reason": "two writes to one cluster through the compress filter worked"}


PROBES: dict[str, Callable[[Path, Binaries], dict[str, Any]]] = {"compressed-writes": probe_compressed_writes}
PROBE_LABELS = {"compressed-writes": "qcow2 compressed (compress filter)"}


def record_probes(
    spec: SweepSpec, directory: Path, work_dir: Path, binaries: Binaries = ON_PATH
) -> list[str]:
    """Run the probes of the preset ``spec`` is (if any); write ``DIR/probes/NAME.json``; say what."""
    base, _scale = split_scaled_name(spec.name)
    if base not in list_presets():
        return []
    notes = []
    for probe in load_preset(base).probes:
        result = PROBES[probe](work_dir, binaries)
        out = directory / "probes" / f"{probe}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"probe": probe, "label": PROBE_LABELS[probe], **result}, indent=1) + "\n")
        state = "supported" if result["supported"] else "unsupported"
        notes.append(f"probe {probe}: {state}: {result['reason']}")
    return notes


def read_probes(directories: Sequence[Path]) -> list[dict[str, Any]]:
    found = []
    for directory in directories:
        for path in sorted((directory / "probes").glob("*.json")):
            try:
                found.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
    return found
