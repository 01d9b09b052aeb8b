"""What ``diskbench run`` does with its defaults: runs that compare can decide, a quick workload,
flags no chosen workload takes refused, and a plan's estimate from the samples recorded before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.cli.run import cells_from_args
from harness.record import new_record, write_record
from harness.record.model import Sample
from harness.spec import Cell


def _write(root: Path, cell: Cell, totals: list[float], *, accel: str = "tcg", extra: float = 0.0) -> Path:
    rec = new_record(
        cell=cell.as_dict(), machine={"accel": accel}, subject={}, vm={"accel": accel}, run_id="r"
    )
    for i, total in enumerate(totals):
        metrics = {"total_s": total, "host.boot_s": 0.3, "host.overhead_s": 0.7 + extra}
        rec = rec.with_sample(Sample(index=i, status="ok", metrics=metrics))
    write_record(root / f"{rec.cell_id}.json", rec)
    return root


def test_two_runs_with_the_defaults_reach_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["run"])
    assert args.workload == "dd"  # seconds a sample, not the install's minute
    cells, _ = cells_from_args(args)
    base = _write(tmp_path / "base", cells[0], [3.00 + 0.01 * i for i in range(args.repeat)])
    head = _write(tmp_path / "head", cells[0], [3.90 + 0.01 * i for i in range(args.repeat)])
    assert main(["compare", str(base), str(head)]) == 1
    out = capsys.readouterr().out
    assert "regression" in out and "too few samples" not in out


def test_a_flag_no_chosen_workload_takes_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--workload", "install", "--dd-mib", "16", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--dd-mib" in err and "--workload dd" in err
    # a flag one of the chosen workloads takes is fine, defaults given by hand too
    args = build_parser().parse_args(
        ["run", "--workload", "install,dd", "--dd-mib", "16", "--payload", "full"]
    )
    assert {c.workload.name.value for c in cells_from_args(args)[0]} == {"install", "dd"}


def _estimate_s(out: str) -> int:
    match = re.search(r"^estimate: \d+ samples, about (?:(\d+)m)?(\d+)s", out, re.M)
    assert match, out
    return int(match.group(1) or 0) * 60 + int(match.group(2))


def test_the_estimate_reads_recorded_sample_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work, results = tmp_path / "work", tmp_path / "results"
    work.mkdir()
    argv = ["run", "--workload", "install", "--repeat", "3", "--accel", "tcg", "--dry-run"]
    argv += ["--work-dir", str(work), "--results-dir", str(results)]
    assert main(argv) == 0
    prior = _estimate_s(capsys.readouterr().out)
    # three samples of this cell took 3.1 minutes on the development host, with a snapshot build
    assert 150 <= prior <= 200
    cells, _ = cells_from_args(build_parser().parse_args(argv))
    _write(results / "records" / "r1", cells[0], [20.0, 21.0, 22.0])
    _write(results / "records" / "r2", cells[0], [40.0], accel="kvm")  # another accel: not read
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1 of 1 cells timed by recorded samples" in out
    assert _estimate_s(out) == round(3 * (21.0 + 0.3 + 0.7) + 6.5)
