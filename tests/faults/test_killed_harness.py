"""A harness killed by SIGKILL while qemu-img creates an image: qemu-img dies with it; records stay intact."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from faultkit import (
    alive,
    argv_paths,
    descendants,
    guest_on_image,
    kill_all,
    popen,
    start_sweep,
    wait_for,
    wait_gone,
)

from harness.host.workdir import clean_dead_runs
from harness.record import load_record

pytestmark = [pytest.mark.integration, pytest.mark.guest]


def creating(pid: int) -> dict[int, str]:
    """qemu-img processes below ``pid`` that create a preallocated image."""
    found = {}
    for child, comm in descendants(pid).items():
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if comm == "qemu-img" and b"create" in argv and any(b"preallocation=metadata" in a for a in argv):
            found[child] = comm
    return found


def test_qemu_img_dies_with_a_killed_harness_and_earlier_records_stay(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    spec = tmp_path / "kill.toml"
    # the second cell's image takes about a minute to create (a metadata entry per 512-byte cluster)
    spec.write_text(
        'name = "kill"\n[axes]\npreallocation = ["off", "metadata"]\n\n[params]\nformat = "qcow2"\n'
        'cluster_size = "512"\nsize = "1G"\nworkload = "dd"\ndd_mib = 16\n'
    )
    results = tmp_path / "results"
    directory = results / "sweeps" / "kill"
    sweep = popen(argv_paths(spec, disk_dir, results), tmp_path / "sweep.log")
    procs: dict[int, str] = {}
    try:
        wait_for("qemu-img creating the second image", lambda: creating(sweep.pid), 400, sweep)
        qemu_img = creating(sweep.pid)
        procs.update(descendants(sweep.pid))
        kept = {p.name: p.read_bytes() for p in directory.glob("*.json")}
        os.kill(sweep.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        sweep.wait(timeout=30)
        while any(alive(p, c) for p, c in qemu_img.items()) and time.monotonic() - killed_at < 30:
            time.sleep(0.05)
        gone_s = time.monotonic() - killed_at
        print(f"killed harness: qemu-img gone {gone_s:.2f} s after the SIGKILL")
        assert not any(alive(p, c) for p, c in qemu_img.items()), "qemu-img outlived its killed harness"
    finally:
        if sweep.poll() is None:
            sweep.kill()
        sweep.wait()
        kill_all(procs)
    assert len(kept) == 1
    for name, data in kept.items():
        assert (directory / name).read_bytes() == data
        assert load_record(directory / name).samples[0].status == "ok"
    # the half-made image of the dead run goes at the next start
    leftovers = [p for p in disk_dir.glob(f"*.{sweep.pid}.qcow2")]
    removed = clean_dead_runs(disk_dir)
    assert all(p in removed for p in leftovers) and not list(disk_dir.glob(f"*.{sweep.pid}.qcow2"))


def test_sigterm_shuts_qemu_down_exits_130_and_keeps_the_records(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    _, _, directory, sweep = start_sweep(
        tmp_path, disk_dir, "term", {"interface": ["virtio-blk", "ide"]}, "sweep.log"
    )
    procs: dict[int, str] = {}
    try:
        wait_for("first record", lambda: list(directory.glob("*.json")), 300, sweep)
        kept = {p.name: p.read_bytes() for p in directory.glob("*.json")}
        wait_for("QEMU of the second cell", lambda: guest_on_image(sweep.pid), 300, sweep)
        procs.update(descendants(sweep.pid))
        sweep.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        sweep.wait(timeout=60)
        print(f"SIGTERM: exit {sweep.returncode} after {time.monotonic() - t0:.1f} s")
    finally:
        if sweep.poll() is None:
            sweep.kill()
        sweep.wait()
        kill_all(procs)
    assert sweep.returncode == 130
    assert "diskbench: interrupted" in (tmp_path / "sweep.log").read_text()
    assert not wait_gone(procs), "a child outlived the harness"
    assert {p.name: p.read_bytes() for p in directory.glob("*.json")} == kept
