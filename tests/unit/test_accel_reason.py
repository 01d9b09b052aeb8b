"""``diskbench accel`` says why KVM does not work once, whole, and what to do."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import guest
from harness.cli import main
from harness.sample import accel

ASSERTION = (
    "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: "
    "Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed."
)
# what the probe's Machine raised on a nested host whose KVM lacks an MSR (seen here)
MESSAGE = f"QMP connection failed: Failed to establish session: EOFError; QEMU exited with -6: {ASSERTION}"


def test_the_reason_is_said_once_and_whole() -> None:
    reason = accel.probe_failure(MESSAGE, f"some line\n{ASSERTION}\n")
    assert reason == f"a guest did not boot under KVM: QEMU exited with -6: {ASSERTION}"
    assert reason.count("kvm_buf_set_msrs") == 1 and reason.endswith("failed.")


def test_a_last_line_the_message_lacks_is_kept() -> None:
    reason = accel.probe_failure("no ready line under KVM from the guest within 30 s", "Booting\nkvm: hung\n")
    assert reason.endswith("within 30 s (its last output: kvm: hung)")


def test_advice_for_each_kind_of_problem() -> None:
    assert "kvm_intel or kvm_amd" in accel.advice("/dev/kvm does not exist (no KVM in this kernel)")
    assert "kvm group" in accel.advice("/dev/kvm cannot be opened: Permission denied (add ...)")
    assert "--qemu PATH" in accel.advice(accel.probe_failure(MESSAGE, ""))
    assert "--no-cache" in accel.advice("a guest did not boot under KVM: no ready line")


def test_the_command_prints_the_reason_once_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = tmp_path / "vmlinux"
    kernel.write_bytes(b"k")
    monkeypatch.setenv("DISKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(guest, "build_guest", lambda **_: SimpleNamespace(kernel=kernel, initrd=kernel))
    monkeypatch.setattr(accel, "probe_kvm", lambda *a, **k: accel.probe_failure(MESSAGE, ASSERTION))
    assert main(["accel"]) == 0
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert output.count("kvm_buf_set_msrs") == 1
    assert "nmsrs' failed." in output and "faile)" not in output
    lines = captured.out.splitlines()
    assert lines[0].startswith("accel: tcg (auto: KVM unusable: a guest did not boot under KVM: QEMU exited")
    assert lines[1].startswith("what to do: this QEMU stops under this host's KVM")
