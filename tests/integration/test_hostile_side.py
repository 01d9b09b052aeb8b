"""A hostile side on a real QEMU: a guest that reports and never powers off, a QEMU wrapper that
swaps the control FIFO for a link, a QMP socket that accepts and never greets.

The wrappers are what a pull request's ``--build-command`` can make of head's "QEMU"; the guest that
never powers off is what a pull request's ``images/`` can make of head's guest (here: the same guest
on a machine without ACPI, where its ``poweroff -f`` halts instead of powering off).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gatekit import tcg_gate
from gitrepo import git

from harness.compare.comparison import load_comparison
from harness.errors import ExitCode, VMBootError
from harness.gate import SubjectSource, parse_gate_spec
from harness.gate.rounds import timed_out
from harness.record import Sample
from harness.sample.guest_sampler import RunOptions, run_sample, vm_config
from harness.sample.vm import Machine
from harness.spec import make_cell
from harness.subject.binaries import QEMU, QEMU_IMG, Binaries

# timed: a sample's end is held to its deadline within 15 s; one at a time, never beside another test
pytestmark = [pytest.mark.integration, pytest.mark.guest, pytest.mark.timed]

DD: dict[str, Any] = {
    "format": "raw",
    "cache": "writeback",
    "interface": "virtio-blk",
    "workload": "dd",
    "dd_mib": 16,
}


def wrapper(directory: Path, name: str, body: str) -> str:
    """A "QEMU" of the pull request's: ``body`` (sh) runs first, then the real QEMU with its argv."""
    script = directory / name
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then exec {QEMU} --version; fi\n{body}\nexec {QEMU} "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def no_poweroff_qemu(directory: Path) -> str:
    """A QEMU whose machine has no ACPI: the guest reports as ever, then halts and never powers off."""
    return wrapper(
        directory,
        "halting-qemu",
        'for a in "$@"; do shift; [ "$a" = pc ] && a=pc,acpi=off; set -- "$@" "$a"; done',
    )


def options(qemu: str, work_dir: Path, results: Path, **kw: Any) -> RunOptions:
    """A run's options under TCG with ``qemu`` as the side's QEMU."""
    return RunOptions(
        accel="tcg",
        accel_reason="test",
        work_dir=work_dir,
        results_dir=results,
        run_id="hostile",
        binaries=Binaries(qemu=qemu, qemu_img=QEMU_IMG),
        **kw,
    )


def test_a_guest_that_reports_and_never_powers_off_fails_its_sample_within_its_deadline(
    guest: Any, tmp_path: Path, disk_dir: Path, qemu_reachable_dir: Path
) -> None:
    qemu = no_poweroff_qemu(qemu_reachable_dir)
    opts = options(qemu, disk_dir, tmp_path / "results", workload_timeout_s=12.0, start="cold")
    disk_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    sample = run_sample(make_cell(**DD), guest, opts, 0, tmp_path / "log").to_json()
    took = time.monotonic() - t0
    # the guest did report, as an honest one does, and was never timed from that report
    assert '{"event":"report","workload":"dd","status":"ok"' in (tmp_path / "log" / "console.log").read_text()
    assert sample["status"] == "error", sample
    assert sample["error_type"] == "GuestTimeout" and "did not power off" in sample["reason"], sample
    assert "host.workload_s" not in (sample.get("metrics") or {})
    # the sample ended at the workload's deadline (12 s from the workload line), not a minute later
    boot_s = 60.0
    assert took < boot_s + 12.0 + 15.0, took
    assert timed_out(Sample.from_json(sample))


SPEC = """
name = "hostile-head"
rounds = 4
max_rounds = 4
budget_min = 10
metrics = ["host.workload_s"]
min_effect = "5%"

[params]
dd_mib = 16

[[cells]]
name = "policy-dd"
workload = "dd"
"""


def test_a_head_whose_guest_never_powers_off_ends_the_gate_as_its_regression_within_its_deadline(
    project_clone: Callable[[str], Path], tmp_path: Path, disk_dir: Path, guest: Any, qemu_reachable_dir: Path
) -> None:
    repo = project_clone("hostile-head")
    git(repo, "tag", "base")
    spec = parse_gate_spec(SPEC, source="hostile-head.toml")
    t0 = time.monotonic()
    head = SubjectSource("head", "base", qemu=no_poweroff_qemu(qemu_reachable_dir))
    result = tcg_gate(
        repo, spec, "base", head, disk_dir=disk_dir, out_dir=tmp_path / "out", seed=7, workload_timeout_s=15.0
    )
    took = time.monotonic() - t0
    doc = load_comparison(tmp_path / "out" / "comparison.json").to_json()
    (cell,) = doc["cells"]
    assert cell["verdict"] == "regression", json.dumps(cell)[:2000]
    assert "deadline" in cell["reason"] or "power off" in cell["reason"], cell["reason"]
    assert result.exit_code == ExitCode.REGRESSION
    # one head sample ran into its 15 s deadline and ended the gate: no further rounds, no minute's wait
    assert took < 240, took


