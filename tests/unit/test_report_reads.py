"""The report reads right: its text within 120 columns (a wide table goes on in a second one
that repeats the cell), a run titled as a run, the run's table with dd's write rate, latency
percentiles on a log axis and named as QEMU's histogram."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from test_report_families import default_run, write

from harness.record import Record
from harness.report.blocks import Chart, Table, build_report
from harness.report.charts import BarChart, bars_figure
from harness.report.command import make_report
from harness.report.series import group_series
from harness.report.text import to_text

LATENCY = {
    "dev.write_p50_ms": 0.45,
    "dev.write_p90_ms": 6.0,
    "dev.write_p99_ms": 115.0,
    "host.workload_s": 3.0,
}


def real_run(run_id: str = "20261123T200116Z-9840", slower: float = 1.0) -> list[Record]:
    """``default_run``'s records with the figures a real run carries besides."""
    return [
        replace(r, samples=tuple(replace(s, metrics={**s.metrics, **LATENCY}) for s in r.samples))
        for r in default_run(run_id, slower)
    ]


def test_the_text_report_fits_120_columns_and_keeps_every_figure(tmp_path: Path) -> None:
    (series,) = group_series(real_run())
    single = to_text(build_report([series]))
    base = write(real_run("20261123T200116Z-aaaa"), tmp_path / "base")
    head = write(real_run("20261124T010000Z-bbbb", slower=1.3), tmp_path / "head")
    compared = make_report([head], against=[base]).text
    for text in (single, compared):
        widest = max(text.splitlines(), key=len)
        assert len(widest) <= 120, widest
    # the banner is wrapped, not cut
    assert "never compare these numbers with KVM numbers or with the seeds' absolute figures." in " ".join(
        single.split()
    )
    # the comparison's table went on in a second one: every metric's header is there, each part
    # starts with the cell and its verdict
    for label in ("total", "rate", "write amplification", "create"):
        assert f"-{label}-" in compared
    parts = [line for line in compared.splitlines() if line.startswith("cell ")]
    assert len(parts) >= 4 and all(line.split()[:2] == ["cell", "verdict"] for line in parts)


def test_a_run_is_titled_as_a_run_and_its_table_has_dds_write_rate() -> None:
    (series,) = group_series(real_run())
    blocks = build_report([series])
    text = to_text(blocks)
    assert "\nrun 20261123T200116Z-9840\n" in text and "sweep 2026" not in text
    (table,) = [b for b in blocks if isinstance(b, Table)]
    assert "rate" in table.header
    at = table.header.index("rate")
    dd = [row for row in table.rows if "dd" in row]
    assert dd and all(row[at].endswith(("MiB/s ± 5.0%", "MiB/s ± 4.9%")) for row in dd), dd


def test_latency_percentiles_are_drawn_on_a_log_axis_and_named_as_qemus_histogram() -> None:
    (series,) = group_series(real_run())
    charts = [
        b.chart for b in build_report([series]) if isinstance(b, Chart) and isinstance(b.chart, BarChart)
    ]
    latency = [c for c in charts if c.family == "latency"]
    assert latency and all(c.log for c in latency)
    for chart in latency:
        assert "guest histogram" not in chart.title and "QEMU's histogram, host side" in chart.title
        (axis,) = bars_figure(chart).axes
        # the p50 of 0.45 ms is seen beside the p99 of 115 ms
        assert axis.get_yscale() == "log"
        low, high = axis.get_ylim()
        assert low < 0.45 < 115 < high
