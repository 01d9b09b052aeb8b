"""A work dir that fills up under a running guest: the sample fails at once with the cause, the sweep stops."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from faultkit import argv_paths, descendants, fill, kill_all, popen, wait_for, wait_gone, write_spec

from harness.record import load_record

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def guest_ready(directory: Path, kept: dict[str, bytes]) -> bool:
    """Whether the guest of the cell after the kept records has sent its ready line."""
    for report in directory.glob("logs/*/sample-0/report.jsonl"):
        if f"{report.parent.parent.name}.json" not in kept and '"ready"' in report.read_text(
            errors="replace"
        ):
            return True
    return False


def test_a_full_work_dir_fails_the_sample_at_once_and_stops_the_sweep(
    guest: Any, tmp_path: Path, small_disk: Path
) -> None:
    spec = write_spec(
        tmp_path / "full.toml",
        "full",
        {"format": ["raw"], "interface": ["virtio-blk", "ide", "ahci"]},
        dd_mib=48,
    )
    results = tmp_path / "results"
    directory = results / "sweeps" / "full"
    log = tmp_path / "sweep.log"
    # the default workload deadline (1800 s) stays: the failure must not wait for it
    sweep = popen(argv_paths(spec, small_disk, results), log)
    procs: dict[int, str] = {}
    try:
        wait_for("first record", lambda: list(directory.glob("*.json")), 300, sweep)
        first = sorted(directory.glob("*.json"))
        kept = {p.name: p.read_bytes() for p in first}
        # something else takes the disk while the next cell's sample starts
        fill(small_disk)
        filled_at = time.monotonic()
        ready_at = None
        while sweep.poll() is None and time.monotonic() - filled_at < 300:
            procs.update(descendants(sweep.pid))
            if ready_at is None and guest_ready(directory, kept):
                ready_at = time.monotonic()
            time.sleep(0.05)
        exited_at = time.monotonic()
        fail_s = exited_at - filled_at
        assert sweep.poll() is not None, "the sweep did not stop within 300 s of the disk filling up"
    finally:
        if sweep.poll() is None:
            sweep.kill()
        sweep.wait()
        kill_all(procs)
    out = log.read_text()
    after_ready = f", {exited_at - ready_at:.1f} s after its guest was ready" if ready_at else ""
    print(f"full work dir: exit {sweep.returncode} {fail_s:.1f} s after the disk filled up{after_ready}")
    assert sweep.returncode == 3, out[-3000:]
    assert "No space left on device" in out, out[-3000:]
    assert "MiB free" in out and "stopping the sweep" in out, out[-3000:]
    assert "Traceback" not in out
    assert fail_s < 120, f"took {fail_s:.0f} s: the harness waited instead of noticing the paused guest"
    assert not wait_gone(procs), "a child outlived the sweep"
    for name, data in kept.items():
        assert (directory / name).read_bytes() == data, f"{name} changed"
        assert load_record(directory / name).samples[0].status == "ok"
    failed = [load_record(p) for p in directory.glob("*.json") if p.name not in kept]
    assert len(failed) == 1, "the sample in flight is recorded, and no later one ran"
    (sample,) = failed[0].samples
    assert sample.status == "error"
    assert "No space left on device" in str(sample.reason)
