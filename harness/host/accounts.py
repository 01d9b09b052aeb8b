"""Accounts of their own for what a pull request builds: a fresh uid per build, ended whole.

A gate builds base and head (a bisection each commit) with a build command
that is the pull request's code.  Run as one shared account, head's build
could rewrite base's QEMU, and what a build left running (``setsid sleep``)
outlived the gate.  So, when the harness runs as root, every build runs as a
**fresh uid** of its own (:func:`fresh_account`: no passwd entry, no process,
drawn from :data:`FRESH_UIDS`), with its own group of the same number, no
supplementary group, ``no_new_privs`` (a setuid program it runs gains
nothing) and a cap on its processes.  When the build ends, however it ends,
:func:`end_account` kills every process of that uid (``kill(-1, SIGKILL)``
sent *as* that uid: the kernel signals all its processes at once, whatever
session or process group they moved to) and checks that none is left; then
what it left that outlives processes is removed (:func:`sweep_leftovers`):
its System V shared memory, semaphores and message queues, its POSIX message
queues, and its files at any depth under :data:`SHARED_DIRS` (the places
every account may write).  Its tree is then sealed (:func:`seal_tree`):
root's, and read-only to everyone.

Run as any other user (a developer's own account), nothing can switch: the
build runs as that user, and what it leaves running is not told apart from
the user's own processes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import pwd
import resource
import secrets
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import CommandError, InfraError
from harness.host import confine, proc

logger = logging.getLogger(__name__)

#: the uids builds are drawn from: far above any system or login account, and above the
#: subordinate ranges user namespaces get by default (100000 + 65536 x n)
FRESH_UIDS = range(1_900_000_000, 2_000_000_000)
#: processes a build may have at once (RLIMIT_NPROC counts the uid's own, a fresh uid has no others)
BUILD_NPROC = confine.NPROC
#: how long :func:`end_account` keeps killing before it gives up
END_WAIT_S = 10.0
#: the directories every account may write in (world-writable, sticky), swept at every depth of
#: an ended account's files (their world-writable subdirectories included), never past a mount
SHARED_DIRS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run/lock"))
#: System V IPC objects: ``/proc/sysvipc`` table -> (id column, ``ipcrm`` option)
SYSV_IPC = {"shm": ("shmid", "-m"), "sem": ("semid", "-s"), "msg": ("msqid", "-q")}
#: where POSIX message queues are listed when the host mounts them (else a private mount is made)
MQUEUE = Path("/dev/mqueue")
#: how long one sweep (``find`` over one directory) may take
SWEEP_TIMEOUT_S = 120.0
PR_SET_NO_NEW_PRIVS = 38
#: procps' kill, which the account runs to send ``kill(-1, SIGKILL)`` (it cannot run the harness's Python)
KILL = "/bin/kill"


@dataclass(frozen=True)
class BuildAccount:
    """Who a build ran as: a fresh uid (``fresh``), or the harness's own user."""

    uid: int
    gid: int
    fresh: bool

    @property
    def name(self) -> str:
        return (
            f"uid {self.uid} (fresh, for this build alone)" if self.fresh else f"uid {self.uid} (this user)"
        )

    def popen_kwargs(self) -> dict[str, Any]:
        """``subprocess`` arguments: the account (when fresh), a session of its own, the limits."""
        kwargs: dict[str, Any] = {"start_new_session": True, "preexec_fn": _limit_build}
        if self.fresh:
            kwargs.update(user=self.uid, group=self.gid, extra_groups=[])
        return kwargs

    def as_dict(self) -> dict[str, Any]:
        return {"uid": self.uid, "fresh": self.fresh, "sealed": True}


def _limit_build() -> None:
    """In the build's child, after the switch: no privilege gained through exec, a cap on processes,
    files others can read (the QEMU account runs what it builds)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() != 0:
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        cap = BUILD_NPROC if hard == resource.RLIM_INFINITY else min(BUILD_NPROC, hard)
        if soft == resource.RLIM_INFINITY or soft > cap:
            resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
    os.umask(0o022)


def uid_processes(uid: int) -> list[int]:
    """The live pids whose real, effective, saved or file-system uid is ``uid`` (a zombie, dead and
    waiting for its parent to reap it, runs nothing and is not counted)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            with open(entry / "status", encoding="ascii", errors="replace") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue  # gone meanwhile
        state = fields.get("State", "").split()
        if state and state[0] in ("Z", "X"):
            continue
        if str(uid) in fields.get("Uid", "").split():
            found.append(int(entry.name))
    return found


