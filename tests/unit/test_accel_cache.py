"""The KVM verdict is cached per host kernel and QEMU binary (its path and digest): a run on the
same kernel and QEMU never boots the probe guest again; another QEMU, or the same path rebuilt,
probes again; /dev/kvm is checked every time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.sample.accel import cached_probe, probe_key


class Probes:
    """A probe that counts its boots and answers what it is told (no guest)."""

    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.boots: list[str] = []

    def __call__(self, kernel: Path, initrd: Path, *, qemu: str, runs_as: int | None = None) -> str | None:
        self.boots.append(qemu)
        return self.answer


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    monkeypatch.setenv("DISKBENCH_CACHE", str(tmp_path / "cache"))
    kernel, qemu = tmp_path / "vmlinux", tmp_path / "qemu-system-x86_64"
    kernel.write_bytes(b"kernel")
    qemu.write_bytes(b"qemu build 1")
    return kernel, tmp_path / "initrd", qemu


def _probe(
    files: tuple[Path, Path, Path], probes: Probes, *, device: str | None = None, qemu: Path | None = None
) -> str | None:
    kernel, initrd, default = files
    return cached_probe(kernel, initrd, qemu=str(qemu or default), probe=probes, device=lambda: device)


def test_the_same_kernel_and_qemu_probe_once(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    probes = Probes("a guest did not boot under KVM: no ready line")
    assert _probe(files, probes) == "a guest did not boot under KVM: no ready line"
    assert _probe(files, probes) == "a guest did not boot under KVM: no ready line"
    assert len(probes.boots) == 1
    stored = json.loads((tmp_path / "cache" / "accel-verdicts.json").read_text())
    (key,) = stored["verdicts"]
    assert probe_key(files[0], str(files[2])).qemu_digest in key


def test_another_qemu_or_a_rebuilt_one_probes_again(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    probes = Probes(None)
    other = tmp_path / "other-qemu"
    other.write_bytes(b"another build")
    assert _probe(files, probes) is None and _probe(files, probes, qemu=other) is None
    assert len(probes.boots) == 2
    # both kept: a gate alternating two builds probes neither again
    assert _probe(files, probes) is None and _probe(files, probes, qemu=other) is None
    assert len(probes.boots) == 2
    files[2].write_bytes(b"qemu build 2")  # the same path, rebuilt
    assert _probe(files, probes) is None and len(probes.boots) == 3


def test_a_changed_host_kernel_probes_again(
    files: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    probes = Probes(None)
    _probe(files, probes)
    before = probe_key(files[0], str(files[2]))
    import os

    real = os.uname()
    monkeypatch.setattr(
        os, "uname", lambda: os.uname_result((real.sysname, real.nodename, "9.9.9", "#2", real.machine))
    )
    assert probe_key(files[0], str(files[2])).host_kernel != before.host_kernel
    _probe(files, probes)
    assert len(probes.boots) == 2


def test_dev_kvm_is_checked_every_time_and_never_cached(files: tuple[Path, Path, Path]) -> None:
    probes = Probes(None)
    assert _probe(files, probes, device="/dev/kvm cannot be opened: Permission denied") == (
        "/dev/kvm cannot be opened: Permission denied"
    )
    assert _probe(files, probes) is None and len(probes.boots) == 1  # the user joined the kvm group
