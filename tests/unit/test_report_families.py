"""The report's charts: one per workload and metric family, titles in words, base and head side by
side, every sample a point, and no text that covers a bar or another text."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_report_html import record_of

from harness.cli import main
from harness.compare.samplestats import Stats
from harness.errors import UsageError
from harness.record import Record, write_record
from harness.report.blocks import Chart, Table, build_report
from harness.report.charts import BarChart, bars_figure
from harness.report.command import make_report
from harness.report.series import group_series
from harness.report.sides import parse_labels
from harness.spec import make_cell

RUN_ID = "20261123T200116Z-9840"


def sample(index: int, total: float, **extra: float) -> dict[str, Any]:
    metrics = {"total_s": total, "host.create_s": 0.02, "host.write_amplification": 1.1, **extra}
    return {"index": index, "status": "ok", "metrics": metrics, "host": {}}


def default_run(run_id: str = RUN_ID, slower: float = 1.0) -> list[Record]:
    """Records as ``diskbench run --workload install,dd --format raw,qcow2`` writes them."""
    records = []
    for fmt in ("raw", "qcow2"):
        dd = make_cell(format=fmt, workload="dd", dd_mib=16, size="1G")
        install = make_cell(format=fmt, workload="install", size="1G")
        dd_samples = [
            sample(i, t * slower, mib_per_s=16 / t, **{"phase.write_s": t * 0.8, "phase.mkfs_s": t * 0.2})
            for i, t in enumerate((2.9, 3.0, 3.2))
        ]
        install_samples = [
            sample(i, t * slower, **{"phase.extract_s": t}) for i, t in enumerate((26, 27, 28))
        ]
        records.append(record_of(dd, run_id, dd_samples))
        records.append(record_of(install, run_id, install_samples))
    return [replace(record, run_id=run_id) for record in records]


def charts_of(blocks: list[Any]) -> dict[str, BarChart]:
    out = {}
    for block in blocks:
        if isinstance(block, Chart):
            assert isinstance(block.chart, BarChart)
            out[block.name] = block.chart
    return out


def test_each_workload_and_family_gets_its_own_chart_titled_in_words() -> None:
    charts = charts_of(build_report(group_series(default_run())))
    found = sorted((c.workload, c.family) for c in charts.values())
    assert found == [
        ("dd", "amplification"),
        ("dd", "create"),
        ("dd", "phases"),
        ("dd", "rate"),
        ("dd", "total"),
        ("install", "amplification"),
        ("install", "create"),
        ("install", "phases"),
        ("install", "total"),
    ]
    for chart in charts.values():
        assert RUN_ID not in chart.title and "total_s" not in chart.title
        assert re.match(r"(dd|install) \([A-Za-z ]+\): [a-z]", chart.title), chart.title
    (dd_total,) = [c for c in charts.values() if (c.workload, c.family) == ("dd", "total")]
    assert dd_total.title == "dd (a file written and flushed): total time of the workload (guest clock)"
    # install's ~27 s never shares an axis with dd's ~3 s
    assert dd_total.groups == ("qcow2", "raw") and max(s.max for s in dd_total.stats.values()) < 4
    (phases,) = [c for c in charts.values() if (c.workload, c.family) == ("dd", "phases")]
    assert phases.groups == ("write", "mkfs") and phases.series == ("qcow2", "raw")


def write(records: list[Record], directory: Path) -> Path:
    for record in records:
        write_record(directory / f"{record.cell_id}.json", record)
    return directory


def test_a_comparison_report_puts_base_and_head_side_by_side(tmp_path: Path) -> None:
    base = write(default_run("20261123T200116Z-aaaa"), tmp_path / "base")
    head_records = default_run("20261124T010000Z-bbbb", slower=1.1)
    head = write(head_records[:-1], tmp_path / "head")  # head lacks qcow2's install
    result = make_report([head], against=[base], labels=("main", "pr-7"))
    text = result.text
    assert text.startswith("diskbench report: pr-7 against main\n")
    assert "main (20261123T200116Z-aaaa): accel TCG" in text
    assert "pr-7 (20261124T010000Z-bbbb): accel TCG" in text
    line = next(li for li in text.splitlines() if li.startswith("raw ") and "+10.0%" in li)
    # the verdict beside the cell's name, before its figures
    assert line.split()[:2] == ["raw", "inconclusive"] and "3.00 s ± 5.0%" in line and "3.30 s ± 5.0%" in line
    assert "qcow2-off-cs64k-1g.writeback-threads-virtio-blk.install-full: main only" in text


def test_comparison_charts_have_one_colour_per_side() -> None:
    from harness.report.sides import Side, comparison_blocks

    base = Side("base", tuple(group_series(default_run("a"))))
    head = Side("head", tuple(group_series(default_run("b", slower=1.2))))
    blocks = comparison_blocks(base, head)
    charts = charts_of(blocks)
    assert len(charts) == 9 and all(c.series == ("base", "head") for c in charts.values())
    total = charts["dd-total"]
    assert total.groups == ("qcow2", "raw")
    assert total.stats[("qcow2", "head")].median == pytest.approx(3.6)
    assert charts["dd-phases"].groups == ("write: qcow2", "write: raw", "mkfs: qcow2", "mkfs: raw")
    (table,) = [b for b in blocks if isinstance(b, Table) and "dd" in b.caption]
    assert table.header[:4] == ("cell", "base", "head", "change")
    assert table.groups[0][:3] == (("", 1), ("total", 3), ("rate", 3))
    assert table.rows[0][3] == "+20.0%"


def test_a_cell_twice_on_one_side_is_refused(tmp_path: Path) -> None:
    base = write(default_run("one"), tmp_path / "base")
    write(default_run("two"), tmp_path / "base2")
    head = write(default_run("three"), tmp_path / "head")
    with pytest.raises(UsageError, match=r"base records hold cell .* twice .*one sweep's records per side"):
        make_report([head], against=[base, tmp_path / "base2"])


@pytest.mark.parametrize("text", ["base", "a,a", "a,", "a,b,c"])
def test_labels_are_two_different_names(text: str) -> None:
    with pytest.raises(UsageError, match="--labels"):
        parse_labels(text)


def test_bad_labels_exit_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(default_run("one"), tmp_path / "base")
    assert main(["report", str(base), "--against", str(base), "--labels", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--labels 'x'" in err


SEVEN_CELLS = tuple(f"qcow2 metadata 64k cell {i}" for i in range(7))
# a comparison's phases: ten groups; and labels too long to wrap (they stand vertical)
PHASES = tuple(f"{p}: {c}" for p in ("mkfs", "mount", "write", "umount", "fsck") for c in ("qcow2", "raw"))
IDS = tuple(f"qcow2-off-cs64k-1g.writeback-threads-virtio-blk.dd-{i}m" for i in range(6))


def crowded_chart(groups: tuple[str, ...] = SEVEN_CELLS) -> BarChart:
    return BarChart(
        title="dd (a file written and flushed): time of each phase (guest clock)",
        ylabel="time",
        unit="s",
        groups=groups,
        series=("base", "head"),
        stats={
            (g, s): Stats.of([1.0 + i % 7, 1.3 + i % 7, 1.1 + i % 7])
            for i, g in enumerate(groups)
            for s in ("base", "head")
        },
        accel="tcg",
    )


def test_every_sample_is_a_point_over_its_bar() -> None:
    from matplotlib.collections import PathCollection

    fig = bars_figure(crowded_chart())
    (ax,) = fig.axes
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in points) == 7 * 2 * 3
    ys = sorted(float(y) for c in points for _x, y in c.get_offsets())
    assert ys[:3] == [1.0, 1.0, 1.1]


@pytest.mark.parametrize(
    "chart",
    [
        crowded_chart(),
        crowded_chart(PHASES),
        crowded_chart(IDS),
        BarChart("t", "rate", "MiB/s", ("a",), ("",), {("a", ""): Stats.of([5.0])}, "kvm"),
        BarChart(
            "install (Debian packages unpacked): write amplification (host bytes per guest byte)",
            "write amplification",
            "ratio",
            ("qcow2", "raw"),
            ("base", "head"),
            {("qcow2", "base"): Stats.of([1.0, 1.01]), ("raw", "head"): Stats.of([0.9])},
            "tcg",
        ),
    ],
)
def test_no_text_covers_the_plot_or_another_text(chart: BarChart) -> None:
    from matplotlib.text import Text

    fig = bars_figure(chart)
    fig.canvas.draw()  # type: ignore[no-untyped-call]
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    (ax,) = fig.axes
    plot = ax.get_window_extent(renderer).shrunk(0.999, 0.999)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    assert any("guest clock" in label or label in ("t", chart.title) or "\n" in label for label, _ in boxes)
    page = fig.bbox
    for label, box in boxes:
        assert not box.overlaps(plot), f"{label!r} lies on the plot"
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, label
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.shrunk(0.98, 0.98).overlaps(box_b.shrunk(0.98, 0.98)), f"{a!r} collides with {b!r}"


def test_the_html_report_names_each_charts_workload_and_family(tmp_path: Path) -> None:
    base = write(default_run("one"), tmp_path / "base")
    head = write(default_run("two", slower=1.1), tmp_path / "head")
    out = tmp_path / "report" / "index.html"
    make_report([head], against=[base], html_out=out)
    html = out.read_text()
    found = re.findall(
        r'<img src="index_files/([^"]+)" alt="([^"]+)" data-workload="(\w+)" data-family="(\w+)">', html
    )
    assert len(found) == 9 == len(list((tmp_path / "report" / "index_files").glob("*.png")))
    assert (
        "dd-total.png",
        "dd (a file written and flushed): total time of the workload (guest clock)",
        "dd",
        "total",
    ) in found
    assert '<th colspan="3">total</th>' in html


def test_labels_without_a_base_say_what_to_add(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = write(default_run("one"), tmp_path / "head")
    assert main(["report", str(head), "--labels", "a,b"]) == 2
    assert "add --against BASE" in capsys.readouterr().err


def test_base_and_head_take_one_unit_side_by_side() -> None:
    from harness.report.blocks import format_stats

    base, head = Stats.of([0.021, 0.020, 0.022]), Stats.of([0.27, 0.25, 0.30])
    # a metric's one unit, whatever its size: seconds in s, bytes in MiB
    assert format_stats(base, "s", beside=head) == "0.0210 s ± 4.8%"
    assert format_stats(head, "s", beside=base) == "0.27 s ± 9.2%"
    assert format_stats(head, "s") == "0.27 s ± 9.2%"
    kib, mib = Stats.of([512 * 1024]), Stats.of([3 * 1024**2])
    assert format_stats(mib, "B", beside=kib) == "3.000 MiB (n=1)"
    assert format_stats(kib, "B", beside=mib) == "0.5000 MiB (n=1)"
