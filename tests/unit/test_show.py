"""``diskbench show``: aligned tables in human units, samples, metric globs, Markdown, JSON, exit 2 on nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.record import Record, Sample, new_record, write_record
from harness.report import show
from harness.spec import make_cell
from harness.units import Style, human, human_bytes, human_seconds, wants_color

WRITTEN = [185765888, 185769984, 185761792]


def record(fmt: str = "raw", *, failed: bool = False) -> Record:
    cell = make_cell(format=fmt, workload="dd", dd_mib=16, size="256M")
    rec = new_record(
        cell=cell.as_dict(),
        machine={"accel": "tcg"},
        subject={},
        vm={"accel": "tcg", "mem_mib": 256, "smp": 1},
        run_id="r1",
    )
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
    assert human_seconds(28.66) == "28.66 s"
    assert human_seconds(439.6) == "7 min 20 s"
    assert human(12.5, "ms") == "12.5 ms"
    assert human(2500.0, "ms") == "2.50 s"
    assert human(18.0, "count") == "18"
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
    assert main(["show", str(records_dir)]) == 0
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
    assert main(["show", str(records_dir), "--format", "json", "--metric", "host.guest_written_bytes"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["cell_id"].split("-")[0] for c in doc["cells"]] == ["qcow2", "raw"]
    figures = doc["cells"][0]["metrics"]["host.guest_written_bytes"]
    assert figures["values"] == WRITTEN and figures["median"] == 185765888 and figures["unit"] == "B"
    assert list(doc["cells"][0]["metrics"]) == ["host.guest_written_bytes"]
    assert doc["cells"][0]["failed"] == [{"index": 3, "reason": "guest hung"}]


def test_markdown(records_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(records_dir), "--format", "markdown"]) == 0
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
    painted = show.render_text([rec], style=Style(True))
    assert "\033[1mcell " in painted and "\033[31m  sample 3: FAILED" in painted
