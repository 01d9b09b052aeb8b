"""What a pull request can leave on a runner, and what it can reach on the way: guest builds that pile
up, logs flooded after the report, a probe run as root, a path whose comma ends a QEMU option."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import ProtocolError
from harness.guest.build import prune_builds
from harness.host import confine
from harness.sample.capabilities import probe_compressed_writes
from harness.sample.replay.script import drive_option_words
from harness.sample.vm import Drive, Machine, VMConfig
from harness.spec import Aio, Cache, Interface
from harness.subject.binaries import Binaries
from harness.untrusted import LOG_BYTES


def _build(root: Path, name: str, mib: int, age_s: float) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "initramfs.cpio").write_bytes(os.urandom(mib * 2**20))
    when = time.time() - age_s
    os.utime(path, (when, when))
    return path


def test_guest_builds_are_pruned_by_size_the_current_and_those_in_use_spared(tmp_path: Path) -> None:
    # six pushes of a pull request that changed images/ within the day: 6 MiB of builds, a 3 MiB cap
    builds = [_build(tmp_path, f"r{n}", 1, age_s=2 * 3600 + 600 * n) for n in range(6)]
    current = _build(tmp_path, "current", 1, age_s=5 * 3600)  # built long ago, used now
    in_use = _build(tmp_path, "other-side", 1, age_s=60)  # the other side of a gate, now
    prune_builds(tmp_path, keep=4, current="current", max_bytes=3 * 2**20)
    left = sorted(p.name for p in tmp_path.iterdir())
    # the least recently used went first; the current recipe's and the one in use stay
    assert left == ["current", "other-side", "r0"], left
    assert current.exists() and in_use.exists() and builds[0].exists()


def test_a_flood_of_the_console_after_the_report_ends_the_wait_for_power_off(tmp_path: Path) -> None:
    config = VMConfig(
        qemu="qemu-system-x86_64", kernel=tmp_path / "k", initrd=tmp_path / "i", append="", drives=[]
    )
    vm = Machine(config, tmp_path)
    with open(vm.console_log, "wb") as fh:
        fh.truncate(LOG_BYTES + 1)
    with pytest.raises(
        ProtocolError, match=r"console\.log grew to .* past the cap .* the guest to power off"
    ):
        vm.wait_guest_stopped(timeout_s=1.0)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory the QEMU account can read and run from."""
    path = Path(tempfile.mkdtemp(prefix="diskbench-probe-"))
    path.chmod(0o755)
    yield path
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


def test_the_compressed_writes_probe_runs_qemu_img_and_qemu_io_as_the_account(
    shared: Path, tmp_path: Path
) -> None:
    body = '#!/bin/sh\n[ "$(id -u)" = {uid} ] || {{ echo "failed: ran as uid $(id -u)"; exit 1; }}\n'
    for name in ("qemu-img", "qemu-io"):
        (shared / name).write_text(body.format(uid=confine.account().uid))
        (shared / name).chmod(0o755)
    result = probe_compressed_writes(
        tmp_path / "work", Binaries(qemu="qemu-system-x86_64", qemu_img=str(shared / "qemu-img"))
    )
    assert result["supported"], result


def test_a_comma_in_an_image_path_stays_in_the_path() -> None:
    drive = Drive(
        node="disk0",
        path=Path("/w/a,file=/etc/shadow,b.qcow2"),
        format="qcow2",
        interface=Interface.VIRTIO_BLK,
        cache=Cache.NONE,
        aio=Aio.THREADS,
    )
    value = drive.argv()[1]
    assert "file=/w/a,,file=/etc/shadow,,b.qcow2," in value
    words = drive_option_words(value)
    assert words["file"] == "/w/a,file=/etc/shadow,b.qcow2"
    assert words["format"] == "qcow2"
    assert drive_option_words("file=/w/x,,,format=raw") == {"file": "/w/x,", "format": "raw"}
