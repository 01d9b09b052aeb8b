"""An image that vanishes under a running sample: that sample fails with its cause, the sweep goes on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from faultkit import descendants, guest_on_image, kill_all, start_sweep, wait_for

from harness.record import load_record

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def test_a_vanished_image_is_the_samples_failure_not_the_sweeps(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    _, _, directory, sweep = start_sweep(
        tmp_path, disk_dir, "gone", {"interface": ["virtio-blk", "ide"]}, "sweep.log"
    )
    procs: dict[int, str] = {}
    try:
        wait_for("QEMU running the first cell's image", lambda: guest_on_image(sweep.pid), 300, sweep)
        procs.update(descendants(sweep.pid))
        image = guest_on_image(sweep.pid)
        assert image is not None
        image.unlink()
        deadline = time.monotonic() + 600
        while sweep.poll() is None and time.monotonic() < deadline:
            procs.update(descendants(sweep.pid))
            time.sleep(0.2)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        sweep.wait()
        kill_all(procs)
    out = (tmp_path / "sweep.log").read_text()
    assert sweep.returncode == 3, out[-3000:]
    assert "cannot write the record" not in out and "Traceback" not in out
    records = {r.cell.get("drive")["interface"]: r for r in map(load_record, directory.glob("*.json"))}
    assert set(records) == {"virtio-blk", "ide"}, "the sweep went on to the next cell"
    (failed,) = records["virtio-blk"].samples
    assert failed.status == "error"
    reason = str(failed.reason)
    assert str(image) in reason or "No such file" in reason, reason
    assert records["ide"].samples[0].status == "ok"
    assert "1 of 2 samples failed" in out
