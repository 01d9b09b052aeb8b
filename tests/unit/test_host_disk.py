"""Host disk models without building one: the profiles, the flag's refusals (exit 2), and the model
as part of the machine's identity (records of two models are never one series)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ExitCode
from harness.host import diskprobe, hostdisk
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


def ceiling(iops: float, mib_s: float, *, throttled: bool = False) -> diskprobe.Ceiling:
    return diskprobe.Ceiling(iops, iops * 2, mib_s * 2, mib_s, throttled=throttled)


def test_a_profile_past_the_paths_ceiling_is_out_of_reach() -> None:
    ssd = hostdisk.profiles()["sata-ssd"]
    short = diskprobe.out_of_reach(
        seq_mib_s=ssd.seq_mib_s, random_iops=ssd.random_iops, ceiling_found=ceiling(1351, 281)
    )
    assert short == ["10000 random IOPS (the path: 1351)", "500 MiB/s (the path: 281)"]
    hdd = hostdisk.profiles()["period-hdd"]
    assert diskprobe.out_of_reach(seq_mib_s=60, random_iops=150, ceiling_found=ceiling(1351, 281)) == []
    # unthrottled, the path needs headroom over a figure; through the throttle, the figure itself
    assert diskprobe.out_of_reach(seq_mib_s=60, random_iops=150, ceiling_found=ceiling(160, 281)) == [
        "150 random IOPS (the path: 160)"
    ]
    assert (
        diskprobe.out_of_reach(seq_mib_s=60, random_iops=150, ceiling_found=ceiling(140, 58, throttled=True))
        == []
    )
    # a flush the path alone makes slower than the profile's
    assert diskprobe.out_of_reach(
        seq_mib_s=hdd.seq_mib_s,
        random_iops=hdd.random_iops,
        ceiling_found=None,
        flush_ms=2.0,
        flush_path_ms=2.3,
    ) == ["a 2 ms flush (the path's own: 2.30 ms)"]


def test_a_models_process_runs_real_time_or_at_nice_minus_19() -> None:
    import os
    import subprocess

    child = subprocess.Popen(["sleep", "30"], preexec_fn=diskprobe.raise_in_child)
    try:
        got = diskprobe.priority_of(child.pid)
        if os.geteuid() == 0:
            assert got == f"SCHED_FIFO {diskprobe.FIFO_PRIORITY}"
        else:
            assert got in (f"nice {diskprobe.FALLBACK_NICE}", "nice 0")
        assert os.getsid(child.pid) == child.pid  # a session, so an autogroup, of its own
    finally:
        child.kill()
        child.wait()


# -- the gate on a model -------------------------------------------------------------------------


def test_a_model_with_a_spec_of_its_own_runs_it_and_a_spec_for_a_model_runs_on_it() -> None:
    from harness.errors import SpecError
    from harness.gate.spec import GATE_SPEC, disk_for_spec, load_gate_spec, parse_gate_spec, spec_for_disk

    own = spec_for_disk(GATE_SPEC, "period-hdd")
    assert own.name == "gate-period-hdd.toml" and own.is_file()
    assert spec_for_disk(GATE_SPEC, "native") == GATE_SPEC
    assert spec_for_disk(GATE_SPEC, "sata-ssd") == GATE_SPEC, "no spec of its own: the default"
    assert spec_for_disk(Path("mine.toml"), "period-hdd") == Path("mine.toml"), "a spec given is run"
    period = load_gate_spec(own)
    assert period.host_disk == "period-hdd"
    assert disk_for_spec(period, "native") == "period-hdd"
    assert disk_for_spec(period, "period-hdd") == "period-hdd"
    with pytest.raises(
        SpecError, match=r"--host-disk sata-ssd: the gate spec .* is sized for host_disk period-hdd"
    ):
        disk_for_spec(period, "sata-ssd")
    assert load_gate_spec(GATE_SPEC).host_disk is None
    assert disk_for_spec(load_gate_spec(GATE_SPEC), "sata-ssd") == "sata-ssd"
    cell = '[[cells]]\nname = "a"\nworkload = "dd"\n'
    with pytest.raises(SpecError, match=r"<s>:1: host_disk 'floppy': no such host disk model"):
        parse_gate_spec(f'host_disk = "floppy"\n{cell}', source="<s>")


def test_the_summary_says_what_the_times_are_about_on_a_model() -> None:
    from harness.compare.text import regime_words

    hdd = hostdisk.profiles()["period-hdd"].identity("blkio")
    assert regime_words("tcg") == "under TCG (emulation): times are about QEMU's emulation, not the disk"
    assert regime_words("tcg", hdd) == (
        "under TCG (emulation), the work dir on host disk model period-hdd: 60 MiB/s, 150 IOPS, flush 10 ms, "
        "throttled by blkio: times are the guest's waits on that modelled disk and QEMU's emulation "
        "together, not a real disk's"
    )
    assert regime_words("kvm", hdd).startswith("under KVM, the work dir on host disk model period-hdd")
    assert regime_words("kvm") == "under KVM"


def test_a_ceiling_keeps_each_figures_best_measurement() -> None:
    stalled = diskprobe.Ceiling(1073, 932, 4, 82)  # a moment's stall of the host: 4 MiB/s
    again = diskprobe.Ceiling(900, 1100, 926, 60)
    best = stalled.best(again)
    assert (best.randread_iops, best.randwrite_iops, best.seq_read_mib_s, best.seq_write_mib_s) == (
        1073,
        1100,
        926,
        82,
    )
    assert diskprobe.out_of_reach(seq_mib_s=60, random_iops=150, ceiling_found=stalled) == [
        "60 MiB/s (the path: 4)"
    ]
    assert diskprobe.out_of_reach(seq_mib_s=60, random_iops=150, ceiling_found=best) == []
