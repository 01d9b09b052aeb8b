"""Who QEMU runs as, and how its files are handed over (harness.host.confine)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.errors import InfraError
from harness.host import confine

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def other() -> confine.Account:
    """An unprivileged account to hand files to (the real one when root)."""
    return confine.account()


def test_the_sandbox_denies_every_optional_class() -> None:
    parts = dict(p.partition("=")[::2] for p in confine.SANDBOX.split(",")[1:])
    assert confine.SANDBOX.startswith("on,")
    assert parts == {k: "deny" for k in ("obsolete", "elevateprivileges", "spawn", "resourcecontrol")}


def test_as_ourselves_nothing_changes(tmp_path: Path) -> None:
    me = confine.Account("me", os.geteuid(), os.getegid())
    assert not me.switches and me.popen_kwargs() == {}
    with confine.Handoff(me) as handoff:
        assert handoff.read(tmp_path / "k") == str(tmp_path / "k")
        assert handoff.output(tmp_path / "log") == str(tmp_path / "log")
        assert handoff.qemu_args() == [] and handoff.pass_fds == ()


@as_root
def test_root_runs_qemu_as_the_unprivileged_account() -> None:
    account = confine.account()
    assert account.name == confine.ACCOUNT and account.uid != 0 and account.switches
    assert account.popen_kwargs()["user"] == account.uid
    assert confine.describe() == {
        "user": confine.ACCOUNT,
        "uid": account.uid,
        "runs": ["qemu-system", "qemu-img", "qemu-io"],
        "sandbox": confine.SANDBOX,
        "limits": {"no_new_privs": True, "nproc": confine.NPROC, "held": ", ".join(confine.HELD_CALLS)},
    }


@as_root
def test_a_new_file_is_given_to_the_account_an_existing_one_never(tmp_path: Path) -> None:
    account = other()
    existing = tmp_path / "existing"
    existing.write_text("the harness's\n")
    with confine.Handoff(account) as handoff:
        name = handoff.write(tmp_path / "new.qcow2", create=True)
        assert name.startswith("/proc/self/fd/")
        assert (tmp_path / "new.qcow2").stat().st_uid == account.uid
        handoff.write(existing)
        assert existing.stat().st_uid == 0, "an existing file is never given away"
        with pytest.raises(InfraError, match=r"cannot create .*existing for diskbench: File exists"):
            handoff.write(existing, create=True)
        fds = handoff.pass_fds
        assert len(fds) == 2
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


@as_root
def test_a_symlink_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/etc/shadow")
    with confine.Handoff(other()) as handoff:
        for call in (handoff.read, handoff.write, handoff.output):
            with pytest.raises(InfraError, match=r"cannot open .*link for diskbench"):
                call(tmp_path / "link")
        with pytest.raises(InfraError, match="cannot create"):
            handoff.write(tmp_path / "link", create=True)
    assert os.stat("/etc/shadow").st_uid == 0


@as_root
def test_logs_go_to_qemu_as_fd_sets_and_stay_the_harnesss(tmp_path: Path) -> None:
    console, report = tmp_path / "console.log", tmp_path / "report,1.jsonl"
    console.write_bytes(b"")
    report.write_bytes(b"")
    with confine.Handoff(other()) as handoff:
        assert handoff.output(console) == "/dev/fdset/1"
        assert handoff.output(report) == "/dev/fdset/2"
        args = handoff.qemu_args()
        fd1, fd2 = handoff.pass_fds
    assert args == [
        "-add-fd",
        f"fd={fd1},set=1,opaque={console}",
        "-add-fd",
        f"fd={fd2},set=2,opaque={str(report).replace(',', ',,')}",
    ]
    assert console.stat().st_uid == 0


@as_root
def test_a_device_the_account_cannot_open_is_named(tmp_path: Path) -> None:
    account = other()
    dev = tmp_path / "fake-kvm"
    dev.write_bytes(b"")
    os.chmod(dev, 0o600)
    assert "cannot be opened by diskbench" in (confine.device_problem(str(dev), account) or "")
    if account.groups:
        os.chown(dev, 0, account.groups[0])
        os.chmod(dev, 0o660)
        assert confine.device_problem(str(dev), account) is None
    os.chmod(dev, stat.S_IRUSR | stat.S_IWUSR | 0o066)
    assert confine.device_problem(str(dev), account) is None
