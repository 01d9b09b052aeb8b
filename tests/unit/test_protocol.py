from __future__ import annotations

from typing import Any

import pytest

from harness.errors import ProtocolError
from harness.sample.protocol import parse_ready, parse_report


def good_report(**overrides: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "event": "report",
        "workload": "dd",
        "status": "ok",
        "phases": {"mkfs": {"s": 0.5, "rc": 0}, "mount": {"s": 0.01, "rc": 0}, "write": {"s": 2.0, "rc": 0}},
        "total_s": 2.51,
        "metrics": {"bytes": 268435456, "mib_per_s": 128.0},
        "fsck_rc": 0,
        "kernel": "6.1.0-50-amd64",
        "mem_kib": 240000,
        "ncpu": 1,
        "error": None,
    }
    report.update(overrides)
    return report


def test_a_good_report_keeps_phase_order_and_figures() -> None:
    report = parse_report(good_report(), workload="dd")
    assert [p.name for p in report.phases] == ["mkfs", "mount", "write"]
    assert report.phase_seconds()["write"] == 2.0
    assert report.metrics["mib_per_s"] == 128.0
    assert report.ok


def test_fsck_errors_make_the_report_not_ok() -> None:
    assert not parse_report(good_report(fsck_rc=4), workload="dd").ok


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"workload": "install"}, "expected 'dd'"),
        ({"status": "fine"}, "status is 'fine'"),
        ({"phases": []}, "'phases' is missing"),
        ({"phases": {"write": {"s": "fast"}}}, "phase write.s is 'fast', not a number"),
        ({"phases": {"write": {"s": -1.0}}}, "not a finite figure"),
        ({"total_s": float("nan")}, "not a finite figure"),
        ({"metrics": {"bytes": True}}, "metric bytes is True"),
        ({"event": "ready"}, "where 'report' was expected"),
    ],
)
def test_garbage_is_a_protocol_error_never_a_number(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse_report(good_report(**overrides), workload="dd")


def test_ready() -> None:
    ready = parse_ready({"event": "ready", "uptime_s": 1.5, "kernel": "k", "clock": "timer_list"})
    assert ready == {"uptime_s": 1.5, "kernel": "k", "clock": "timer_list"}
    with pytest.raises(ProtocolError):
        parse_ready({"event": "report"})
