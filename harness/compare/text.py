"""Figures as text: signed changes, p values, values in their unit."""

from __future__ import annotations

import math


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def pct(ratio: float | None) -> str:
    """A ratio as a signed change: 1.2 -> ``"+20.0%"``."""
    if ratio is None or math.isnan(ratio):
        return "n/a"
    if math.isinf(ratio):
        return "+inf%" if ratio > 0 else "-inf%"
    return f"{(ratio - 1.0) * 100.0:+.1f}%"


def format_p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _p_is(p: float) -> str:
    """``"p=0.012"`` or ``"p<0.001"``."""
    text = format_p(p)
    return f"p{text}" if text.startswith("<") else f"p={text}"


# unit -> how :func:`format_value` writes a value in it
_FORMATS = {"s": "{:.2f} s", "MiB/s": "{:.1f} MiB/s", "ms": "{:.3g} ms", "ratio": "{:.3f}"}


def format_value(value: float | None, unit: str) -> str:
    """A median in its unit: ``12.30 s``, ``1.028``, ``1500.0 MiB/s``, ``3.15 ms``, ``240``."""
    if value is None:
        return "-"
    if unit in _FORMATS:
        return _FORMATS[unit].format(value)
    if unit == "B":
        return f"{value / 2**20:.1f} MiB" if abs(value) >= 2**20 else f"{value:.0f} B"
    return f"{value:.6g}"


def regime_words(accel: str, host_disk: object = None) -> str:
    """What a comparison's times are about, in words (the summary's first line): the accelerator
    the guests ran under and the disk under the work dir (``host_disk`` as records name it: a
    model's name and figures; None: the runner's own disk)."""
    if host_disk:
        disk = f"the work dir on host disk model {host_disk}"
        if accel == "tcg":
            return (
                f"under TCG (emulation), {disk}: times are the guest's waits on that modelled disk "
                "and QEMU's emulation together, not a real disk's"
            )
        if accel == "kvm":
            return f"under KVM, {disk}: times are about that modelled disk, not the runner's"
        return f"accelerator {accel}: unknown, {disk}: read the times with care"
    if accel == "tcg":
        return "under TCG (emulation): times are about QEMU's emulation, not the disk"
    if accel == "kvm":
        return "under KVM"
    return f"accelerator {accel}: unknown, read the times with care"
