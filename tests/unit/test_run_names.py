"""One way to name a run: a record, a run directory, a results directory (its newest run) or
``latest`` / ``latest~N``, alike for ``show``, ``report`` and ``compare``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.errors import UsageError
from harness.record import name_records, new_record, runs, write_record
from harness.record.model import Sample
from harness.spec import make_cell


def _run(results: Path, run_id: str, total: float, mtime: float) -> Path:
    cell = make_cell(format="raw", workload="dd", dd_mib=16, size="256M")
    rec = new_record(
        cell=cell.as_dict(), machine={"accel": "tcg"}, subject={}, vm={"accel": "tcg"}, run_id=run_id
    )
    for i in range(2):
        rec = rec.with_sample(Sample(index=i, status="ok", metrics={"total_s": total, "mib_per_s": 10.0}))
    path = results / "records" / run_id / f"{rec.cell_id}.json"
    write_record(path, rec)
    os.utime(path, (mtime, mtime))
    return path.parent


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    # named out of time order: the newest record decides, not the name
    _run(out, "20260101T000000Z-bbbb", 2.0, 1_000)
    _run(out, "20250101T000000Z-aaaa", 3.0, 2_000)
    return out


def test_a_results_directory_stands_for_its_newest_run(results: Path) -> None:
    assert [p.name for p in runs(results)] == ["20260101T000000Z-bbbb", "20250101T000000Z-aaaa"]
    named = name_records(str(results), results_dir=Path("/nonexistent"))
    assert named.path == results / "records" / "20250101T000000Z-aaaa"
    assert named.note is not None and "newest run" in named.note and "of 2" in named.note


def test_latest_and_the_runs_before_it(results: Path) -> None:
    assert name_records("latest", results_dir=results).path.name == "20250101T000000Z-aaaa"
    assert name_records("latest~1", results_dir=results).path.name == "20260101T000000Z-bbbb"
    with pytest.raises(UsageError, match=r"latest~2: .* holds 2 runs: run `diskbench run` first"):
        name_records("latest~2", results_dir=results)


def test_a_run_directory_and_a_record_are_themselves(results: Path) -> None:
    run = results / "records" / "20260101T000000Z-bbbb"
    assert name_records(str(run), results_dir=results).path == run
    record = next(run.glob("*.json"))
    assert name_records(str(record), results_dir=results).path == record


def test_show_report_and_compare_take_the_same_names(
    results: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISKBENCH_RESULTS_DIR", str(results))
    assert main(["show", str(results)]) == 0
    captured = capsys.readouterr()
    assert "3.00" in captured.out and "newest run" in captured.err
    assert main(["show", "latest~1"]) == 0
    assert "2.00" in capsys.readouterr().out
    assert main(["report", "latest"]) == 0
    assert "dd" in capsys.readouterr().out
    code = main(["compare", "latest~1", "latest"])
    captured = capsys.readouterr()
    assert code in (0, 1) and "diskbench compare:" in captured.out
    assert "latest~1: " in captured.err and "latest: " in captured.err


@pytest.mark.parametrize(
    "argv", [["show", "latest"], ["report", "latest"], ["compare", "latest~1", "latest"]]
)
def test_every_reader_takes_results_dir_and_defaults_to_the_current_directory(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.delenv("DISKBENCH_RESULTS_DIR", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # nothing here: the error names --results-dir, which the command takes
    assert main(argv) == 2
    assert main([*argv, "--results-dir", str(results)]) in (0, 1)
    # the same runs found from the directory that holds ./results, as `run` writes them there
    monkeypatch.chdir(tmp_path)
    assert main(argv) in (0, 1)
    assert build_parser().parse_args(["run"]).results_dir == tmp_path / "results"
    assert build_parser().parse_args(["run"]).work_dir == tmp_path / "work"


def test_a_run_saved_by_name_is_found_by_it_and_writes_its_own_export(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli.outputs import leave_saved_and_exported
    from harness.record import find_records

    older = results / "records" / "20260101T000000Z-bbbb"
    given = ["run", "--save", "baseline", "--output-format", "csv", "--output", str(tmp_path / "b.csv")]
    args = build_parser().parse_args([*given, "--results-dir", str(results)])
    leave_saved_and_exported(args, find_records([older]), older)
    assert (tmp_path / "b.csv").read_text().startswith("run_id,cell_id,")
    capsys.readouterr()
    # the older run, by its name, against the newest
    assert main(["show", "baseline", "--results-dir", str(results)]) == 0
    out = capsys.readouterr()
    assert "2.00" in out.out and f"baseline: {older}" in out.err
    assert main(["compare", "baseline", "latest", "--results-dir", str(results)]) in (0, 1)
    capsys.readouterr()
    for bad in (["--save", "latest"], ["--save", "../x"], ["--output-format", "csv"]):
        assert main(["run", *bad, "--dry-run", "--results-dir", str(results)]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
