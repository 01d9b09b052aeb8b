"""A gate's two sides run their QEMU, qemu-img and qemu-io as two accounts: head's cannot signal or
write base's while both run.

Head's "qemu-img" here is a pull request's: a script that finds base's running qemu-img by its
command line and tries ``kill -0``, ``kill -STOP`` and a write into base's image.  Run as the
gate runs head (a uid of its own, :func:`harness.host.accounts.side_account`), each is refused;
run as the one shared QEMU account, each succeeds (the check below that the attack can work).
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from harness.host import accounts, confine
from harness.sample import images
from harness.spec import make_cell
from harness.subject.binaries import Binaries

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="accounts switch only when the harness runs as root"
)

BASE_RUNS_S = 8

HEAD_ATTACK = """#!/bin/sh
report={report}
pid=
for f in /proc/[0-9]*/cmdline; do
  if tr '\\0' ' ' < "$f" 2>/dev/null | grep -q '{base_bin}'; then pid=${{f#/proc/}}; pid=${{pid%/cmdline}}; fi
done
[ -n "$pid" ] || {{ echo "found=no" >> "$report"; exit 0; }}
echo "found=yes" >> "$report"
kill -0 "$pid" 2>/dev/null; echo "signal=$?" >> "$report"
kill -0 "$pid" 2>&1 | grep -q 'not permitted' && echo "eperm=yes" >> "$report"
kill -STOP "$pid" 2>/dev/null; echo "stop=$?" >> "$report"
kill -CONT "$pid" 2>/dev/null
( printf TAMPERED >> {base_image} ) 2>/dev/null; echo "write=$?" >> "$report"
"""


def script(path: Path, body: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o755)
    path.write_text(body)
    path.chmod(0o755)
    return str(path)


def attack(shared: Path, head: Binaries) -> dict[str, str]:
    """Base's qemu-img runs (creating base's image, then holding on), head's attacks it meanwhile;
    what head's attack reported."""
    spec = make_cell(format="raw", workload="dd", size="1G").image
    base_image = shared / "work" / "base.raw"
    report = shared / "report"
    report.write_text("")
    report.chmod(0o666)
    base_bin = script(shared / "base" / "qemu-img", f"#!/bin/sh\nsleep {BASE_RUNS_S}\n")
    base = Binaries(qemu="/bin/false", qemu_img=base_bin)
    head_bin = script(
        shared / "head" / "qemu-img",
        HEAD_ATTACK.format(report=report, base_bin=base_bin, base_image=base_image),
    )
    head = replace(head, qemu_img=head_bin)
    failures: list[BaseException] = []

    def run_base() -> None:
        try:
            images.create(base_image, spec, qemu_img=base.qemu_img, runs_as=base.runs_as)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failures.append(exc)

    thread = threading.Thread(target=run_base)
    thread.start()
    try:
        # base is running (its script sleeps): head's "qemu-img" goes after it, as a pair's would
        for _ in range(100):
            if base_image.exists() and any(
                base_bin.encode() in _cmdline(p)
                for p in accounts.uid_processes(confine.account(base.runs_as).uid)
            ):
                break
            threading.Event().wait(0.05)
        images.create(shared / "work" / "head.raw", spec, qemu_img=head.qemu_img, runs_as=head.runs_as)
    finally:
        thread.join()
    assert not failures, failures
    assert base_image.stat().st_uid == confine.account(base.runs_as).uid
    found = dict(line.split("=", 1) for line in report.read_text().split())
    found["base_image"] = base_image.read_bytes().decode(errors="replace")
    return found


def _cmdline(pid: int) -> bytes:
    """A process's command line; empty when it ended since it was listed (the account's other
    processes, a shell's short-lived children, come and go)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def test_head_as_its_own_account_cannot_signal_stop_or_write_base_while_both_run(shared: Path) -> None:
    with accounts.side_account() as head_uid:
        assert head_uid is not None and head_uid != confine.account().uid
        found = attack(shared, Binaries(qemu="/bin/false", qemu_img="", runs_as=head_uid))
    assert found["found"] == "yes", "head's script saw base's qemu-img in /proc"
    # kill fails (EPERM: another uid) for both signals; the shell cannot open base's image for
    # appending (EACCES: it is base's account's, 0644), which sh reports as status 2
    assert (found["signal"], found["stop"], found["write"]) == ("1", "1", "2"), found
    assert found.get("eperm") == "yes", "kill said: Operation not permitted (base was running)"
    assert found["base_image"] == "", "base's image is as base's qemu-img left it"


def test_the_attack_succeeds_where_both_sides_share_one_account(shared: Path) -> None:
    """The check that the test above can fail: with head as base's account (one shared account for
    both sides, as before), the very same script signals, stops and writes base."""
    found = attack(shared, Binaries(qemu="/bin/false", qemu_img=""))
    assert (found["found"], found["signal"], found["stop"], found["write"]) == ("yes", "0", "0", "0"), found
    assert found["base_image"] == "TAMPERED"


def test_a_side_account_is_ended_with_what_it_left_running(shared: Path) -> None:
    """What head's binaries leave behind (a detached process) does not outlive the gate."""
    with accounts.side_account() as head_uid:
        assert head_uid is not None
        leaver = script(
            shared / "head" / "qemu-img", "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\n"
        )
        images.create(shared / "work" / "head.raw", make_cell(format="raw", workload="dd", size="1G").image,
                      qemu_img=leaver, runs_as=head_uid)  # fmt: skip
        assert accounts.uid_processes(head_uid), "the detached sleep runs as head's account"
    assert not accounts.uid_processes(head_uid)
