"""Directory locks (real flock between real processes) and the leftovers of dead runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.host.workdir import DirBusy, clean_dead_runs, hold, image_path, locked

HOLDER = """
import sys, time
from pathlib import Path
from harness.host.workdir import locked
with locked(Path(sys.argv[1]), what="results dir", flag="--results-dir"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_run_is_refused_naming_the_holder_and_the_lock_dies_with_it(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DirBusy) as caught, locked(tmp_path, what="results dir", flag="--results-dir"):
            pass
        message = str(caught.value)
        assert message.startswith(
            f"results dir {tmp_path} is in use by another diskbench run (pid {holder.pid}: "
        )
        assert "wait for it to finish or pass another --results-dir" in message
        assert caught.value.exit_code == 3
    finally:
        holder.kill()
        holder.wait()
    # the kernel dropped the lock with its holder: no stale lock
    with locked(tmp_path, what="results dir", flag="--results-dir"):
        assert (tmp_path / ".diskbench.lock").read_text().startswith(f"{os.getpid()}\n")


def test_images_and_probe_dirs_of_dead_runs_are_removed_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    work = tmp_path / "work"
    work.mkdir()
    stale = work / f"raw-off-2g.dd.{dead.pid}.raw"
    live = work / f"raw-off-2g.dd.{os.getppid()}.qcow2"
    mine = image_path(work, "raw-off-2g.dd", "qcow2")
    probe = work / ".diskbench-aio-abc"
    other = work / "notes.txt"
    for path in (stale, live, mine, other):
        path.write_bytes(b"x")
    probe.mkdir()
    with hold(tmp_path / "results", work):
        pass
    assert not stale.exists() and not probe.exists()
    assert live.exists() and mine.exists() and other.exists()
    assert clean_dead_runs(work) == [] or all(not p.is_relative_to(work) for p in clean_dead_runs(work))


def test_the_lock_file_goes_with_its_run_and_one_a_killed_run_left_is_taken_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with locked(tmp_path, what="results dir", flag="--results-dir"):
        assert (tmp_path / ".diskbench.lock").is_file()
    assert not (tmp_path / ".diskbench.lock").exists()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".diskbench.lock").write_text(f"{dead.pid}\ndiskbench run --workload dd\n")
    with (
        caplog.at_level("INFO", logger="harness"),
        locked(tmp_path, what="results dir", flag="--results-dir"),
    ):
        assert (tmp_path / ".diskbench.lock").read_text().startswith(f"{os.getpid()}\n")
    assert [r.getMessage() for r in caplog.records] == [
        f"results dir {tmp_path}: taking over the lock of a run that is no longer running "
        f"(pid {dead.pid}: diskbench run --workload dd)"
    ]
    assert not (tmp_path / ".diskbench.lock").exists()
