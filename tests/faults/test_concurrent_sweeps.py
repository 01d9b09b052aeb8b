"""Two real sweeps into the same dirs at once: the second is refused naming the first; nothing is lost."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from faultkit import argv_paths, descendants, kill_all, run_diskbench, start_sweep, wait_for

from harness.record import load_record

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def test_a_second_sweep_into_the_same_dirs_is_refused_and_the_first_loses_nothing(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    spec, results, directory, first = start_sweep(
        tmp_path, disk_dir, "two", {"format": ["raw", "qcow2"]}, "first.log"
    )
    procs: dict[int, str] = {}
    try:
        # the first sweep is running a guest: it holds both dirs
        wait_for(
            "QEMU of the first sweep",
            lambda: any(c.startswith("qemu-system") for c in descendants(first.pid).values()),
            300,
            first,
        )
        procs.update(descendants(first.pid))
        second = run_diskbench(*argv_paths(spec, disk_dir, results), timeout_s=120)
        print(f"concurrent sweep: exit {second.returncode} after {second.wall_s:.1f} s")
        assert second.returncode == 3, second.stderr[-2000:]
        assert f"is in use by another diskbench run (pid {first.pid}: diskbench sweep {spec}" in second.stderr
        assert "Traceback" not in second.stderr
        assert first.poll() is None, "the first sweep goes on"
        deadline = time.monotonic() + 600
        while first.poll() is None and time.monotonic() < deadline:
            procs.update(descendants(first.pid))
            time.sleep(0.2)
        assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
        first.wait()
        kill_all(procs)
    records = [load_record(p) for p in sorted(directory.glob("*.json"))]
    assert len(records) == 2
    assert all(len(r.samples) == 1 and r.samples[0].status == "ok" for r in records)
    assert "2 samples run, 0 resumed" in (tmp_path / "first.log").read_text()
