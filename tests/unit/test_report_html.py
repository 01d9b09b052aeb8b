"""The report: series never mix accelerators, the seed stands beside ours, bonnie++'s layout, PNG charts."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.compare.samplestats import Stats
from harness.errors import UsageError
from harness.presets import load_preset
from harness.record import Record, Sample, new_record, write_record
from harness.report.blocks import Chart, Table, build_report, format_stats
from harness.report.charts import BarChart, ShapeChart, render
from harness.report.command import make_report
from harness.report.markdown import to_markdown
from harness.report.series import group_series
from harness.report.text import to_text
from harness.spec import Cell
from harness.sweep import expand_spec


def record_of(
    cell: Cell, sweep: str, samples: list[dict[str, Any]], *, accel: str = "tcg", host: str = "h"
) -> Record:
    record = new_record(
        cell=cell.as_dict(),
        machine={
            "hostname": host,
            "accel": accel,
            "qemu_version": "7.2.22",
            "qemu_img_version": "7.2.22",
            "cpu": "c",
        },
        subject={},
        vm={"accel": accel, "mem_mib": 256, "smp": 1},
        run_id=f"sweep-{sweep}",
    )
    return replace(record, samples=tuple(Sample.from_json(s) for s in samples))


def ok(metrics: dict[str, float], **host: Any) -> dict[str, Any]:
    return {"index": 0, "status": "ok", "metrics": metrics, "host": host}


BOOTH_WRITE = {
    "raw-off": [16.0, 15.0, 15.5],
    "raw-falloc": [14.0, 14.5, 15.0],
    "qcow2-off": [30.0, 31.0, 29.0],
    "qcow2-metadata": [15.0, 14.0, 14.5],
}


def booth_records(accel: str = "tcg") -> list[Record]:
    records = []
    for cell in expand_spec(load_preset("booth-2010").at_scale(0.25)).cells:
        key = f"{cell.image.format.value}-{cell.image.preallocation}"
        samples = [
            ok(
                {"phase.write_s": v, "mib_per_s": 64 / v, "host.create_s": 0.01},
                allocated_before=200704 if key == "qcow2-off" else 266240,
            )
            for v in BOOTH_WRITE[key]
        ]
        records.append(record_of(cell, "booth-2010-scale0.25", samples, accel=accel))
    return records


def test_a_preset_series_shows_the_seed_beside_ours_and_checks_its_shape() -> None:
    (series,) = group_series(booth_records())
    assert series.preset is not None and series.preset.name == "booth-2010" and series.scale == 0.25
    assert [c.values["preallocation"] for c in series.cells] == ["off", "falloc", "off", "metadata"]
    text = to_text(build_report([series]))
    assert text.startswith("diskbench report\n================\n\n!! ACCELERATOR: TCG.")
    assert "15.3 seconds (truncate --size 300M)" in text and "15.50 s ± 3.2%" in text
    line = next(li for li in text.splitlines() if li.startswith("sparse qcow2 / sparse raw, write time"))
    assert "x14.6" in line and "x1.94" in line and "holds" in line
    line = next(li for li in text.splitlines() if li.startswith("qcow2 metadata / sparse raw, write time"))
    assert "x0.948" in line and "x0.935" in line and "holds" in line
    assert "of 5 measured claims of seed 001 hold today" in text


def test_series_of_two_accelerators_are_never_one() -> None:
    series = group_series(booth_records("tcg") + booth_records("kvm"))
    assert sorted(s.accel for s in series) == ["kvm", "tcg"]
    text = to_text(build_report(series))
    assert "MIXED ACCELERATORS (KVM, TCG)" in text
    assert text.count("Booth 2010: sparse qcow2 growth") == 2


def test_kvm_only_is_said_quietly() -> None:
    text = to_text(build_report(group_series(booth_records("kvm"))))
    assert "Accelerator: KVM." in text and "!!" not in text


BONNIE_CSV_METRICS = {
    "bonnie.seq_output_block_kib_per_s": 40000.0,
    "bonnie.seq_output_block_cpu_pct": 5.0,
    "bonnie.rewrite_kib_per_s": 20000.0,
    "bonnie.rewrite_cpu_pct": 4.0,
    "bonnie.seq_input_block_kib_per_s": 90000.0,
    "bonnie.seq_input_block_cpu_pct": 7.0,
    "bonnie.random_seeks_per_s": 1234.5,
    "bonnie.random_seeks_cpu_pct": 12.0,
    "bonnie.seq_create_per_s": 300.0,
    "bonnie.seq_create_cpu_pct": 20.0,
    "bonnie.seq_delete_per_s": 600.0,
    "bonnie.seq_delete_cpu_pct": 10.0,
    "bonnie.random_create_per_s": 280.0,
    "bonnie.random_create_cpu_pct": 20.0,
    "bonnie.random_delete_per_s": 500.0,
    "bonnie.random_delete_cpu_pct": 10.0,
}


def bonnie_records() -> list[Record]:
    cells = [
        c
        for c in expand_spec(load_preset("kvm-wiki-install").at_scale(0.25)).cells
        if c.workload.name.value == "bonnie"
    ]
    records = []
    for cell in cells:
        sample = ok(BONNIE_CSV_METRICS, allocated_before=1)
        sample["too_fast"] = ["bonnie.seq_stat_per_s", "bonnie.random_stat_per_s"]
        records.append(record_of(cell, "kvm-wiki-install-scale0.25", [sample, dict(sample, index=1)]))
    return records


def test_bonnie_tables_read_like_bonnie_with_the_seeds_rows_under_ours() -> None:
    (series,) = group_series(bonnie_records())
    blocks = build_report([series])
    io, files = [b for b in blocks if isinstance(b, Table) and b.groups]
    assert [label for label, _ in io.groups[0]] == ["", "Sequential Output", "Sequential Input", "Random"]
    assert [label for label, _ in io.groups[1]] == ["", "Block", "Rewrite", "Block", "Seeks"]
    assert io.header == ("Machine", "Size", "K/sec", "%CP", "K/sec", "%CP", "K/sec", "%CP", "/sec", "%CP")
    assert io.rows[0] == (
        "qcow2 ide",
        "512M",
        "40000 ±0%",
        "5",
        "20000 ±0%",
        "4",
        "90000 ±0%",
        "7",
        "1234.5 ±0%",
        "12",
    )
    assert io.rows[1][:4] == ("seed 004: qcow2 IDE", "1472M", "36762", "3") and io.kinds[1] == "seed"
    assert io.rows[-1][0] == "seed 004: qcow2 old IDE (0.10.5)"
    assert [label for label, _ in files.groups[0]] == ["", "Sequential Create", "Random Create"]
    assert files.rows[0][1:8] == ("4", "300 ±0%", "20", "+++++", "+++", "600 ±0%", "10")
    text = to_text(blocks)
    assert re.search(r"\s-+Sequential Output-+\s+-+Sequential Input-+\s+-+Random-+\n", text)
    assert re.search(r"\nMachine +Size +K/sec +%CP +K/sec +%CP +K/sec +%CP +/sec +%CP\n", text)


def test_markdown_flattens_spanning_headers_and_marks_the_seed_rows() -> None:
    blocks = build_report(group_series(bonnie_records()))
    md = to_markdown(blocks, {b.name: f"x_files/{b.name}.png" for b in blocks if isinstance(b, Chart)})
    assert "| Machine | Size | Sequential Output Block K/sec | Sequential Output Block %CP |" in md
    assert "| *seed 004: qcow2 IDE* | *1472M* | *36762* |" in md
    assert "![bonnie++ sequential output, block (K/sec)](x_files/" in md


@pytest.mark.parametrize(
    ("values", "unit", "text"),
    [
        ([204800.0, 204800.0], "B", "0.1953 MiB ± 0.0%"),
        ([3 * 1024**3], "B", "3072 MiB (n=1)"),
        ([0.0083], "s", "0.00830 s (n=1)"),
        ([1.5, 1.7, 1.6], "s", "1.60 s ± 6.2%"),
        ([0.95], "ratio", "0.950 (n=1)"),
        ([], "s", "-"),
    ],
)
def test_figures_are_a_median_with_their_spread(values: list[float], unit: str, text: str) -> None:
    assert format_stats(Stats.of(values), unit) == text


def pixels(path: Path) -> Any:
    import matplotlib.image

    return matplotlib.image.imread(str(path))


def test_charts_are_pngs_with_something_drawn(tmp_path: Path) -> None:
    chart = BarChart(
        title="t",
        ylabel="write",
        unit="s",
        groups=("raw / off", "qcow2 / off"),
        series=("warm", "cold"),
        stats={("raw / off", "warm"): Stats.of([1, 2, 3]), ("qcow2 / off", "cold"): Stats.of([4, 5])},
        accel="tcg",
    )
    shape = ShapeChart(title="s", names=("a", "b"), seed=(14.6, 0.9), ours=(1.9, None), accel="tcg")
    for item, name in ((chart, "bars.png"), (shape, "shape.png")):
        path = render(item, tmp_path / name)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = pixels(path)
        flat = image.reshape(-1, image.shape[-1])
        assert image.shape[0] > 100 and image.shape[1] > 100
        assert len({tuple(px) for px in flat[:: max(1, len(flat) // 20000)]}) > 10, "a blank chart"


def test_report_writes_html_and_markdown_with_their_charts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweeps" / "booth-2010-scale0.25"
    for record in booth_records():
        write_record(sweep / f"{record.cell_id}.json", record)
    (sweep / "probes").mkdir()
    (sweep / "probes" / "compressed-writes.json").write_text(
        json.dumps({"probe": "compressed-writes", "supported": False})
    )
    rc = main(
        [
            "report",
            str(sweep),
            "--html",
            str(tmp_path / "out" / "r.html"),
            "--markdown",
            str(tmp_path / "out" / "r.md"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "ACCELERATOR: TCG" in out
    html = (tmp_path / "out" / "r.html").read_text()
    assert '<p class="loud">ACCELERATOR: TCG.' in html
    pngs = sorted((tmp_path / "out" / "r_files").glob("*.png"))
    assert len(pngs) == 3  # two of the preset's plots and the shape chart
    for png in pngs:
        assert f'src="r_files/{png.name}"' in html
        assert f"(r_files/{png.name})" in (tmp_path / "out" / "r.md").read_text()


def test_a_report_of_nothing_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no records in"):
        make_report([tmp_path])
    with pytest.raises(UsageError, match="does not exist"):
        make_report([tmp_path / "nope"])


def test_records_of_a_plain_run_get_a_default_table_and_chart() -> None:
    from harness.spec import make_cell

    records = [
        record_of(
            make_cell(format=fmt, workload="dd", dd_mib=16, size="256M"),
            "20261122T000000Z-ab12",
            [ok({"total_s": t})],
        )
        for fmt, t in (("raw", 5.0), ("qcow2", 6.0))
    ]
    (series,) = group_series(records)
    assert series.preset is None and series.sweep == "20261122T000000Z-ab12"
    blocks = build_report([series])
    (table,) = [b for b in blocks if isinstance(b, Table)]
    assert table.header[0] == "format" and [r[0] for r in table.rows] == ["qcow2", "raw"]
    (chart,) = [b for b in blocks if isinstance(b, Chart)]
    assert isinstance(chart.chart, BarChart) and chart.chart.groups == ("qcow2", "raw")
