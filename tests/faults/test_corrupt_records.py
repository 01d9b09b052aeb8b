"""Corrupt records through every reader of the real command: one line naming file and field, exit 2,
nothing merged; a sweep that resumes sets a corrupt record aside with a note and runs its cell again."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from faultkit import run_diskbench

from harness.record import Record, Sample, load_record, new_record, write_record
from harness.spec import make_cell

pytestmark = [pytest.mark.integration]

MACHINE = {
    "arch": "x86_64",
    "cpu": "AMD EPYC",
    "accel": "tcg",
    "qemu_version": "7.2.0",
    "work_dir_fs": "ext4",
}
SPEC = '[axes]\nformat = ["raw", "qcow2"]\n\n[params]\nworkload = "dd"\ndd_mib = 16\nsize = "256M"\n'


def good_record(fmt: str) -> Record:
    cell = make_cell(format=fmt, workload="dd", dd_mib=16, size="256M")
    record = new_record(
        cell=cell.as_dict(), machine=MACHINE, subject={}, vm={"mem_mib": 256, "smp": 1}, run_id="r"
    )
    for i in range(3):
        record = record.with_sample(Sample(index=i, status="ok", metrics={"total_s": 2.0 + i / 10}))
    return record


def damage(path: Path, case: str) -> str:
    """Damage the record at ``path``; return what the error must say about it."""
    text = path.read_text()
    record = json.loads(text)
    if case == "binary":
        path.write_bytes(b"\x00\xffPK\x03\x04" + bytes(range(256)))
        return "is not text (binary bytes at offset 1)"
    if case == "samples-oops":
        path.write_text(json.dumps({**record, "samples": "oops"}))
        return "field samples: 'oops' is not of type 'array'"
    if case == "empty-cell":
        path.write_text(json.dumps({**record, "cell": {}}))
        return "lacks 'cell.id'"
    if case == "nan":
        path.write_text(text.replace('"total_s": 2.0', '"total_s": NaN'))
        return "field samples[0].metrics.total_s is nan"
    if case == "directory":
        path.unlink()
        path.mkdir()
        return "is a directory, not a record file"
    if case == "truncated":
        path.write_text(text[: len(text) // 3])
        return "is not valid JSON (truncated?"
    raise AssertionError(case)


CASES = ("binary", "samples-oops", "empty-cell", "nan", "directory", "truncated")
# the readers a corrupt record stops; a sweep's resume sets it aside instead (see below)
COMMANDS = ("show", "merge", "compare", "report")


def argv_of(command: str, tmp_path: Path, sweep_dir: Path, other: Path) -> list[str]:
    if command == "show":
        return ["show", str(sweep_dir)]
    if command == "merge":
        return ["merge", str(other), str(sweep_dir), "--out", str(tmp_path / "merged")]
    if command == "compare":
        return ["compare", str(other), str(sweep_dir)]
    assert command == "report", command
    return ["report", str(sweep_dir)]


def sweep_argv(tmp_path: Path, *more: str) -> list[str]:
    spec = tmp_path / "c.toml"
    spec.write_text(f'name = "c"\n{SPEC}')
    return [
        "sweep",
        str(spec),
        "--accel",
        "tcg",
        "--results-dir",
        str(tmp_path / "results"),
        "--work-dir",
        str(tmp_path / "work"),
        *more,
    ]


@pytest.mark.parametrize("case", CASES)
def test_a_corrupt_record_stops_every_reader_with_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    sweep_dir = tmp_path / "results" / "sweeps" / "c"
    other = tmp_path / "other"
    for fmt in ("raw", "qcow2"):
        record = good_record(fmt)
        cell_id = record.cell_id
        write_record(sweep_dir / f"{cell_id}.json", record)
        write_record(other / f"{cell_id}.json", record)
    bad, good = sorted(sweep_dir.glob("*.json"))
    good_bytes = good.read_bytes()
    message = damage(bad, case)
    for command in COMMANDS:
        t0 = time.monotonic()
        done = run_diskbench(*argv_of(command, tmp_path, sweep_dir, other), timeout_s=120)
        print(
            f"corrupt record ({case}) via {command}: exit {done.returncode} in {time.monotonic() - t0:.2f} s"
        )
        assert done.returncode == 2, (command, done.stderr[-2000:])
        errors = [line for line in done.stderr.splitlines() if line.startswith("diskbench: error:")]
        assert len(errors) == 1 and str(bad) in errors[0] and message in errors[0], (command, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout
        assert good.read_bytes() == good_bytes and load_record(good).samples[0].status == "ok"
    assert not (tmp_path / "merged").exists() or not list((tmp_path / "merged").rglob("*.json"))
    # a dry run of the sweep names the record it would set aside, and moves nothing
    done = run_diskbench(*sweep_argv(tmp_path, "--dry-run"), timeout_s=120)
    assert done.returncode == 0, done.stderr[-2000:]
    notes = [line for line in done.stdout.splitlines() if line.startswith(f"record {bad} cannot be read")]
    assert len(notes) == 1 and message in notes[0] and "sets it aside" in notes[0], done.stdout
    assert bad.exists() and not (sweep_dir / "previous").exists()
    assert not (tmp_path / "work").exists(), "the dry run created nothing"


def test_a_sweep_that_resumes_sets_a_corrupt_record_aside_with_a_note_and_runs_its_cell(
    tmp_path: Path,
) -> None:
    sweep_dir = tmp_path / "results" / "sweeps" / "c"
    record = good_record("raw")
    cell_id = record.cell_id
    bad = sweep_dir / f"{cell_id}.json"
    write_record(bad, record)
    message = damage(bad, "truncated")
    done = run_diskbench(*sweep_argv(tmp_path, "--only", "raw-*", "--repeat", "1"), timeout_s=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    aside = list((sweep_dir / "previous" / "corrupt").glob(f"{cell_id}.*.json"))
    assert len(aside) == 1, list(sweep_dir.rglob("*"))
    why = aside[0].with_name(aside[0].name + ".why.txt").read_text()
    assert str(bad) in why and message in why
    assert f"set aside a record that cannot be read: {aside[0]}" in done.stderr
    # the cell ran again into a new record, its one sample ok
    fresh = load_record(bad)
    assert [s.status for s in fresh.samples] == ["ok"]
