"""Numeric flags out of range through the real command: one line, exit 2, nothing created, records intact."""

from __future__ import annotations

from pathlib import Path

import pytest
from faultkit import run_diskbench

from harness.record import new_record, write_record
from harness.spec import make_cell

pytestmark = [pytest.mark.integration]

RUN = ["run", "--workload", "dd", "--dd-mib", "16", "--repeat", "1", "--accel", "tcg"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mem-mib", "0"], "--mem-mib 0 is not allowed"),
        (["--workload-timeout-s", "nan"], "--workload-timeout-s nan is not allowed"),
        (["--smp", "9999"], "--smp 9999 is not allowed"),
        (["--size", "99999999T"], "size 99999999t is not allowed"),
    ],
)
def test_a_bad_number_creates_nothing(tmp_path: Path, flags: list[str], message: str) -> None:
    results, work = tmp_path / "results", tmp_path / "work"
    earlier = results / "records" / "earlier" / "c.json"
    record = new_record(
        cell=make_cell(workload="dd").as_dict(), machine={}, subject={}, vm={}, run_id="earlier"
    )
    write_record(earlier, record)
    before = earlier.read_bytes()
    done = run_diskbench(*RUN, *flags, "--work-dir", str(work), "--results-dir", str(results), timeout_s=120)
    print(f"numeric flag {' '.join(flags)}: exit {done.returncode} in {done.wall_s:.2f} s")
    assert done.returncode == 2
    assert done.stderr.startswith(f"diskbench: error: {message}") and done.stderr.count("\n") == 1
    assert not work.exists()
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == [
        Path("records"),
        Path("records/earlier"),
        Path("records/earlier/c.json"),
    ]
    assert earlier.read_bytes() == before


def test_a_bad_deadline_of_a_sweep_creates_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[params]\nworkload = "dd"\ndd_mib = 16\nsize = "256M"\n')
    results, work = tmp_path / "results", tmp_path / "work"
    done = run_diskbench(
        "sweep",
        str(spec),
        "--workload-timeout-s",
        "inf",
        "--work-dir",
        str(work),
        "--results-dir",
        str(results),
    )
    assert done.returncode == 2
    assert "diskbench: error: --workload-timeout-s inf is not allowed" in done.stderr
    assert not work.exists() and not results.exists()
