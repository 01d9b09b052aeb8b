"""Host disk models without building one: the profiles, the flag's refusals (exit 2), and the model
as part of the machine's identity (records of two models are never one series)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ExitCode
from harness.host import hostdisk
from harness.record.identity import fingerprint, identity_slug, merge_identity, series_identity
from harness.record.model import CellInfo, MachineInfo, Record, SubjectInfo, VMInfo

MACHINE = {
    "hostname": "runner",
    "arch": "x86_64",
    "cpu": "cpu",
    "accel": "tcg",
    "qemu": "/usr/bin/qemu-system-x86_64",
    "qemu_version": "7.2.22",
    "qemu_img_version": "7.2.22",
    "qemu_debian_version": "1:7.2",
    "qemu_sha256": "a",
    "qemu_img_sha256": "b",
    "work_dir_fs": "ext4",
}


def test_profiles_carry_their_figures() -> None:
    found = hostdisk.profiles()
    assert {"period-hdd", "sata-ssd"} <= set(found)
    hdd = found["period-hdd"]
    assert (hdd.seq_mib_s, hdd.random_iops, hdd.flush_ms) == (60, 150, 10.0)
    assert hostdisk.names()[0] == hostdisk.NATIVE
    assert hostdisk.profile("native") is None
    assert hostdisk.identity("native") is None
    assert str(hostdisk.identity("period-hdd")).startswith("period-hdd: 60 MiB/s, 150 IOPS, flush 10 ms")


def test_unknown_model_is_bad_input_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--host-disk", "floppy", "--dry-run"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "--host-disk 'floppy': no such host disk model: use one of native, period-hdd" in err
    assert "Traceback" not in err


def test_a_model_needs_root() -> None:
    with pytest.raises(hostdisk.HostDiskError, match=r"needs root .*--host-disk native"):
        hostdisk.check_usable("period-hdd", euid=1000)
    assert hostdisk.check_usable("native", euid=1000) is None


def test_model_work_dir_is_its_mount_point() -> None:
    assert hostdisk.model_dir(Path("/w"), "native") == Path("/w")
    assert hostdisk.model_dir(Path("/w"), "period-hdd") == Path("/w/host-disk-period-hdd")


def record(machine: dict[str, str]) -> Record:
    return Record(
        cell=CellInfo({}),
        machine=MachineInfo(machine),
        subject=SubjectInfo({"guest": {"recipe_hash": "r"}}),
        vm=VMInfo({"mem_mib": 256, "smp": 1}),
    )


def test_native_identity_hashes_as_before_models_existed() -> None:
    # the fingerprint of a native record as computed before host_disk joined MACHINE_KEYS
    import hashlib
    import json

    old = {
        "machine": dict(MACHINE),
        "guest": "r",
        "policy": None,
        "vm": {"mem_mib": 256, "smp": 1},
    }
    want = hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:16]
    native = record(MACHINE)
    assert fingerprint(native.machine, native.subject, native.vm) == want


def test_two_models_are_never_one_series() -> None:
    native = record(MACHINE)
    hdd = record({**MACHINE, "host_disk": hostdisk.profiles()["period-hdd"].identity("blkio")})
    ssd = record({**MACHINE, "host_disk": hostdisk.profiles()["sata-ssd"].identity("blkio")})
    prints = {fingerprint(r.machine, r.subject, r.vm) for r in (native, hdd, ssd)}
    assert len(prints) == 3
    assert len({identity_slug(merge_identity(r)) for r in (native, hdd, ssd)}) == 3
    assert len({series_identity(r) for r in (native, hdd, ssd)}) == 3
