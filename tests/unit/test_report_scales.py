"""The report's charts on their own scales: each phase a panel, times in the unit their values read
best in, the device's latency percentiles drawn from the records' histograms."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from test_report_families import default_run, write

from harness.compare.samplestats import Stats
from harness.report.charts import BarChart, bars_figure, chart_unit, panel_of, time_unit
from harness.report.command import make_report
from harness.report.families import family_charts, one_side_rows
from harness.report.series import group_series


@pytest.mark.parametrize(
    ("values", "unit", "expected"),
    [
        ([0.017, 0.02], "s", ("ms", 0.001)),
        ([0.4, 2.3], "s", ("s", 1.0)),
        ([0.0004], "s", ("µs", 1e-6)),
        ([48.0, 2.0], "ms", ("ms", 1.0)),
        ([0.05], "ms", ("µs", 0.001)),
        ([1500.0], "ms", ("s", 1000.0)),
    ],
)
def test_a_time_takes_the_unit_its_largest_value_reads_in(
    values: list[float], unit: str, expected: tuple[str, float]
) -> None:
    name, divisor = time_unit(values, unit)
    assert (name, pytest.approx(divisor)) == expected


def test_the_create_chart_of_millisecond_values_is_in_milliseconds() -> None:
    chart = BarChart("c", "create", "s", ("raw",), ("",), {("raw", ""): Stats.of([0.017, 0.021])}, "tcg")
    assert chart_unit(chart) == ("ms", 0.001)
    (ax,) = bars_figure(chart).axes
    assert ax.get_ylabel() == "create [ms]"
    assert ax.get_ylim()[1] == pytest.approx(21 * 1.08)


def phase_chart() -> BarChart:
    series = group_series(default_run(), [])
    rows = one_side_rows([c for s in series for c in s.cells])
    (chart,) = [c for c in family_charts("dd", rows["dd"], [""], "tcg") if c.family == "phases"]
    return chart


def test_each_phase_is_a_panel_on_its_own_scale() -> None:
    chart = phase_chart()
    assert chart.panels == ("write", "mkfs")
    fig = bars_figure(chart)
    titles = [ax.get_title() for ax in fig.axes if ax.axison]
    # the write (~2.4 s) in seconds, mkfs (~0.6 s) in milliseconds: neither flattened by the other
    assert titles == ["write [s]", "mkfs [ms]"]
    tops = [ax.get_ylim()[1] for ax in fig.axes if ax.axison]
    assert tops[0] == pytest.approx(3.2 * 0.8 * 1.08)
    assert tops[1] == pytest.approx(3.2 * 0.2 * 1000 * 1.08)
    mkfs = panel_of(chart, "mkfs")
    assert mkfs.groups == ("",) and set(mkfs.series) == {"raw", "qcow2"}


def test_no_text_of_the_panels_covers_a_plot_or_another_text() -> None:
    from matplotlib.text import Text

    fig = bars_figure(phase_chart())
    fig.canvas.draw()  # type: ignore[no-untyped-call]
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    plots = [ax.get_window_extent(renderer).shrunk(0.999, 0.999) for ax in fig.axes if ax.axison]
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    for label, box in boxes:
        assert not any(box.overlaps(p) for p in plots), f"{label!r} lies on a plot"
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.shrunk(0.98, 0.98).overlaps(box_b.shrunk(0.98, 0.98)), f"{a!r} collides with {b!r}"


def test_latency_percentiles_are_drawn_per_operation(tmp_path: Path) -> None:
    from dataclasses import replace

    records = default_run()
    latency = {"dev.write_p50_ms": 0.4, "dev.write_p99_ms": 48.0, "dev.flush_p50_ms": 2.0}
    records = [
        replace(r, samples=tuple(replace(s, metrics={**s.metrics, **latency}) for s in r.samples))
        for r in records
    ]
    rows = one_side_rows([c for s in group_series(records, []) for c in s.cells])
    (chart,) = [c for c in family_charts("dd", rows["dd"], [""], "tcg") if c.family == "latency"]
    assert chart.panels == ("write", "flush")
    assert chart.groups == ("write: p50", "write: p99", "flush: p50")
    assert chart_unit(panel_of(chart, "write")) == ("ms", 1.0)
    assert "latency percentiles" in chart.title
    out = tmp_path / "r" / "index.html"
    make_report([write(records, tmp_path / "rec")], html_out=out)
    assert 'data-family="latency"' in out.read_text()


def test_the_machines_are_said_plainly_and_wide_tables_scroll_in_their_own_box(tmp_path: Path) -> None:
    from harness.report.blocks import Para
    from harness.report.sides import Side, comparison_blocks

    base = Side("base", tuple(group_series(default_run("one"), [])))
    head = Side("head", tuple(group_series(default_run("two"), [])))
    paras = [b for b in comparison_blocks(base, head) if isinstance(b, Para)]
    # the accelerator is the one alarm; the two sides' machines are the same, so said plainly
    assert [p.kind for p in paras if p.kind == "loud"] == ["loud"]
    assert [p.text.split(" ")[0] for p in paras if p.kind == "machine"] == ["base", "head"]
    out = tmp_path / "r" / "index.html"
    make_report(
        [write(default_run("two"), tmp_path / "h")],
        against=[write(default_run("one"), tmp_path / "b")],
        html_out=out,
    )
    html = out.read_text()
    assert html.count('<div class="table"><table>') == html.count("<table>") == 2
    assert ".table { max-width: 100%; overflow-x: auto; }" in html
    assert html.count('<p class="machine">') == 2 and html.count('<p class="loud">') == 1


def many(run_id: str, slower: float) -> list[Any]:
    """``default_run`` with eight samples a cell, enough for ``compare`` to decide."""
    from dataclasses import replace

    out = []
    for record in default_run(run_id, slower):
        samples = [
            replace(s, index=k, metrics={n: v * (1 + 0.01 * k) for n, v in s.metrics.items()})
            for k, s in enumerate([*record.samples, *record.samples, *record.samples[:2]])
        ]
        out.append(replace(record, samples=tuple(samples)))
    return out


def test_against_marks_the_verdicts_compare_gives(tmp_path: Path) -> None:
    from harness.compare import Settings, compare_records
    from harness.report.blocks import Chart, Table
    from harness.report.command import verdicts_of
    from harness.report.sides import Side, comparison_blocks

    base, head = many("one", 1.0), many("two", 1.5)
    decided = {c.cell_id: str(c.verdict) for c in compare_records(base, head, settings=Settings())}
    assert set(decided.values()) == {"regression"}
    verdicts = verdicts_of(base, head)
    blocks = comparison_blocks(
        Side("base", tuple(group_series(base, []))), Side("head", tuple(group_series(head, []))), verdicts
    )
    tables = [b for b in blocks if isinstance(b, Table)]
    # the verdict beside the cell's name: the first thing a row says
    assert all(t.header[1] == "verdict" and {r[1] for r in t.rows} == {"regression"} for t in tables)
    charts = {b.name: b.chart for b in blocks if isinstance(b, Chart) and isinstance(b.chart, BarChart)}
    # total_s is what compare gates by default: its charts are marked, and no other
    assert charts["dd-total"].marks == {"raw": "regression", "qcow2": "regression"}
    assert charts["install-total"].marks == {"raw": "regression", "qcow2": "regression"}
    assert not any(c.marks for name, c in charts.items() if not name.endswith("-total"))
    (ax,) = bars_figure(charts["dd-total"]).axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["qcow2\n✗ regression", "raw\n✗ regression"]
    out = tmp_path / "r" / "index.html"
    make_report([write(head, tmp_path / "h")], against=[write(base, tmp_path / "b")], html_out=out)
    assert "<th>verdict</th>" in out.read_text()


def test_without_against_there_is_no_verdict() -> None:
    from harness.report.blocks import Table
    from harness.report.sides import Side, comparison_blocks

    blocks = comparison_blocks(
        Side("base", tuple(group_series(default_run("one"), []))),
        Side("head", tuple(group_series(default_run("two"), []))),
    )
    assert not any("verdict" in b.header for b in blocks if isinstance(b, Table))
