"""A side's account gets a build's limits, and nothing of it outlives the account.

Head's QEMU (with ``--build-command``, the pull request's own code) runs as a fresh uid of its own
(:func:`harness.host.accounts.side_account`).  The attacks here are what such a "QEMU" can do as
that uid: leave its pair's CPU for every CPU while root holds it at nice -19 (its children
inheriting both), ignore ``no_new_privs`` and the process cap a build gets, and leave System V
shared memory, semaphores, message queues, POSIX message queues and files in world-writable
places behind when its account is ended.  Real processes of a real uid, real kernel objects.
"""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.host import accounts, confine
from harness.sample import images, pairing, swapper
from harness.spec import make_cell

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="accounts switch only when the harness runs as root"
)

#: a system Python every uid can run (the project's virtual environment may sit where it cannot)
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

#: head's "QEMU": waits for the pair's go, then reports what it is allowed and tries to leave its
#: CPU for every CPU, itself and through a child
WIDEN = """#!/bin/sh
report={report}
while [ ! -e {go} ]; do sleep 0.02; done
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\\t ' >> "$report"
grep 'Max processes' /proc/self/limits | awk '{{print "nproc:" $3}}' >> "$report"
echo "nice:$(ps -o ni= -p $$ | tr -d ' ')" >> "$report"
taskset -a -p -c {every} $$ >/dev/null 2>&1; echo "widen:$?" >> "$report"
sh -c 'taskset -p -c {every} $$ >/dev/null 2>&1; echo "child_widen:$?"' >> "$report"
echo "cpus:$(grep Cpus_allowed_list /proc/self/status | cut -f2)" >> "$report"
renice -n 10 -p $$ >/dev/null 2>&1; echo "renice:$?" >> "$report"
sleep 30
"""


@pytest.fixture
def side_uid() -> Iterator[int]:
    with accounts.side_account() as uid:
        assert uid is not None
        yield uid


def report_of(path: Path) -> dict[str, str]:
    return dict(line.split(":", 1) for line in path.read_text().split())


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="widening needs two CPUs")
@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset")
def test_head_qemu_held_at_nice_19_on_its_cpu_cannot_widen_its_cpus(shared: Path, side_uid: int) -> None:
    every = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    pair_cpu = max(os.sched_getaffinity(0))
    report, go = shared / "report", shared / "go"
    report.write_text("")
    report.chmod(0o666)
    qemu = shared / "qemu-system-x86_64"
    qemu.write_text(WIDEN.format(report=report, go=go, every=every))
    qemu.chmod(0o755)
    # started as the guest sampler starts head's QEMU: its account (with its limits), the pair's CPU
    with confine.Handoff(confine.account(side_uid)) as handoff:
        vm = subprocess.Popen(
            [str(qemu)],
            start_new_session=True,
            **handoff.popen_kwargs(lambda: os.sched_setaffinity(0, (pair_cpu,))),
        )
    try:
        # root raises it for its pair, as pairing does, and its swapper (root) still moves it
        assert pairing.raise_priority(vm.pid, pairing.PAIR_NICE)
        assert swapper.pin_process(vm.pid, pair_cpu), "root moves a held process between the pair's CPUs"
        go.touch()
        deadline = time.monotonic() + 20
        while "renice" not in report.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        found = report_of(report)
    finally:
        vm.kill()
        vm.wait()
    assert found["nice"] == str(pairing.PAIR_NICE), found
    # taskset fails (sched_setaffinity: EPERM), itself and in its -19 child; it stays on the pair's CPU
    assert (found["widen"], found["child_widen"], found["cpus"]) == ("1", "1", str(pair_cpu)), found
    assert found["renice"] == "1", "its priority is the harness's to set"
    # a build's limits: no privilege through exec, the build's process cap, the filter
    assert (found["NoNewPrivs"], found["nproc"]) == ("1", str(accounts.BUILD_NPROC)), found
    assert found["Seccomp"] == "2", "a seccomp filter holds it"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 ABI is x86_64's")
def test_another_abi_cannot_get_past_the_filter(side_uid: int) -> None:
    """The same calls through another ABI's numbers (x32's, bit 30) are refused too: every call of
    another ABI is (i386's ``int 0x80`` has another architecture and is refused the same way)."""
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.syscall(0x40000000 | 203, 0, 8, ctypes.byref(ctypes.c_ulong(1))), ctypes.get_errno())\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, check=True, **confine.as_account(side_uid)
    )
    assert done.stdout.split() == ["-1", "1"], f"x32 sched_setaffinity: EPERM, got {done.stdout!r}"


