"""Bad input is one line that names the input and the fix, exit 2: a gate spec's unknown key with
its file and line, a mistyped metric's nearest names said once, a file that is no record, a report
that cannot be written where it was asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import SpecError
from harness.gate import load_gate_spec
from harness.record import new_record, write_record
from harness.record.model import Sample
from harness.spec import make_cell

SPEC = """\
name = "typo"
rounds = 4

[[cells]]
name = "first"
workload = "dd"

[[cells]]
name = "second"
format = "raw"
worklaod = "dd"
"""


def test_a_gate_spec_key_mistyped_names_its_line_and_the_keys(tmp_path: Path) -> None:
    spec = tmp_path / "gate.toml"
    spec.write_text(SPEC)
    with pytest.raises(SpecError) as caught:
        load_gate_spec(spec)
    message = caught.value.message
    assert message.startswith(
        f"{spec}:11: cells[2] (second): unknown key 'worklaod' (did you mean workload?)"
    )
    assert "use one of metrics, together, format," in message and "make_cell" not in message
    spec.write_text(SPEC.replace("rounds = 4", "rounds = 4\nbugdet_min = 3"))
    with pytest.raises(
        SpecError, match=rf"^{spec}:3: unknown key 'bugdet_min' \(did you mean budget_min\?\)"
    ):
        load_gate_spec(spec)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    cell = make_cell(workload="dd", dd_mib=16, size="256M")
    rec = new_record(
        cell=cell.as_dict(), machine={"accel": "tcg"}, subject={}, vm={"accel": "tcg"}, run_id="r"
    )
    for i in range(4):
        rec = rec.with_sample(Sample(index=i, status="ok", metrics={"total_s": 3.0 + i / 100}))
    write_record(tmp_path / "run" / f"{rec.cell_id}.json", rec)
    return tmp_path / "run"


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_mistyped_metric_names_the_nearest_once(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(run_dir), str(run_dir), "--metric", "totl_s"]) == 2
    line = _one_error_line(capsys)
    assert line.count("did you mean") == 1 and "total_s" in line


def test_a_file_that_is_no_record_is_said_to_be_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "README.md"]) == 2
    line = _one_error_line(capsys)
    assert "README.md is not a diskbench record" in line and "delete" not in line


def test_a_report_is_refused_where_it_cannot_be_written(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(run_dir), "--html", "/proc/x.html"]) == 2
    assert "--html /proc/x.html: cannot write in /proc" in _one_error_line(capsys)
    missing = tmp_path / "nonexistent-dir" / "x" / "index.html"
    assert main(["report", str(run_dir), "--markdown", str(missing)]) == 2
    assert f"{tmp_path / 'nonexistent-dir'} does not exist" in _one_error_line(capsys)
    assert not (tmp_path / "nonexistent-dir").exists()
    # only the report's own directory is made
    assert main(["report", str(run_dir), "--markdown", str(tmp_path / "new" / "r.md")]) == 0
    assert (tmp_path / "new" / "r.md").is_file()
