"""The report channel and argv of a Machine, without launching QEMU."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.host.workdir import clean_stale_tmp_dirs
from harness.sample.vm import Drive, Machine, VMConfig
from harness.spec import Aio, Cache, Interface
from harness.subject.binaries import QEMU


def machine(tmp_path: Path) -> Machine:
    config = VMConfig(
        qemu=QEMU, kernel=Path("/k"), initrd=Path("/i"), append=["diskbench.workload=dd"], drives=[]
    )
    vm = Machine(config, tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    return vm


def test_report_lines_become_events_and_garbage_is_kept_apart(tmp_path: Path) -> None:
    vm = machine(tmp_path)
    vm.report_log.write_bytes(b'{"event":"ready","uptime_s":1.0}\nnot json at all\n[1,2]\n{"event":"rep')
    assert vm.garbage() == ["not json at all", "[1,2]"]
    with vm.report_log.open("ab") as fh:
        fh.write(b'ort","workload":"dd"}\n')
    vm._read_events()
    names = [e["event"] for e in vm._events]
    assert names == ["ready", "garbage", "garbage", "report"], "a line split across reads is joined"


def test_nan_and_deep_nesting_from_the_guest_are_garbage_not_a_crash(tmp_path: Path) -> None:
    vm = machine(tmp_path)
    deep = b"[" * 200_000 + b"]" * 200_000
    vm.report_log.write_bytes(
        b'{"event":"report","total_s":NaN}\n{"event":"report","x":-Infinity}\n' + deep + b"\n"
        b'{"event":"ready","uptime_s":1.0}\n'
    )
    vm._read_events()
    assert [e["event"] for e in vm._events] == ["garbage", "garbage", "garbage", "ready"]
    assert vm.garbage()[0].startswith('{"event":"report","total_s":NaN}')


@pytest.mark.parametrize(
    ("interface", "expected"),
    [
        (Interface.VIRTIO_BLK, ["virtio-blk-pci,id=disk0-dev,drive=disk0,serial=diskbench-disk"]),
        (Interface.IDE, ["ide-hd,id=disk0-dev,drive=disk0,bus=ide.0,serial=diskbench-disk"]),
        (
            Interface.AHCI,
            ["ahci,id=disk0-hba", "ide-hd,id=disk0-dev,drive=disk0,bus=disk0-hba.0,serial=diskbench-disk"],
        ),
        (
            Interface.VIRTIO_SCSI,
            [
                "virtio-scsi-pci,id=disk0-hba",
                "scsi-hd,id=disk0-dev,drive=disk0,bus=disk0-hba.0,serial=diskbench-disk",
            ],
        ),
        (Interface.NVME, ["nvme,id=disk0-dev,drive=disk0,serial=diskbench-disk"]),
    ],
)
def test_each_interface_has_its_device_model(interface: Interface, expected: list[str]) -> None:
    drive = Drive(
        node="disk0", path=Path("/img"), format="qcow2", interface=interface, cache=Cache.NONE, aio=Aio.NATIVE
    )
    argv = drive.argv()
    assert argv[:2] == ["-drive", "if=none,id=disk0,file=/img,format=qcow2,cache=none,aio=native"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-device"] == expected


def test_argv_is_sandboxed_and_has_no_network_or_default_devices(tmp_path: Path) -> None:
    config = VMConfig(qemu=QEMU, kernel=Path("/k"), initrd=Path("/i"), append=["x=1"], drives=[], accel="tcg")
    argv = config.argv(qmp_path=tmp_path / "q", console=tmp_path / "c", report=tmp_path / "r")
    joined = " ".join(argv)
    for flag in ("-nodefaults", "-nic none", "-display none", "-sandbox on", "-no-shutdown", "-accel tcg"):
        assert flag in joined
    assert "-cpu host" not in joined
    assert "-cpu host" in " ".join(
        VMConfig(qemu=QEMU, kernel=Path("/k"), initrd=Path("/i"), append=[], drives=[], accel="kvm").argv(
            qmp_path=tmp_path / "q", console=tmp_path / "c", report=tmp_path / "r"
        )
    )


def test_stale_private_dirs_of_dead_harnesses_are_removed(tmp_path: Path) -> None:
    dead = tmp_path / "diskbench-vm-999999999-abc"
    dead.mkdir()
    (dead / "qmp.sock").write_text("")
    import os

    alive = tmp_path / f"diskbench-vm-{os.getpid()}-abc"
    alive.mkdir()
    assert clean_stale_tmp_dirs(tmp_path) == [dead]
    assert alive.exists() and not dead.exists()
