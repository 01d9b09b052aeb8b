"""Tables of records: median and spread per phase, failures visible."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.errors import HarnessError
from harness.stats import Stats
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


def metric_order(record: dict[str, Any]) -> list[str]:
    """Phases in the order the guest ran them, then totals, guest figures, host figures."""
    names: list[str] = []
    for sample in record["samples"]:
        for key in sample.get("metrics", {}):
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
    return {"s": 2, "MiB/s": 1, "ratio": 3, "%": 0}.get(unit, 0)


def cell_rows(record: dict[str, Any]) -> list[tuple[str, str]]:
    ok = [s for s in record["samples"] if s.get("status") == "ok"]
    rows = []
    for name in metric_order(record):
        values = [s["metrics"][name] for s in ok if name in s.get("metrics", {})]
        label, unit = _unit(name)
        rows.append((label, Stats.of(values).format(unit, digits=_digits(unit))))
    return rows


def render_table(records: Sequence[dict[str, Any]]) -> str:
    """A plain-text report: one block per cell, failures listed under it."""
    lines: list[str] = []
    for record in records:
        samples = record["samples"]
        ok = sum(1 for s in samples if s.get("status") == "ok")
        vm = record.get("vm", {})
        lines.append(
            f"cell {record['cell']['id']}  [{ok}/{len(samples)} ok, "
            f"accel {vm.get('accel', '?')}, {vm.get('mem_mib', '?')} MiB, {vm.get('smp', '?')} vCPU]"
        )
        rows = cell_rows(record)
        if rows:
            width = max(len(label) for label, _ in rows)
            for label, text in rows:
                lines.append(f"  {label:<{width}}  {text}")
        for sample in samples:
            if sample.get("status") != "ok":
                lines.append(f"  sample {sample['index']}: FAILED: {sample.get('reason', '?')}")
                lines.append(f"    console: {sample.get('logs', {}).get('console', '-')}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render_summary(records: Sequence[dict[str, Any]], metric: str = "total_s") -> str:
    """One line per cell: the headline figure, for a sweep's overview."""
    rows = []
    for record in records:
        ok = [s for s in record["samples"] if s.get("status") == "ok"]
        values = [s["metrics"][metric] for s in ok if metric in s.get("metrics", {})]
        rows.append(
            (record["cell"]["id"], Stats.of(values).format("s"), f"{len(ok)}/{len(record['samples'])}")
        )
    if not rows:
        return ""
    w0 = max(len(r[0]) for r in [*rows, ("cell", "", "")])
    w1 = max(len(r[1]) for r in [*rows, ("", metric, "")])
    out = [f"{'cell':<{w0}}  {metric:<{w1}}  ok"]
    out += [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
    return "\n".join(out) + "\n"
