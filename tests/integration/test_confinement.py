"""QEMU and qemu-img confined: run as the unprivileged account, with the full sandbox, only their files.

As root (CI, runners) the harness starts them as ``diskbench``; these tests
read the running QEMU's ``/proc/PID/status`` and attack it with a backing
file that no parser stopped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ImageError, VMBootError
from harness.host import confine
from harness.record import load_record
from harness.sample import images
from harness.sample.vm import Drive, Machine, VMConfig
from harness.spec import make_cell
from harness.subject.binaries import QEMU, QEMU_IMG

pytestmark = [
    pytest.mark.integration,
    pytest.mark.guest,
    pytest.mark.skipif(os.geteuid() != 0, reason="QEMU changes user only when the harness runs as root"),
]


def status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def test_qemu_runs_as_the_unprivileged_account_with_the_full_sandbox(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    account = confine.account()
    assert account.name == confine.ACCOUNT and account.uid != 0
    disk_dir.mkdir(parents=True, exist_ok=True)
    image = disk_dir / "disk.qcow2"
    images.create(
        image, make_cell(format="qcow2", workload="dd", dd_mib=8, size="256M").image, qemu_img=QEMU_IMG
    )
    assert image.stat().st_uid == account.uid, "qemu-img created the image as the account"
    config = VMConfig(
        qemu=QEMU,
        kernel=guest.kernel,
        initrd=guest.initrd,
        append=["diskbench.workload=sleep"],
        drives=[Drive(node="disk0", path=image, format="qcow2")],
    )
    logs = tmp_path / "logs"
    with Machine(config, logs) as vm:
        vm.wait_event("ready", timeout_s=300, what="ready line")
        assert vm.pid is not None
        st = status(vm.pid)
        ps = subprocess.run(
            ["ps", "-ww", "-o", "user:32=,uid=,args=", "-p", str(vm.pid)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert st["Uid"].split() == [str(account.uid)] * 4, st["Uid"]
    assert st["Gid"].split() == [str(account.gid)] * 4, st["Gid"]
    assert "0" not in st["Groups"].split()
    assert st["CapEff"] == "0000000000000000"
    assert st["Seccomp"] == "2", "a seccomp filter is on"
    assert st["NoNewPrivs"] == "1", "elevateprivileges=deny"
    user, uid, args = ps.split(None, 2)
    assert (user, int(uid)) == (account.name, account.uid)
    assert f"-sandbox {confine.SANDBOX}" in args
    # the logs stay the harness's: QEMU wrote them through descriptors it was given
    console = logs / "console.log"
    assert console.stat().st_uid == 0
    assert "DISKBENCH-READY" in console.read_text(errors="replace")


@pytest.mark.parametrize("hostile", ["/etc/shadow", "/proc/1/environ"])
def test_a_backing_file_that_got_past_the_parser_cannot_be_opened(
    guest: Any, tmp_path: Path, disk_dir: Path, hostile: str
) -> None:
    disk_dir.mkdir(parents=True, exist_ok=True)
    image = disk_dir / "disk.qcow2"
    images.create(
        image, make_cell(format="qcow2", workload="dd", dd_mib=8, size="256M").image, qemu_img=QEMU_IMG
    )
    # the options of the attack, handed to QEMU as if no allowlist existed
    options = (
        ("backing.driver", "raw"),
        ("backing.file.driver", "file"),
        ("backing.file.filename", hostile),
    )
    config = VMConfig(
        qemu=QEMU,
        kernel=guest.kernel,
        initrd=guest.initrd,
        append=["diskbench.workload=sleep"],
        drives=[Drive(node="disk0", path=image, format="qcow2", options=options)],
    )
    with pytest.raises(VMBootError) as caught, Machine(config, tmp_path / "logs") as vm:
        vm.wait_event("ready", timeout_s=300, what="ready line")
    assert f"Could not open '{hostile}': Permission denied" in caught.value.log_tail


def test_the_record_says_who_ran_qemu_and_with_which_sandbox(guest_cells: Callable[..., list[Path]]) -> None:
    cell = make_cell(format="raw", workload="dd", dd_mib=8, size="256M")
    record = load_record(guest_cells([cell])[0])
    assert record.samples[0].status == "ok", record.samples[0].reason
    assert record.vm.get("confinement") == {
        "user": confine.ACCOUNT,
        "uid": confine.account().uid,
        "runs": ["qemu-system", "qemu-img", "qemu-io"],
        "sandbox": confine.SANDBOX,
        "limits": {"no_new_privs": True, "nproc": confine.NPROC, "held": ", ".join(confine.HELD_CALLS)},
    }


def test_qemu_img_runs_as_the_account_too(tmp_path: Path, disk_dir: Path) -> None:
    # a qemu-img only root can reach (under the test's 0700 temp dir): the account cannot run it
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(tmp_path, 0o700)
    qemu_img = private / "qemu-img"
    qemu_img.write_bytes(Path(shutil.which("qemu-img") or "/usr/bin/qemu-img").read_bytes())
    qemu_img.chmod(0o755)
    disk_dir.mkdir(parents=True, exist_ok=True)
    with pytest.raises(ImageError) as caught:
        images.create(disk_dir / "d.raw", make_cell(format="raw", workload="dd", dd_mib=8, size="256M").image,
                      qemu_img=str(qemu_img))  # fmt: skip
    assert f"{qemu_img}: cannot be run (Permission denied)" in caught.value.message