def test_head_qemu_img_runs_with_the_limits_too(shared: Path, side_uid: int) -> None:
    """qemu-img and qemu-io (through the one subprocess helper) get the same limits as QEMU: a
    process of the uid left unfiltered could move head's QEMU, the same uid, off its CPU."""
    report = shared / "report"
    report.write_text("")
    report.chmod(0o666)
    qemu_img = shared / "qemu-img"
    qemu_img.write_text(
        f"#!/bin/sh\ngrep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\\t ' >> {report}\n"
    )
    qemu_img.chmod(0o755)
    cell = make_cell(format="raw", workload="dd", size="1G")
    images.create(shared / "head.raw", cell.image, qemu_img=str(qemu_img), runs_as=side_uid)
    assert report_of(report) == {"NoNewPrivs": "1", "Seccomp": "2"}


def test_the_record_says_what_holds_a_side() -> None:
    limits = confine.account(accounts.FRESH_UIDS.start).as_dict()["limits"]
    assert limits["no_new_privs"] and limits["nproc"] == confine.NPROC
    problem = confine.held_problem()
    assert limits["held"] == (", ".join(confine.HELD_CALLS) if problem is None else f"no: {problem}")


LEAVE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
# System V: 16 MiB of shared memory (it pins RAM until removed), a semaphore set, a message queue
assert libc.shmget(0, 16 << 20, 0o1600) >= 0, ctypes.get_errno()
assert libc.semget(0, 1, 0o1600) >= 0, ctypes.get_errno()
assert libc.msgget(0, 0o1600) >= 0, ctypes.get_errno()
# a POSIX message queue
libc.mq_open.restype = ctypes.c_int
assert libc.mq_open(b"/{queue}", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0, ctypes.get_errno()
# files in world-writable places, at any depth, a link to root's file among them
open("/run/lock/{token}", "w").write("x")
open("{public}/{token}", "w").write("x")
os.makedirs("/var/tmp/{token}/a/b/c")
open("/var/tmp/{token}/a/b/c/deep", "w").write("x")
os.symlink("{roots}", "/tmp/{token}-link")
os.makedirs("/dev/shm/{token}")
os.chmod("/dev/shm/{token}", 0o777)
"""


def test_what_a_side_leaves_does_not_outlive_its_account() -> None:
    account = accounts.fresh_account()
    assert account.fresh
    token = f"diskbench-leave-{uuid.uuid4().hex[:8]}"
    queue = token
    # a world-writable subdirectory of /tmp (another uid's: root's), and a file of root's that the
    # account links to and puts into its own directory
    public = Path(tempfile.mkdtemp(prefix="diskbench-public-"))
    public.chmod(0o1777)
    roots = public / "roots"
    roots.write_text("root's\n")
    leaves = [
        Path("/run/lock") / token,
        public / token,
        Path("/var/tmp") / token,
        Path("/tmp") / f"{token}-link",
    ]
    try:
        done = subprocess.run(
            [PYTHON, "-c", LEAVE.format(queue=queue, token=token, public=public, roots=roots)],
            capture_output=True,
            text=True,
            user=account.uid,
            group=account.gid,
            extra_groups=[],
            cwd="/",
        )
        assert done.returncode == 0, done.stderr
        root_in_theirs = Path("/dev/shm") / token / "roots-too"
        root_in_theirs.write_text("root's\n")  # another uid's file inside the account's directory
        left = _sysv_ipc_of(account.uid)
        assert sorted(kind for kind, _ in left) == ["msg", "sem", "shm"], left
        assert _mqueue_exists(queue)

        accounts.end_account(account)

        survivors = [f"System V {kind} {ident}" for kind, ident in _sysv_ipc_of(account.uid)]
        survivors += [f"POSIX message queue /{queue}"] if _mqueue_exists(queue) else []
        survivors += [str(p) for p in leaves if os.path.lexists(p)]
        assert survivors == [], "nothing of the account outlives it"
        # another uid's files stay: the link's target, root's file in the account's directory
        assert roots.read_text() == "root's\n" and root_in_theirs.read_text() == "root's\n"
    finally:
        shutil.rmtree(public, ignore_errors=True)
        for path in leaves:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        shutil.rmtree(Path("/dev/shm") / token, ignore_errors=True)
        for kind, ident in _sysv_ipc_of(account.uid):
            subprocess.run(["ipcrm", {"shm": "-m", "sem": "-s", "msg": "-q"}[kind], str(ident)], check=False)
        _mqueue_unlink(queue)


def _sysv_ipc_of(uid: int) -> list[tuple[str, int]]:
    """What ``/proc/sysvipc`` lists of ``uid`` (owner or creator), read here, not by the harness."""
    found = []
    for kind in ("shm", "sem", "msg"):
        header, *rows = (Path("/proc/sysvipc") / kind).read_text().splitlines()
        names = header.split()
        for row in rows:
            fields = dict(zip(names, row.split(), strict=False))
            if str(uid) in (fields["uid"], fields["cuid"]):
                found.append((kind, int(row.split()[1])))
    return found


def _mqueue_exists(name: str) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.mq_open(f"/{name}".encode(), os.O_RDONLY)
    if fd < 0:
        return False
    libc.mq_close(fd)
    return True


def _mqueue_unlink(name: str) -> None:
    ctypes.CDLL(None, use_errno=True).mq_unlink(f"/{name}".encode())