def fresh_account() -> BuildAccount:
    """A uid of its own for one build when we are root (none in passwd, no process); else ourselves."""
    if os.geteuid() != 0:
        return BuildAccount(os.geteuid(), os.getegid(), fresh=False)
    for _ in range(64):
        uid = FRESH_UIDS.start + secrets.randbelow(len(FRESH_UIDS))
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        if not uid_processes(uid):
            return BuildAccount(uid, uid, fresh=True)
    raise InfraError("no free uid for a build account: every one drawn is in use")


@contextmanager
def side_account() -> Iterator[int | None]:
    """A fresh uid for one side of a gate (head's QEMU, qemu-img and qemu-io), for as long as the
    block lasts, ended as a build's is (:func:`end_account`) when it ends: the value of
    :attr:`harness.subject.binaries.Binaries.runs_as`.  None when we are not root (nothing can
    switch: the side runs as this user)."""
    account = fresh_account()
    try:
        yield account.uid if account.fresh else None
    finally:
        end_account(account)


def end_account(account: BuildAccount, *, wait_s: float = END_WAIT_S, keep: Sequence[Path] = ()) -> int:
    """Kill every process of ``account``, check that none is left, remove what it left that outlives
    processes (:func:`sweep_leftovers`, sparing the trees in ``keep``: a build's checkout, sealed
    after); the number of processes found (nothing when it is not fresh).

    Raises :class:`~harness.errors.InfraError` when processes survive ``wait_s`` of killing."""
    if not account.fresh:
        return 0
    killed = 0
    deadline = time.monotonic() + wait_s
    while True:
        left = uid_processes(account.uid)
        if not left:
            break
        killed = max(killed, len(left))
        if time.monotonic() > deadline:
            raise InfraError(
                f"{len(left)} process(es) of the build account {account.name} survive being killed "
                f"(pids {', '.join(map(str, left[:5]))}): the runner is not clean, stop it"
            )
        _kill_all_as(account)
        time.sleep(0.05)
    sweep_leftovers(account.uid, keep=keep)
    return killed


def _kill_all_as(account: BuildAccount) -> None:
    """``kill(-1, SIGKILL)`` from a process of ``account``: every process that uid may signal,
    which is every process of that uid (and no other: it is fresh), the sender spared."""
    proc.run(
        [KILL, "-9", "-1"],
        timeout_s=30,
        check=False,
        confined={"user": account.uid, "group": account.gid, "extra_groups": []},
    )


def sweep_leftovers(uid: int, *, keep: Sequence[Path] = ()) -> list[str]:
    """Remove what ``uid`` (a fresh account with no process left) owns that outlives processes: its
    System V IPC objects (owner or creator), its POSIX message queues, its files and directories at
    any depth under :data:`SHARED_DIRS`, but those in the trees ``keep``.  Links are removed, never
    followed; nothing of another uid is touched (a directory of ``uid`` that holds another's file
    stays).  What could not be swept, one line each (logged as warnings)."""
    kept = tuple(os.path.realpath(path) for path in keep)
    steps: list[Callable[[int], list[str]]] = [
        _remove_sysv_ipc,
        _remove_mqueues,
        *(functools.partial(_remove_files, top, keep=kept) for top in SHARED_DIRS),
    ]
    found = []
    for step in steps:
        try:
            found += step(uid)
        except CommandError as exc:  # a tool missing or stuck: the other steps still run
            found.append(exc.message)
    for problem in found:
        logger.warning("account uid %d: %s", uid, problem)
    return found


def sysv_ipc_of(uid: int, proc_dir: Path = Path("/proc/sysvipc")) -> list[tuple[str, int]]:
    """The System V IPC objects ``uid`` owns or created: (``shm``/``sem``/``msg``, id)."""
    found = []
    for table, (id_column, _) in SYSV_IPC.items():
        try:
            lines = (proc_dir / table).read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        for line in lines[1:]:
            row = dict(zip(header, line.split(), strict=False))
            if str(uid) in (row.get("uid"), row.get("cuid")) and row.get(id_column, "").isdigit():
                found.append((table, int(row[id_column])))
    return found


