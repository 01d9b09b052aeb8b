"""Pure parts of the history suite: the matrix as asv sees it, the figures, the machine name.

No I/O here but reading the environment mapping handed in.  asv imports the
suite from the current checkout but runs it with the *measured commit's*
``harness``, which can predate ``harness.history.asvrun``: this module therefore
uses only what the harness has had since sweeps exist (``harness.sweep``,
``harness.spec``, ``harness.workloads``), and repeats the two-line machine
name rule of :mod:`harness.history.asvrun` instead of importing it.

asv draws every series as "up is worse" only if each figure grows when
things get worse.  Times, bytes and counts do; a throughput does not, so a
figure where higher is better (``mib_per_s``) is stored as its inverse
(seconds per GiB): see :func:`figure_of`.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import SpecError, UsageError
from harness.record import Record
from harness.spec import Cell, make_cell
from harness.sweep import SweepSpec
from harness.workloads import Metric, metric_info

# Results of an older version of a benchmark are dropped by asv: bump this
# only when the meaning of a figure changes, not for a cosmetic edit.
SUITE_VERSION = "diskbench-history-1"

ACCELS = ("kvm", "tcg")
ENV_SPEC = "DISKBENCH_HISTORY_SPEC"
ENV_REPEAT = "DISKBENCH_HISTORY_REPEAT"
ENV_MACHINE = "DISKBENCH_ASV_MACHINE"
ENV_RECORDS = "DISKBENCH_HISTORY_RECORDS"
DEFAULT_SPEC = Path(__file__).resolve().parents[2] / "sweeps" / "history.toml"

DEFAULT_WORKLOAD = "install"

# A workload's phases and own figures are its registry entry's (WorkloadKind.phases, .figures);
# these are what a measured commit's harness from before its entries declared them tracked.
LEGACY_PHASES: Mapping[str, tuple[str, ...]] = {
    "install": ("partition", "mkfs", "mount", "extract", "unpack", "sync", "umount", "fsck"),
    "dd": ("mkfs", "mount", "write", "umount", "fsck"),
    "bonnie": ("mkfs", "mount", "bonnie", "umount", "fsck"),
    "mkfs": ("mkfs", "fsck"),
}
LEGACY_FIGURES: Mapping[str, tuple[str, ...]] = {
    "install": ("files", "bytes", "packages"),
    "dd": ("mib_per_s", "bytes"),
    "mkfs": ("bytes",),
}
HOST_FIGURES = (
    "host.boot_s",
    "host.overhead_s",
    "host.create_s",
    "host.written_bytes",
    "host.guest_written_bytes",
    "host.write_amplification",
    "host.flushes",
    "host.write_calls",
)
# The device's latency percentiles and mean per request type, and its IO time, from QEMU's
# accounting (harness.workloads.latency): every guest sample has them (a type with no request is a gap).
DEVICE_FIGURES = (
    *(f"dev.{op}_{stat}_ms" for op in ("read", "write", "flush") for stat in ("p50", "p90", "p99", "mean")),
    "dev.io_s",
)
# fio's jobs (images/workloads/fio.fio) and the latencies tracked of each, per target prefix
FIO_JOBS = (
    "seq-write",
    "seq-read",
    "rand-write-qd1",
    "rand-write-qd32",
    "rand-read-qd1",
    "rand-read-qd32",
    "fsync-write",
)
FIO_LATENCIES = ("clat_mean_ms", "clat_p50_ms", "clat_p99_ms")
FIO_PREFIXES = {"raw": ("raw-",), "file": ("file-",), "both": ("raw-", "file-")}

# asv formats these two units itself (human times and sizes)
ASV_UNITS = {"s": "seconds", "B": "bytes"}
# rate unit -> (what one inverse figure counts, factor: figure = factor / rate)
_INVERSES = {
    "MiB/s": ("gib", 1024.0),
    "KiB/s": ("gib", 1024.0**2),
    "1/s": ("op", 1.0),
}
_RATE_SUFFIX = re.compile(r"(^|_)((mib|kib)_)?per_s$")


@dataclass(frozen=True)
class Figure:
    """One tracked figure: the sample metric it comes from and how asv stores it.

    ``factor`` set: the figure is ``factor / metric`` (a higher-is-better
    rate turned into a cost, so that up is worse in asv's graphs).
    """

    metric: str
    name: str
    unit: str
    description: str
    factor: float | None = None
    informational: bool = False

    @property
    def method(self) -> str:
        """The asv benchmark method: ``phase.write_s`` -> ``track_phase_write_s``."""
        return "track_" + re.sub(r"[^a-z0-9]+", "_", self.name.lower()).strip("_")

    @property
    def pretty(self) -> str:
        words = [self.name]
        if self.factor is not None:
            words.append(f"(inverse of {self.metric}: up is worse)")
        if self.informational:
            words.append("(informational: the work done, not a cost)")
        return " ".join(words)

    def value(self, raw: float) -> float:
        """The stored figure of one sample's ``raw`` metric; NaN where it has none."""
        if self.factor is None:
            return float(raw)
        return self.factor / raw if raw > 0 else math.nan


def figure_of(metric: Metric) -> Figure:
    """How asv tracks ``metric``: as it is, or inverted when higher is better."""
    if metric.higher_is_better and not metric.informational:
        return inverse_figure(metric)
    return Figure(
        metric=metric.name,
        name=metric.name,
        unit=ASV_UNITS.get(metric.unit, metric.unit),
        description=metric.description,
        informational=metric.informational,
    )


def inverse_figure(metric: Metric) -> Figure:
    """``mib_per_s`` -> ``s_per_gib`` (seconds per GiB = 1024 / MiB/s); ``x_per_s`` -> ``x_s_per_op``."""
    if metric.unit not in _INVERSES or not _RATE_SUFFIX.search(metric.name):
        raise ValueError(
            f"{metric.name} ({metric.unit}) is a rate this suite cannot invert: add it to _INVERSES"
        )
    per, factor = _INVERSES[metric.unit]
    stem = _RATE_SUFFIX.sub("", metric.name)
    name = f"{stem}_s_per_{per}" if stem else f"s_per_{per}"
    return Figure(
        metric=metric.name,
        name=name,
        unit="seconds",
        description=f"seconds per {'GiB' if per == 'gib' else 'operation'}: {factor:g} / {metric.name} "
        f"({metric.description})",
        factor=factor,
    )


def workload_figures(workload: str, params: Mapping[str, Any] | None = None) -> tuple[Figure, ...]:
    """Every figure a sample of ``workload`` carries, in a stable order.

    ``params`` are the spec's (fio's ``fio_target`` names the jobs' prefixes; both by default).
    """
    names = ["total_s"]
    phases, own = _declared(workload)
    names += [f"phase.{phase}_s" for phase in phases]
    names += HOST_FIGURES
    names += own
    names += [m.name for m in _module_metrics(workload)]
    if workload == "fio":
        target = str((params or {}).get("fio_target", "both")).strip().lower()
        for prefix in FIO_PREFIXES.get(target, FIO_PREFIXES["both"]):
            names += [f"fio.{prefix}{job}.{lat}" for job in FIO_JOBS for lat in FIO_LATENCIES]
    names += DEVICE_FIGURES
    return tuple(figure_of(m) for m in map(_known, dict.fromkeys(names)) if m is not None)


def _known(name: str) -> Metric | None:
    """The metric of ``name``; None where the measured commit's harness predates it
    (its devices' latencies or fio): no benchmark, rather than a suite that cannot load."""
    try:
        return metric_info(name)
    except UsageError:
        return None


def workload_keys() -> tuple[str, ...]:
    """The make_cell keywords that say what the guest does, not how the disk is made or attached:
    every workload's parameters, as the workload registry declares them."""
    from harness.workloads import registry

    return tuple(registry.params())


def _declared(workload: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The phases and own figures ``workload``'s registry entry declares; a measured commit's
    harness from before its entries declared them gives the legacy tables' (none for a workload
    this harness does not know)."""
    from harness.workloads import registry

    if workload in registry.names():
        kind = registry.kind(workload)
        if hasattr(kind, "phases"):
            return tuple(kind.phases), tuple(kind.figures)
    return LEGACY_PHASES.get(workload, ()), LEGACY_FIGURES.get(workload, ())


def _module_metrics(workload: str) -> tuple[Metric, ...]:
    """The figures a workload's module declares (bonnie's rates, mkfs's sizes)."""
    from harness.workloads import registry

    if workload not in registry.names():
        return ()
    return registry.kind(workload).metrics


# -- the machine name ---------------------------------------------------------------


def accel_of_machine(name: str) -> str | None:
    """``vm-tcg`` -> ``tcg``; None when the name carries no accelerator suffix."""
    suffix = name.rsplit("-", 1)[-1] if "-" in name else ""
    return suffix if suffix in ACCELS else None


# -- overrides from the environment ------------------------------------------------


def spec_path(environ: Mapping[str, str]) -> Path:
    """The matrix: ``$DISKBENCH_HISTORY_SPEC``, else ``sweeps/history.toml`` of this checkout."""
    value = environ.get(ENV_SPEC, "").strip()
    return Path(value).expanduser() if value else DEFAULT_SPEC


def repeat_of(spec: SweepSpec, environ: Mapping[str, str]) -> int:
    """Samples per cell: ``$DISKBENCH_HISTORY_REPEAT``, else the spec's ``repeat``."""
    value = environ.get(ENV_REPEAT, "").strip()
    if not value:
        return spec.repeat
    if not value.isdigit() or int(value) < 1:
        raise SpecError(f"{ENV_REPEAT}={value!r}: use a whole number, 1 or more")
    return int(value)


# -- the matrix as asv parameters ---------------------------------------------------


@dataclass(frozen=True)
class Group:
    """One benchmark class: a workload, and the axes its benchmarks are parameterised by."""

    workload: str
    param_names: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]

    @property
    def class_name(self) -> str:
        return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", self.workload))

    @property
    def params(self) -> list[list[str]]:
        """asv's ``params``: the labels of each axis."""
        return [[label(v) for v in axis] for axis in self.values]

    def combinations(self) -> Iterable[tuple[tuple[str, ...], dict[str, Any]]]:
        """(key, values) of every parameter combination: the key is what the benchmarks get."""
        for combo in itertools.product(*self.values):
            key = tuple(label(v) for v in combo)
            yield key, dict(zip(self.param_names, combo, strict=True))