def test_root_writes_the_workload_line_to_its_fifo_whatever_qemus_account_puts_at_its_name(
    guest: Any, tmp_path: Path, disk_dir: Path, qemu_reachable_dir: Path
) -> None:
    # a file only root may write, which the wrapper links at control.in once QEMU has opened the FIFO
    target = qemu_reachable_dir / "root-only"
    target.write_text("untouched\n")
    target.chmod(0o600)
    qemu = wrapper(
        qemu_reachable_dir,
        "linking-qemu",
        'for a in "$@"; do case "$a" in pipe,id=control,path=*) ctl=${a#pipe,id=control,path=} ;; esac; done\n'
        f'(sleep 1; ln -sf {target} "$ctl.in.new" && mv -f "$ctl.in.new" "$ctl.in") &',
    )
    opts = options(qemu, disk_dir, tmp_path / "results")
    disk_dir.mkdir(parents=True, exist_ok=True)
    image = disk_dir / "unused.raw"
    image.write_bytes(b"\0" * 2**20)
    if os.geteuid() == 0:
        os.chown(image, *_account_ids())
    config = vm_config(make_cell(**DD), guest, opts, image)
    with Machine(config, tmp_path / "log") as vm:
        assert vm.control_path is not None
        deadline = time.monotonic() + 20
        while not Path(f"{vm.control_path}.in").is_symlink():
            assert time.monotonic() < deadline, "the wrapper never linked control.in"
            time.sleep(0.05)
        vm.send_control("diskbench.workload=dd diskbench.dd_mib=1")
    assert target.read_text() == "untouched\n"


def _account_ids() -> tuple[int, int]:
    from harness.host import confine

    acct = confine.account()
    return acct.uid, acct.gid


def qmp_stand_in(directory: Path, name: str, after_accept: str) -> Machine:
    """A machine whose "QEMU" listens on the QMP socket, accepts, then runs ``after_accept``
    (Python) instead of greeting; its QMP deadline is 2 s."""
    server = directory / f"{name}.py"
    server.write_text(
        "import socket, sys, time\n"
        "args = sys.argv[1:]\n"
        "path = args[args.index('-qmp') + 1].split(',')[0].removeprefix('unix:')\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(1)\n"
        "conn = s.accept()[0]\n" + after_accept
    )
    qemu = directory / name
    qemu.write_text(f'#!/bin/sh\nexec /usr/bin/python3 {server} "$@"\n')
    qemu.chmod(0o755)
    kernel = directory / "kernel"
    kernel.write_bytes(b"")
    config = vm_config(make_cell(**DD), _FakeGuest(kernel), options(str(qemu), directory, directory), kernel)
    return Machine(config, directory / f"{name}-log", qmp_timeout_s=2.0)


def test_a_qmp_socket_that_accepts_and_never_greets_ends_the_launch_at_its_deadline(
    qemu_reachable_dir: Path,
) -> None:
    vm = qmp_stand_in(qemu_reachable_dir, "silent-qemu", "time.sleep(3600)\n")
    t0 = time.monotonic()
    with pytest.raises(VMBootError, match="no greeting within 2 s"):
        vm.launch()
    assert time.monotonic() - t0 < 8
    assert vm.returncode is not None  # shut down on the way out


def test_a_qemu_that_aborts_under_the_greeting_says_why_at_once(qemu_reachable_dir: Path) -> None:
    # as QEMU does when KVM refuses its MSRs: the socket closes, the process ends with its reason
    vm = qmp_stand_in(
        qemu_reachable_dir,
        "aborting-qemu",
        "conn.close()\nprint('qemu: kvm_buf_set_msrs: Assertion failed.', file=sys.stderr)\nsys.exit(134)\n",
    )
    t0 = time.monotonic()
    with pytest.raises(VMBootError) as caught:
        vm.launch()
    assert time.monotonic() - t0 < 5
    assert "no greeting" not in caught.value.message
    assert "QEMU exited with 134: qemu: kvm_buf_set_msrs: Assertion failed." in caught.value.message


class _FakeGuest:
    def __init__(self, kernel: Path) -> None:
        self.kernel = kernel
        self.initrd = kernel
        self.payloads: dict[str, Path] = {}
        self.tools: Path | None = None
        self.recipe_hash = "x"
        self.kernel_version = "x"