def _remove_sysv_ipc(uid: int) -> list[str]:
    problems = []
    for table, ident in sysv_ipc_of(uid):
        result = proc.run(["ipcrm", SYSV_IPC[table][1], str(ident)], timeout_s=30, check=False)
        if not result.ok and "invalid" not in result.stderr:  # gone meanwhile is no failure
            problems.append(f"System V {table} {ident} not removed: {result.stderr.strip()}")
    return problems


def _remove_mqueues(uid: int) -> list[str]:
    """The POSIX message queues of ``uid``: through ``/dev/mqueue`` where the host mounts it, else
    through a private mount of the queues' file system (a mount namespace of its own, gone after)."""
    find = ["find", "-mindepth", "1", "-maxdepth", "1", "-uid", str(uid), "-delete"]
    if os.path.ismount(MQUEUE):
        argv = [find[0], str(MQUEUE), *find[1:]]
    else:
        script = 'mount -t mqueue mqueue "$1" && shift && exec "$@"'
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", "/tmp",
                find[0], "/tmp", *find[1:]]  # fmt: skip
    result = proc.run(argv, timeout_s=SWEEP_TIMEOUT_S, check=False)
    return [] if result.ok else [f"POSIX message queues not swept: {result.stderr.strip()[-200:]}"]


def _remove_files(top: Path, uid: int, *, keep: Sequence[str] = ()) -> list[str]:
    """``uid``'s files and directories under ``top`` at any depth (``find -xdev -depth -delete``:
    it walks by descriptor, removes an entry itself, never what a link points to, and stays on
    ``top``'s file system), but those in the trees ``keep`` (resolved paths); a directory that
    still holds another's file stays."""
    if not top.is_dir() or top.is_symlink():
        return []
    spared = []
    for path in keep:
        spared += ["!", "-path", _glob_literal(path), "!", "-path", _glob_literal(path) + "/*"]
    result = proc.run(
        ["find", str(top), "-xdev", "-mindepth", "1", "-depth", "-uid", str(uid), *spared, "-delete"],
        timeout_s=SWEEP_TIMEOUT_S,
        check=False,
    )
    if result.ok:
        return []
    # a directory of the uid that holds another's file cannot be removed, by design; anything else
    # is reported
    other = [line for line in result.stderr.splitlines() if "Directory not empty" not in line]
    return [f"{top} not swept: {other[0][-200:]}"] if other else []


def _glob_literal(path: str) -> str:
    """``path`` as a ``find -path`` pattern that matches it alone (its ``*?[\\`` escaped)."""
    return "".join(f"\\{c}" if c in "*?[\\" else c for c in path)


def give_tree(path: Path, account: BuildAccount) -> None:
    """Make the tree at ``path`` (the checkout a build writes into) ``account``'s; symlinks are
    changed themselves, never followed.  Nothing when the account is not fresh."""
    if account.fresh:
        _walk(path, lambda full, _st: os.chown(full, account.uid, account.gid, follow_symlinks=False))


def seal_tree(path: Path) -> None:
    """After its build: the tree at ``path`` is root's and read-only to everyone (when we are root;
    else its owner keeps the write bit, to remove it), readable and, where it was, executable by all
    (the QEMU account runs what was built)."""
    root = os.geteuid() == 0

    def seal(full: str, st: os.stat_result) -> None:
        if stat.S_ISLNK(st.st_mode):
            if root:
                os.chown(full, 0, 0, follow_symlinks=False)
            return
        if root:
            os.chown(full, 0, 0, follow_symlinks=False)
        # no write bit (root's own too, where we are root), no setuid, setgid or sticky
        mode = stat.S_IMODE(st.st_mode) & ~(0o7222 if root else 0o7022)
        if mode & 0o400:
            mode |= 0o044
        if mode & 0o100:
            mode |= 0o011
        os.chmod(full, mode)

    _walk(path, seal)


def _walk(path: Path, action: Callable[[str, os.stat_result], None]) -> None:
    action(str(path), path.lstat())
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            full = os.path.join(root, name)
            action(full, os.lstat(full))
