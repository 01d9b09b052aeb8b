"""The KVM check's outputs as text, and what it reads of the machine and the gate (pure)."""

from __future__ import annotations

from typing import Any


def meminfo_mib(text: str) -> dict[str, int]:
    """``MemTotal`` and ``MemAvailable`` of ``/proc/meminfo`` in MiB (pure)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable") and rest.split():
            out[key] = int(rest.split()[0]) // 1024
    return out


def cpu_model(text: str) -> str | None:
    """The first ``model name`` of ``/proc/cpuinfo`` (pure)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return None


def cpu_flag(text: str, flag: str) -> bool:
    """Whether the first CPU of ``/proc/cpuinfo`` has ``flag`` among its ``flags`` (pure)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return flag in value.split()
    return False


def kvm_modules(text: str) -> list[str]:
    """The loaded modules of ``/proc/modules`` whose name starts with ``kvm`` (pure)."""
    return sorted(line.split()[0] for line in text.splitlines() if line.startswith("kvm"))


def os_name(text: str) -> str | None:
    """``PRETTY_NAME`` of ``/etc/os-release`` (pure)."""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.partition("=")[2].strip().strip('"')
    return None


def gate_summary(document: dict[str, Any]) -> dict[str, Any]:
    """comparison.json in brief: the verdict, the cells' verdicts and rounds, the budget used."""
    budget = document.get("budget") or {}
    return {
        "verdict": document.get("verdict"),
        "accel": document.get("accel"),
        "counts": (document.get("summary") or {}).get("counts"),
        "budget": {k: budget.get(k) for k in ("budget_min", "used_min", "rounds", "max_rounds", "stopped")},
        "cells": [
            {
                "cell": c.get("title") or c.get("cell_id"),
                "verdict": c.get("verdict"),
                "rounds": c.get("rounds"),
                "base_ok": c.get("base_ok"),
                "head_ok": c.get("head_ok"),
                "reason": c.get("reason"),
            }
            for c in document.get("cells", [])
        ],
    }


def _boot_line(boot: dict[str, Any] | None, accel: str) -> str:
    if not boot:
        return f"{accel}: not tried"
    if boot.get("boots"):
        return f"{accel}: a guest boots, ready in {boot['seconds']:.1f} s"
    return f"{accel}: no guest boots: {boot.get('error')}"


def render_text(doc: dict[str, Any]) -> str:
    """The check's document as lines a person reads (pure)."""
    m = doc.get("machine") or {}
    kvm_dev = m.get("kvm") or {}
    lines = [
        f"diskbench kvm-check{' --quick' if doc.get('quick') else ''}: {doc.get('started_at')}, "
        f"{doc.get('elapsed_s')} s of {doc.get('deadline_s'):.0f}",
        f"machine: {m.get('cpus')} CPUs ({m.get('cpus_usable')} usable, {m.get('crossed_slots')} crossed pair "
        f"slots), {m.get('cpu_model')}; memory {m.get('mem_total_mib')} MiB "
        f"({m.get('mem_available_mib')} available)"
        + ("; itself a virtual machine (its CPUs say 'hypervisor')" if m.get("virtualized") else ""),
        f"system: {m.get('os') or 'no /etc/os-release'}, kernel {m.get('kernel')}; {m.get('python')}",
        f"qemu: {m.get('qemu_version')} ({m.get('qemu')})",
        f"/dev/kvm: {'present' if kvm_dev.get('exists') else 'absent'}"
        + (f", mode {kvm_dev.get('mode')}, gid {kvm_dev.get('gid')}" if kvm_dev.get("exists") else "")
        + f"; modules: {', '.join(kvm_dev.get('modules') or []) or 'none'}",
    ]
    lines += [f"prepared: {p}" for p in doc.get("prepared") or []]
    lines.append(_boot_line(doc.get("tcg"), "tcg"))
    lines.append(_boot_line(doc.get("kvm"), "kvm"))
    if (doc.get("kvm") or {}).get("advice"):
        lines.append(f"  what to do: {doc['kvm']['advice']}")
    lines.append(f"accel for the gate: {doc.get('accel') or 'none: no guest boots'}")
    for s in doc.get("samples") or []:
        if not s:
            continue
        figures = ", ".join(f"{k} {v}" for k, v in (s.get("metrics") or {}).items())
        lines.append(
            f"sample {s.get('workload')} under {s.get('accel')}: {s.get('status')}"
            + (f": {figures}" if figures else "")
            + (f" ({s['error']})" if s.get("error") else "")
        )
    gate = doc.get("gate")
    if gate:
        lines.append(
            f"A/A gate ({gate.get('spec')}, {gate.get('spec_cells')} cells, {gate.get('accel')}, "
            f"guest_pairs_at_once = {gate.get('guest_pairs_at_once')!s}: {gate.get('pairs_at_once')} pairs at "
            f"once on {len(gate.get('crossed_slots') or [])} CPU pair slots): verdict {gate.get('verdict')}, "
            f"exit {gate.get('exit_code')}, {gate.get('seconds')} s"
        )
        budget = gate.get("budget") or {}
        if budget:
            lines.append(
                f"  budget {budget.get('budget_min')} min, used {budget.get('used_min')} min, "
                f"rounds {budget.get('rounds')}; stopped: {budget.get('stopped')}"
            )
        for c in gate.get("cells") or []:
            lines.append(f"  {c.get('cell')}: {c.get('verdict')} after {c.get('rounds')} rounds")
        if gate.get("error"):
            lines.append(f"  error: {gate['error']}")
    preset = doc.get("preset")
    if preset:
        lines.append(
            f"preset booth-2010 at scale {preset.get('scale')} under {preset.get('accel')}: {preset.get('seconds')} s"
        )
        for c in preset.get("cells") or []:
            figures = ", ".join(f"{k} {v}" for k, v in (c.get("metrics") or {}).items())
            lines.append(f"  {c.get('cell')}: {c.get('status')}: {figures}")
        if preset.get("error"):
            lines.append(f"  error: {preset['error']}")
    for s in doc.get("steps") or []:
        if s.get("error"):
            lines.append(f"step {s['step']} failed: {s['error']}")
    lines.append(f"check: {'ok' if doc.get('ok') else 'FAILED'}")
    return "\n".join(lines) + "\n"
