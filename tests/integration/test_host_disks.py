"""Host disk models (harness/host/hostdisk.py): each named model, mounted, reaches its profile's
figures under fio within ±10 % with the host's CPUs busy, or is refused with the ceiling its path
measured; a killed harness leaves nothing the next run cannot clear."""

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

from harness.host import diskparts, diskprobe, hostdisk

pytestmark = [
    pytest.mark.integration,
    # its figures are the model's speed: never beside another test
    pytest.mark.timed,
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


#: the model the period-disk gate runs on: its path must reach it on any runner like these
MUST_REACH = ("period-hdd",)


def busy_loops() -> list[subprocess.Popen[bytes]]:
    """A CPU-bound loop per CPU at the host's ordinary priority: the model must not slow down for them."""
    return [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(os.cpu_count() or 1)]


@pytest.mark.parametrize("name", sorted(hostdisk.profiles()))
def test_model_reaches_its_profile_or_is_refused(name: str, tmp_path: Path) -> None:
    """Under load (a busy loop per CPU beside it), the model's figures are its profile's within
    the tolerance; or, where the path cannot reach them, the model is refused (exit 2) with the
    ceiling it measured, which is indeed short of the profile."""
    profile = hostdisk.profiles()[name]
    loops: list[subprocess.Popen[bytes]] = []
    try:
        with hostdisk.mounted(tmp_path, profile) as model:
            assert hostdisk.filesystem_of(model.mount) == "ext4"
            for pid in (model.qsd_pid, model.strace_pid):
                assert diskprobe.priority_of(pid) == f"SCHED_FIFO {diskprobe.FIFO_PRIORITY}"
            loops = busy_loops()
            got = figures(model.mount)
    except hostdisk.OutOfReach as refused:
        assert name not in MUST_REACH, f"{name} refused on this runner: {refused}"
        assert refused.exit_code == 2
        assert str(refused).startswith(f"--host-disk {name}: out of reach of this host's model path")
        ceiling = refused.ceiling
        assert ceiling is not None and not ceiling.throttled
        short = ceiling.iops < profile.random_iops * diskprobe.HEADROOM
        short = short or ceiling.mib_s < profile.seq_mib_s * diskprobe.HEADROOM
        assert short or refused.flush_path_ms > profile.flush_ms, refused.ceiling
        assert f"the path: {ceiling.iops:.0f}" in str(refused) or f"the path: {ceiling.mib_s:.0f}" in str(
            refused
        )
        print(f"{name}: refused: {json.dumps(ceiling.as_dict())}")
        return
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    print(f"{name}: {json.dumps({k: round(v, 2) for k, v in got.items()})} (load {os.getloadavg()[0]:.1f})")
    want = {
        "seq_write_mib_s": profile.seq_mib_s,
        "seq_read_mib_s": profile.seq_mib_s,
        "randread_iops": profile.random_iops,
        "randwrite_iops": profile.random_iops,
        "flush_ms": profile.flush_ms,
    }
    off = {k: f"{got[k]:.2f} for {want[k]:g}" for k in want if abs(got[k] / want[k] - 1) > TOLERANCE}
    assert not off, f"{name} is off its profile by more than {TOLERANCE:.0%}: {off}"
    assert leftovers(tmp_path) == []


def leftovers(work_dir: Path) -> list[str]:
    """What a model under ``work_dir`` could leave behind: mounts, loop devices, daemons."""
    export = work_dir.resolve() / hostdisk.STATE_DIR / "export.img"
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    found = [f"mount {m}" for m in mounts if m.startswith(str(work_dir.resolve()))]
    found += [f"loop {loop}" for loop in diskparts.loops(export)]
    found += [f"daemon {pid}" for pid in diskparts.daemons(export)]
    return found


HOLDER = """
import sys, time
from pathlib import Path
from harness.host import diskparts, diskprobe, hostdisk
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


def test_a_model_out_of_reach_is_refused_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path that measures short of the profile: exit 2, one line with the ceiling, nothing left."""
    from harness.cli import main

    def short_path(device: str, start: int, size: int, *, throttled: bool = False) -> diskprobe.Ceiling:
        return diskprobe.Ceiling(120.0, 130.0, 70.0, 50.0, throttled=throttled)

    monkeypatch.setattr(diskprobe, "ceiling", short_path)
    work = tmp_path / "work"
    argv = ["run", "--host-disk", "period-hdd", "--workload", "dd", "--repeat", "1"]
    argv += ["--work-dir", str(work), "--results-dir", str(tmp_path / "results")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "diskbench: error: --host-disk period-hdd: out of reach of this host's model path"
    )
    assert "150 random IOPS (the path: 120) and 60 MiB/s (the path: 50)" in err[-1]
    assert "Traceback" not in "\n".join(err)
    assert leftovers(work) == []
    assert not list((tmp_path / "results").rglob("*.json"))


def test_each_guest_on_a_model_has_a_disk_of_its_own(tmp_path: Path) -> None:
    """Two readers at once, each in its own disk (as two QEMU of a pair are): each reaches the
    profile's random IOPS; in the model's one budget they share it. Taken down with the model."""
    from harness.host import diskgroups

    profile = hostdisk.profiles()["period-hdd"]
    assert diskgroups.model_device(tmp_path) is None, "the native disk is no model"

    def reader(path: Path, group: Path | None) -> subprocess.Popen[str]:
        argv = ["fio", "--name=r", f"--filename={path}", "--size=32M", "--direct=1", "--ioengine=psync"]
        argv += ["--rw=randread", "--bs=4k", "--time_based", f"--runtime={RUNTIME_S}", "--output-format=json"]
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, text=True, preexec_fn=lambda: diskgroups.join(group)
        )

    def iops(readers: list[subprocess.Popen[str]]) -> list[float]:
        return [json.loads(r.communicate(timeout=120)[0])["jobs"][0]["read"]["iops"] for r in readers]

    with hostdisk.mounted(tmp_path, profile) as model:
        files = [model.mount / "a", model.mount / "b"]
        for f in files:
            f.write_bytes(os.urandom(32 << 20))
        os.sync()
        shared = iops([reader(f, None) for f in files])
        with diskgroups.own_disk(files[0]) as one, diskgroups.own_disk(files[1]) as two:
            assert one is not None and two is not None and one != two
            apart = iops([reader(files[0], one), reader(files[1], two)])
        assert not one.exists() and not two.exists()
        kept = diskgroups.own_disk(files[0])  # entered, never left: as a killed run leaves one
        left = kept.__enter__()
        assert left is not None and left.exists()
    assert not left.exists(), "the model's teardown removes its guests' disks"
    print(f"shared {shared}, own disks {apart}")
    for got in apart:
        assert abs(got / profile.random_iops - 1) <= TOLERANCE, apart
    assert sum(shared) <= profile.random_iops * (1 + TOLERANCE), shared