def label(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def spec_workloads(spec: SweepSpec) -> tuple[str, ...]:
    if "workload" in spec.axes:
        return tuple(str(v).strip().lower() for v in spec.axes["workload"])
    return (str(spec.params.get("workload", DEFAULT_WORKLOAD)).strip().lower(),)


def matrix_groups(spec: SweepSpec) -> list[Group]:
    """A class per workload, parameterised by every other axis of the spec."""
    names = tuple(k for k in spec.axes if k != "workload")
    values = tuple(tuple(spec.axes[k]) for k in names)
    return [Group(w, names, values) for w in spec_workloads(spec)]


def policy_groups(spec: SweepSpec) -> list[Group]:
    """A class per workload for the policy's own cell; the workload's own axes are its params."""
    keys = workload_keys()
    names = tuple(k for k in spec.axes if k in keys)
    values = tuple(tuple(spec.axes[k]) for k in names)
    return [Group(w, names, values) for w in spec_workloads(spec)]


def matrix_cell(spec: SweepSpec, policy: Any, workload: str, values: Mapping[str, Any]) -> Cell | None:
    """The cell of one combination, as ``expand_spec`` makes it; None if excluded or impossible."""
    chosen = {**spec.params, **values, "workload": workload}
    if policy is not None:
        chosen = {**policy.defaults_for(chosen), **chosen}
    if any(ex.matches(chosen) for ex in spec.excludes):
        return None
    try:
        return make_cell(**chosen)
    except SpecError:
        return None


def policy_cell(spec: SweepSpec, policy: Any, workload: str, values: Mapping[str, Any]) -> Cell:
    """The policy's own cell for a workload: the spec gives only what the guest does."""
    keys = workload_keys()
    chosen = {k: v for k, v in spec.params.items() if k in keys}
    chosen.update(values)
    chosen["workload"] = workload
    if policy is None:
        # a commit from before policy.toml: the harness's defaults were its policy
        return make_cell(**chosen)
    cell: Cell = policy.cell(**chosen)
    return cell


# -- the linked images ----------------------------------------------------------------

#: The linked-image cells (docs/linked-images.md), one per chain: the policy's qcow2 as a fresh
#: overlay over a base whose first 32 MiB are written, fio's 4 KiB random jobs alone over them,
#: writes first, so that the first write to each cluster copies the rest of it from the base (the
#: gate's policy-overlay-fio).  The overlay takes the policy's [overlay] (cluster_size,
#: extended_l2); format and preallocation are its own, as a chain needs them.
LINKED_WORKLOAD = "fio"
LINKED_CHAINS = ("depth=1,fill=32M",)
LINKED_VALUES: Mapping[str, Any] = {
    "format": "qcow2",
    "preallocation": "off",
    "fio_jobs": "random",
    "fio_target": "raw",
    "fio_size_mib": 32,
}


def linked_groups(spec: SweepSpec) -> list[Group]:
    """The linked images' class: the fio workload, one line per chain (``backing``); none where the
    matrix has no fio cells (a small matrix stays small)."""
    if LINKED_WORKLOAD not in spec_workloads(spec):
        return []
    return [Group(LINKED_WORKLOAD, ("backing",), (LINKED_CHAINS,))]


def linked_cell(spec: SweepSpec, policy: Any, workload: str, values: Mapping[str, Any]) -> Cell | None:
    """The policy's overlay over one chain (``values["backing"]``), with the spec's workload
    parameters; None where the measured commit's harness has no backing chains (a gap)."""
    keys = workload_keys()
    chosen = {k: v for k, v in spec.params.items() if k in keys}
    chosen.update(LINKED_VALUES)
    chosen.update(values)
    chosen["workload"] = workload
    try:
        if policy is None:
            return make_cell(**chosen)
        cell: Cell = policy.cell(**chosen)
    except (SpecError, TypeError):
        return None
    return cell


# -- figures of records ---------------------------------------------------------------


def cell_figures(record: Record, figures: Sequence[Figure]) -> dict[str, float]:
    """The median of each figure over a cell's samples; all NaN if any sample failed.

    A failed cell is a gap in asv's graphs, never a number: a regression that
    makes some samples fail must not hide behind the median of the others.
    """
    samples = list(record.samples)
    failed = not samples or any(not s.ok for s in samples)
    out: dict[str, float] = {}
    for figure in figures:
        if failed:
            out[figure.name] = math.nan
            continue
        raw = [s.metrics.get(figure.metric) for s in samples]
        values = [figure.value(v) for v in raw if isinstance(v, int | float)]
        ok = len(values) == len(samples) and not any(math.isnan(v) for v in values)
        out[figure.name] = statistics.median(values) if ok else math.nan
    return out


def lookup(data: Mapping[str, Any], kind: str, workload: str, key: Sequence[Any], figure: str) -> float:
    """A figure from ``setup_cache``'s result; NaN for an excluded or failed cell."""
    cell_id = data.get(kind, {}).get(workload, {}).get(tuple(label(v) for v in key))
    if cell_id is None:
        return math.nan
    value = data.get("cells", {}).get(cell_id, {}).get(figure, math.nan)
    return float(value)


# -- the benchmark classes ---------------------------------------------------------------


def benchmark_class(group: Group, kind: str, module: str, params: Mapping[str, Any] | None = None) -> type:
    """A class of ``track_*`` benchmarks, one per figure of ``group``'s workload.

    ``kind`` is ``"matrix"``, ``"policy"`` or ``"linked"``: which cells of ``setup_cache``'s
    result the benchmarks read.  Each benchmark carries its unit and an
    explicit version, so results survive edits of the suite that do not
    change what a figure means.
    """
    attrs: dict[str, Any] = {
        "__doc__": f"{kind} cells of the {group.workload} workload",
        "__module__": module,
        "params": group.params,
        "param_names": list(group.param_names),
        "version": SUITE_VERSION,
    }
    for figure in workload_figures(group.workload, params):
        attrs[figure.method] = _tracker(kind, group.workload, figure)
    return type(group.class_name, (), attrs)


def _tracker(kind: str, workload: str, figure: Figure) -> Any:
    def track(self: Any, data: Mapping[str, Any], *params: Any) -> float:
        return lookup(data, kind, workload, params, figure.name)

    track.__name__ = figure.method
    track.__doc__ = figure.description
    track.unit = figure.unit  # type: ignore[attr-defined]
    track.pretty_name = f"{kind} {workload}: {figure.pretty}"  # type: ignore[attr-defined]
    track.version = SUITE_VERSION  # type: ignore[attr-defined]
    return track
