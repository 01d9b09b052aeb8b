"""``diskbench show``: aligned tables in human units, samples, metric globs, Markdown, JSON, exit 2 on nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from recordkit import tcg_record

from harness.cli import main
from harness.record import Record, Sample, write_record
from harness.report import show
from harness.spec import make_cell
from harness.units import Style, human, human_bytes, human_seconds, wants_color

WRITTEN = [185765888, 185769984, 185761792]


def record(fmt: str = "raw", *, failed: bool = False) -> Record:
    cell = make_cell(format=fmt, workload="dd", dd_mib=16, size="256M")
    rec = tcg_record(cell.as_dict())
    for i in range(3):
        rec = rec.with_sample(
            Sample(
                index=i,
                status="ok",
                metrics={
                    "phase.write_s": 1.5 + i / 10,
                    "total_s": 2.0 + i / 10,
                    "host.guest_written_bytes": WRITTEN[i],
                    "host.flushes": 18,
                    "dev.write_mean_ms": 12.5 + i,
                    "dev.write_p50_ms": 0.5 + i / 100,
                    "mib_per_s": 40.0 + i,
                },
            )
        )
    if failed:
        rec = rec.with_sample(Sample(index=3, status="error", reason="guest hung", logs={}))
    return rec


@pytest.fixture
def records_dir(tmp_path: Path) -> Path:
    out = tmp_path / "records"
    for fmt in ("raw", "qcow2"):
        rec = record(fmt, failed=fmt == "qcow2")
        write_record(out / f"{rec.cell_id}.json", rec)
    return out


def test_human_units() -> None:
    assert human_bytes(185765888) == "177.2 MiB"
    assert human_bytes(3 * 2**30) == "3.0 GiB"
    assert human_bytes(2048) == "2.0 KiB"
    assert human_bytes(512) == "512 B"
    assert human_seconds(0.0123) == "12.3 ms"
    assert human_seconds(28.66) == "28.7 s"
    assert human_seconds(1.1) == "1.10 s"  # the same significant digits as 1.23 s beside it
    assert human_seconds(439.6) == "7 min 20 s"
    assert human(12.5, "ms") == "12.5 ms"
    assert human(2500.0, "ms") == "2500 ms"  # a metric in ms stays in ms, however large
    assert human(0.045, "ms") == "0.0450 ms"  # or small: never µs
    assert human(18.0, "count") == "18"
    assert human(42140.5, "count") == "42140" and human(40366.0, "count") == "40366"  # no 4.214e+04
    assert human(0.8, "ratio") == "0.800"
    assert human(None, "s") == "-"


def test_colour_only_on_a_terminal_without_no_color() -> None:
    assert wants_color(isatty=True, environ={})
    assert not wants_color(isatty=False, environ={})
    assert not wants_color(isatty=True, environ={"NO_COLOR": "1"})
    assert not wants_color(isatty=True, environ={"TERM": "dumb"})
    assert Style(True)("x", "red") == "\033[31mx\033[0m"
    assert Style(False)("x", "red") == "x"


def test_text_is_an_aligned_table_in_human_units(
    records_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(records_dir), "--all"]) == 0
    out = capsys.readouterr().out
    assert "\033[" not in out  # captured: no terminal, no colour
    assert "177.2 MiB" in out and "185765888" not in out
    assert "2.10 s ± 4.8%" in out  # total_s: median ± coefficient of variation
    assert "13.5 ms" in out  # dev.write_mean_ms in its unit
    assert "sample 3: FAILED: guest hung" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.strip().startswith("metric"))
    total = next(line for line in lines if line.startswith("  total_s"))
    # aligned: the n column ends at the same place in the header and the rows
    assert header.rstrip().endswith(" n") and len(total) == len(header.rstrip())
    assert "|" not in out and "&lt;" not in out


def test_samples_and_metric_globs(records_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(records_dir), "--samples", "--metric", "total_s,host.*"]) == 0
    out = capsys.readouterr().out
    assert "phase.write_s" not in out and "dev.write_mean_ms" not in out
    assert "host.guest_written_bytes" in out and "host.flushes" in out
    totals = [line for line in out.splitlines() if line.startswith("  total_s")]
    for value in ("2.00 s", "2.10 s", "2.20 s"):
        assert all(value in line for line in totals)
    # qcow2's cell comes first (sorted by file name); its fourth sample failed
    assert totals[0].endswith("failed") and not totals[1].endswith("failed")


def test_a_glob_matching_nothing_is_bad_input(records_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(records_dir), "--metric", "nope*"]) == 2
    err = capsys.readouterr().err
    assert "--metric 'nope*' matches no metric of these records" in err
    assert len(err.strip().splitlines()) == 1


def test_json_keeps_the_raw_values(records_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["show", str(records_dir), "--output-format", "json", "--metric", "host.guest_written_bytes"])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert [c["cell_id"].split("-")[0] for c in doc["cells"]] == ["qcow2", "raw"]
    figures = doc["cells"][0]["metrics"]["host.guest_written_bytes"]
    assert figures["values"] == WRITTEN and figures["median"] == 185765888 and figures["unit"] == "B"
    assert list(doc["cells"][0]["metrics"]) == ["host.guest_written_bytes"]
    assert doc["cells"][0]["failed"] == [{"index": 3, "reason": "guest hung"}]


def test_markdown(records_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(records_dir), "--output-format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "| metric | median ± spread | min | max | n |" in out
    assert "| host.guest_written_bytes | 177.2 MiB ± 0.0% |" in out


def test_an_empty_directory_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["show", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "no records found" in err and len(err.strip().splitlines()) == 1


def test_render_text_paints_only_when_asked() -> None:
    rec = record(failed=True)
    assert "\033[" not in show.render_text([rec])
    painted = show.render_text([rec], style=Style(True), every=True)
    assert f"\033[1m{rec.cell_id}  3/4 ok" in painted and "\033[31m  sample 3: FAILED" in painted
    summary = show.render_text([rec], style=Style(True))
    assert "\033[1mdd: 1 cell" in summary and "sample 3: FAILED: guest hung\033[0m" in summary


def test_the_summary_is_a_line_per_cell_with_its_workloads_figures(
    records_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(records_dir)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("dd: 2 cells (")  # the parts of the ids both cells share
    header, units = lines[1].split(), lines[2].split()
    assert header == ["cell", "n", "write", "±", "total", "dev", "p50"]  # no p99 in these records
    assert units == ["ok/all", "MiB/s", "%", "s", "ms"]  # a column's unit once, in its header
    rows = {line.split()[0]: line.split() for line in lines[3:5]}
    assert set(rows) == {"raw", "qcow2-cs64k"}  # short names: what tells the cells apart
    assert rows["qcow2-cs64k"][1] == "3/4" and rows["raw"][1] == "3/3"
    # the total: median 2.10 s, three significant digits in seconds, in the column of "s"
    assert rows["raw"][2:6] == ["41.0", "2.4", "2.10", "0.510"]
    assert "FAILED" in out and "guest hung" in out
    assert "host.flushes" not in out  # every metric only with --all
    assert all(len(line) <= 100 for line in lines)


def test_all_prints_every_metric_and_the_legend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = record()
    rec = replace(
        rec,
        samples=tuple(
            replace(s, metrics={**s.metrics, "host.write_amplification": 0.8, "dev.write_p50_ms": 0.045})
            for s in rec.samples
        ),
    )
    write_record(tmp_path / "r.json", rec)
    assert main(["show", str(tmp_path), "--all"]) == 0
    out = capsys.readouterr().out
    for name in [*rec.samples[0].metrics]:
        assert f"  {name} " in out
    assert "0.0450 ms" in out  # dev.*_ms in ms
    legend = [line for line in out.splitlines() if line.startswith("write amplification")]
    assert len(legend) == 1 and "under 1" in legend[0] and len(legend[0]) <= 100


def test_format_is_refused_with_the_flag_to_use(
    records_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["show", str(records_dir), "--format", "json"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert not captured.out and "--format json: --format is the image format" in captured.err
    assert main(["show", str(records_dir), "--output-format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "diskbench-show"
