"""The guest's report, validated.  Pure: no I/O.

The guest writes one JSON object per line on the virtio-serial port
``org.diskbench.report``: first ``{"event": "ready", ...}``, at the end one
``{"event": "report", ...}`` with per-phase durations from its monotonic
clock, the workload's own figures (``metrics``) and the raw text of the tools
the host parses (``outputs``: bonnie++'s CSV line, mke2fs's output; see
:mod:`harness.workloads`).  Anything else, or a report with missing or
ill-typed fields, is a :class:`ProtocolError`: a failed sample, never a number.

The guest's ``metrics`` are its own word and live in a namespace of their own:
plain names (``bytes``, ``mib_per_s``).  A name the host writes itself
(``total_s``, and every dotted name: ``host.*``, ``dev.*``, ``phase.*``,
``fio.*``...) is refused, so a guest can never shadow a figure of the host's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from harness.errors import ProtocolError


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    rc: int


@dataclass(frozen=True)
class GuestReport:
    workload: str
    status: str
    phases: tuple[Phase, ...]
    total_s: float
    metrics: dict[str, float]
    fsck_rc: int | None
    kernel: str
    mem_kib: int | None
    ncpu: int | None
    error: str | None
    clock: str | None
    raw: dict[str, Any]
    # raw tool output by name, parsed on the host by harness.workloads.parse_outputs
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and (self.fsck_rc in (None, 0))

    def phase_seconds(self) -> dict[str, float]:
        return {p.name: p.seconds for p in self.phases}


# the names a guest may give its own figures: no dot, so no namespace of the host's
GUEST_METRIC_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
# undotted names the host writes into a sample's metrics itself
HOST_METRIC_NAMES = frozenset({"total_s"})


def check_guest_metric_name(name: str) -> str:
    """``name`` if a guest may report a figure by it, else :class:`ProtocolError`."""
    if not GUEST_METRIC_NAME.fullmatch(name) or name in HOST_METRIC_NAMES:
        raise ProtocolError(
            f"guest report: metric {name[:80]!r} is not a name of the guest's own: a guest's figures are "
            "plain names (bytes, mib_per_s); total_s and dotted names (host.*, dev.*, phase.*, fio.*) "
            "are the host's"
        )
    return name


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(f"guest report: {what} is {value!r}, not a number")
    if not math.isfinite(value) or value < 0:
        raise ProtocolError(f"guest report: {what} is {value!r}, not a finite figure >= 0")
    return float(value)


def _int_or_none(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"guest report: {what} is {value!r}, not an integer")
    return value


def parse_ready(event: dict[str, Any]) -> dict[str, Any]:
    if event.get("event") != "ready":
        raise ProtocolError(f"guest sent {event.get('event')!r} where 'ready' was expected")
    return {
        "uptime_s": _number(event.get("uptime_s", 0.0), "ready.uptime_s"),
        "kernel": str(event.get("kernel", "")),
        "clock": str(event.get("clock", "")),
    }


def parse_report(event: dict[str, Any], *, workload: str) -> GuestReport:
    """Validate the final report of ``workload``; raise ProtocolError if unusable."""
    if event.get("event") != "report":
        raise ProtocolError(f"guest sent {event.get('event')!r} where 'report' was expected")
    if event.get("workload") != workload:
        raise ProtocolError(f"guest reported workload {event.get('workload')!r}, expected {workload!r}")
    status = event.get("status")
    if status not in ("ok", "error"):
        raise ProtocolError(f"guest report: status is {status!r}, not 'ok' or 'error'")
    phases_raw = event.get("phases")
    if not isinstance(phases_raw, dict):
        raise ProtocolError("guest report: 'phases' is missing or not an object")
    phases = []
    for name, body in phases_raw.items():
        if not isinstance(body, dict):
            raise ProtocolError(f"guest report: phase {name!r} is not an object")
        phases.append(
            Phase(
                name=str(name),
                seconds=_number(body.get("s"), f"phase {name}.s"),
                rc=_int_or_none(body.get("rc", 0), f"phase {name}.rc") or 0,
            )
        )
    if status == "ok" and not phases:
        raise ProtocolError("guest report: status ok but no phases")
    metrics_raw = event.get("metrics") or {}
    if not isinstance(metrics_raw, dict):
        raise ProtocolError("guest report: 'metrics' is not an object")
    metrics = {
        check_guest_metric_name(str(k)): _number(v, f"metric {k}")
        for k, v in metrics_raw.items()
        if v is not None
    }
    outputs_raw = event.get("outputs")
    if outputs_raw is None:  # a guest from before outputs existed
        outputs_raw = {}
    if not isinstance(outputs_raw, dict):
        raise ProtocolError("guest report: 'outputs' is not an object")
    outputs: dict[str, str] = {}
    for key, text in outputs_raw.items():
        if not isinstance(text, str):
            raise ProtocolError(f"guest report: output {key!r} is {text!r}, not a string")
        outputs[str(key)] = text
    error = event.get("error")
    return GuestReport(
        workload=workload,
        status=str(status),
        phases=tuple(phases),
        total_s=_number(event.get("total_s", sum(p.seconds for p in phases)), "total_s"),
        metrics=metrics,
        fsck_rc=_int_or_none(event.get("fsck_rc"), "fsck_rc"),
        kernel=str(event.get("kernel", "")),
        mem_kib=_int_or_none(event.get("mem_kib"), "mem_kib"),
        ncpu=_int_or_none(event.get("ncpu"), "ncpu"),
        error=None if error is None else str(error),
        clock=None if event.get("clock") is None else str(event.get("clock")),
        raw=event,
        outputs=outputs,
    )
