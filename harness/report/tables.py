"""Tables of records: median and spread per phase, failures visible."""

from __future__ import annotations

from collections.abc import Sequence

from harness.compare.samplestats import Stats
from harness.errors import HarnessError
from harness.record import Record
from harness.units import plural
from harness.workloads import metric_info

HOST_ROWS = (
    "host.boot_s",
    "host.overhead_s",
    "host.create_s",
    "host.guest_written_bytes",
    "host.written_bytes",
    "host.write_amplification",
    "host.write_calls",
    "host.flushes",
)


def metric_order(record: Record) -> list[str]:
    """Phases in the order the guest ran them, then totals, guest figures, host figures."""
    names: list[str] = []
    for sample in record.samples:
        for key in sample.metrics:
            if key not in names:
                names.append(key)
    phases = [n for n in names if n.startswith("phase.")]
    others = [n for n in names if not n.startswith(("phase.", "host.")) and n != "total_s"]
    host = [n for n in HOST_ROWS if n in names] + [
        n for n in names if n.startswith("host.") and n not in HOST_ROWS
    ]
    return phases + (["total_s"] if "total_s" in names else []) + others + host


def _unit(name: str) -> tuple[str, str]:
    """(label, unit) of a metric name: ``phase.mkfs_s`` -> ``("mkfs", "s")``."""
    label = name.removeprefix("phase.")
    try:
        unit = metric_info(name).unit
    except HarnessError:
        unit = ""
    if unit == "s" and label.endswith("_s"):
        label = label[:-2]
    return label, unit


def _digits(unit: str) -> int:
    return {"s": 2, "MiB/s": 1, "ratio": 3, "%": 0, "ms": 3}.get(unit, 0)


def cell_rows(record: Record) -> list[tuple[str, str]]:
    ok = record.ok
    rows = []
    for name in metric_order(record):
        values = [s.metrics[name] for s in ok if name in s.metrics]
        label, unit = _unit(name)
        rows.append((label, Stats.of(values).format(unit, digits=_digits(unit))))
    return rows


def _several_builds(records: Sequence[Record]) -> bool:
    """Whether the records ran under several QEMU builds (a QEMU axis): each line then says which."""
    from harness.record.identity import build_identity

    return len({build_identity(r) for r in records}) > 1


def render_table(records: Sequence[Record]) -> str:
    """A plain-text report: one block per cell, failures listed under it."""
    lines: list[str] = []
    several = _several_builds(records)
    for record in records:
        samples = record.samples
        ok = record.ok_samples
        vm = record.vm
        qemu = f", QEMU {record.machine.get('qemu_version', '?')}" if several else ""
        lines.append(
            f"cell {record.cell.id}  [{ok}/{len(samples)} ok, "
            f"accel {vm.get('accel', '?')}{qemu}, guest RAM {vm.get('mem_mib', '?')} MiB, {vm.get('smp', '?')} vCPU]"
        )
        rows = cell_rows(record)
        if rows:
            width = max(len(label) for label, _ in rows)
            for label, text in rows:
                lines.append(f"  {label:<{width}}  {text}")
        for sample in samples:
            if not sample.ok:
                lines.append(
                    f"  sample {sample.index}: FAILED: {'?' if sample.reason is None else sample.reason}"
                )
                lines.append(f"    console: {sample.logs.get('console', '-')}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render_summary(records: Sequence[Record], metric: str = "total_s") -> str:
    """One line per cell: the headline figure, for a sweep's overview."""
    rows = []
    several = _several_builds(records)
    for record in records:
        ok = record.ok
        values = [s.metrics[metric] for s in ok if metric in s.metrics]
        label = str(record.cell.id) + (
            f" (QEMU {record.machine.get('qemu_version', '?')})" if several else ""
        )
        rows.append((label, Stats.of(values).format("s"), f"{len(ok)}/{len(record.samples)}"))
    if not rows:
        return ""
    w0 = max(len(r[0]) for r in [*rows, ("cell", "", "")])
    w1 = max(len(r[1]) for r in [*rows, ("", metric, "")])
    out = [f"{'cell':<{w0}}  {metric:<{w1}}  ok"]
    out += [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
    return "\n".join(out) + "\n"


def time_split(records: Sequence[Record]) -> dict[str, float]:
    """Where the wall time of a run went: boot, workload, the host's overhead, failed samples."""
    split = {"wall_s": 0.0, "boot_s": 0.0, "workload_s": 0.0, "overhead_s": 0.0, "failed_s": 0.0}
    for record in records:
        for sample in record.samples:
            wall = float(sample.host.get("wall_s", 0.0))
            split["wall_s"] += wall
            metrics = sample.metrics
            if not sample.ok or not metrics:
                split["failed_s"] += wall
                continue
            split["boot_s"] += float(metrics.get("host.boot_s", 0.0))
            split["workload_s"] += float(metrics.get("total_s", 0.0))
            split["overhead_s"] += float(metrics.get("host.overhead_s", 0.0))
    return split


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def render_time_split(records: Sequence[Record]) -> str:
    """One line: ``time: 72 samples took 41.2 min: boot 8.1 min (20%), ...``."""
    split = time_split(records)
    wall = split["wall_s"]
    count = sum(len(r.samples) for r in records)
    if not wall:
        return ""
    parts = [
        f"{name} {_minutes(split[key])} ({100 * split[key] / wall:.0f}%)"
        for name, key in (
            ("boot", "boot_s"),
            ("workload", "workload_s"),
            ("overhead", "overhead_s"),
            ("failed samples", "failed_s"),
        )
        if split[key] or key != "failed_s"
    ]
    return f"time: {plural(count, 'sample')} took {_minutes(wall)}: " + ", ".join(parts) + "\n"


def render(records: Sequence[Record]) -> str:
    """What a run or sweep prints at its end: a line per cell with its workload's headline
    figures (:mod:`harness.report.summary`) and where the time went."""
    from harness.report.summary import render_summary as summary

    return summary(records) + render_time_split(records)
