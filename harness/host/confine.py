"""QEMU and qemu-img confined: an unprivileged account, the full seccomp sandbox, only their files.

A pull request brings what QEMU is given (policy, recipe, the guest), so QEMU is treated as
hostile. When the harness runs as root, QEMU and qemu-img are *started* as the system account
:data:`ACCOUNT` (``scripts/setup.sh`` creates it, a member of ``kvm``): every path they open by
name is checked against that account, so ``/etc/shadow`` or ``/dev/sda`` stay closed whatever
reached the command line (``-runas`` would not do: QEMU drops privileges only after it has
opened its files).

The files they must use live where the account cannot reach; the harness opens exactly those
itself and hands them over as inherited descriptors (``/proc/self/fd/N`` on the command line).
Files QEMU writes (the disk under test, the logs) are given to the account first; the read-only
inputs stay root's.

Every process started as another account gets a build's limits too (:func:`limit_account`, in
the child after the switch, before exec): ``no_new_privs``, at most :data:`NPROC` processes, and
a seccomp filter that refuses :data:`HELD_CALLS` (EPERM) to it and everything it starts, so its
CPUs and priorities stay what the harness set from outside, whatever binary runs. Where this
machine has no such filter, the record says so (:func:`held_problem`).

Run as any other user, the processes run as that user, with the same sandbox, and paths are
passed as they are.
"""

from __future__ import annotations

import ctypes
import functools
import grp
import os
import platform
import pwd
import resource
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InfraError

#: The system account QEMU and qemu-img run as when the harness runs as root.
ACCOUNT = "diskbench"
#: Groups of the account that QEMU needs (``/dev/kvm``), when they exist.
DEVICE_GROUPS = ("kvm",)
#: QEMU's seccomp filter with every optional deny: no obsolete syscalls, no setuid and
#: friends, no fork/exec, no scheduler or affinity changes.
SANDBOX = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"
SETUP_HINT = "run scripts/setup.sh as root (it creates the account)"
#: processes (threads too: the kernel counts tasks) one account may have at once, as a build's
NPROC = 4096
#: what a process started as another account may not do, to itself or to any process of its uid:
#: move to other CPUs, change its scheduling class, its nice or its IO priority
HELD_CALLS = (
    "sched_setaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "setpriority",
    "ioprio_set",
)
#: per machine (``uname -m``): the seccomp architecture and the numbers of :data:`HELD_CALLS`
SYSCALLS = {
    "x86_64": (0xC000003E, (203, 144, 142, 314, 141, 251)),
    "aarch64": (0xC00000B7, (122, 119, 118, 274, 140, 30)),
}
#: the exit status of a child whose limits could not be set (it never runs its binary)
LIMITS_FAILED = 126
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


@dataclass(frozen=True)
class Account:
    """Who QEMU and qemu-img run as."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    @property
    def switches(self) -> bool:
        """True when the harness starts its children as another user (it runs as root)."""
        return self.uid != os.geteuid()

    def popen_kwargs(self, before_exec: Callable[[], None] | None = None) -> dict[str, Any]:
        """``subprocess`` arguments that start a child as this account, with its limits
        (:func:`limit_account`); none if it is us.  ``before_exec`` runs in the child first, while
        it may still choose its CPUs (:data:`HELD_CALLS` are refused after)."""
        if not self.switches:
            return {} if before_exec is None else {"preexec_fn": before_exec}
        _libc()  # loaded here: the child only calls it
        return {
            "user": self.uid,
            "group": self.gid,
            "extra_groups": list(self.groups),
            "preexec_fn": functools.partial(limit_account, before_exec, held_program()),
        }

    def as_dict(self) -> dict[str, Any]:
        """What a record says of the confinement."""
        found = {
            "user": self.name,
            "uid": self.uid,
            "runs": ["qemu-system", "qemu-img", "qemu-io"],
            "sandbox": SANDBOX,
        }
        if self.switches:
            problem = held_problem()
            found["limits"] = {
                "no_new_privs": True,
                "nproc": NPROC,
                "held": "no: " + problem if problem else ", ".join(HELD_CALLS),
            }
        return found


def account(runs_as: int | None = None) -> Account:
    """The account for QEMU and qemu-img: :data:`ACCOUNT` when we are root, else ourselves.

    ``runs_as`` (a side's :attr:`~harness.subject.binaries.Binaries.runs_as`) is a uid of that
    side's own instead of :data:`ACCOUNT`, with the device groups; it cannot be root's.  Root
    without the account is an infrastructure error naming the fix: the harness never runs QEMU as
    root.
    """
    if os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid())
        return Account(me.pw_name, me.pw_uid, os.getegid(), tuple(os.getgroups()))
    if runs_as is not None:
        if runs_as == 0:
            raise InfraError("a side's QEMU account has uid 0: it must be unprivileged")
        return Account(f"uid {runs_as}", runs_as, runs_as, _device_groups())
    try:
        entry = pwd.getpwnam(ACCOUNT)
    except KeyError:
        raise InfraError(
            f"the harness runs as root but the system account {ACCOUNT!r} for QEMU does not exist: "
            f"{SETUP_HINT}"
        ) from None
    if entry.pw_uid == 0:
        raise InfraError(f"the account {ACCOUNT!r} has uid 0: it must be unprivileged; {SETUP_HINT}")
    groups = []
    for name in DEVICE_GROUPS:
        try:
            group = grp.getgrnam(name)
        except KeyError:
            continue
        if ACCOUNT in group.gr_mem or group.gr_gid == entry.pw_gid:
            groups.append(group.gr_gid)
    return Account(ACCOUNT, entry.pw_uid, entry.pw_gid, tuple(groups))


def held_filter(arch: int, numbers: tuple[int, ...]) -> bytes:
    """The seccomp program (classic BPF, ``struct sock_filter`` after ``struct sock_filter``) that
    answers EPERM to the calls ``numbers`` of ``arch``, to every call of another ABI (i386's
    ``int 0x80``, x32's numbers) and lets all others through (pure)."""
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    body = [(jge, 0x40000000), *((jeq, n) for n in numbers)]
    count = 5 + len(body)  # ld arch, jeq arch, ld nr, the body, allow, deny (the last)
    code: list[tuple[int, int, int, int]] = [(ld_abs, 0, 0, 4)]
    code.append((jeq, 0, count - 2 - len(code), arch))  # another ABI: to deny
    code.append((ld_abs, 0, 0, 0))
    for op, k in body:
        code.append((op, count - 2 - len(code), 0, k))
    code += [(ret, 0, 0, allow), (ret, 0, 0, eperm)]
    return b"".join(
        op.to_bytes(2, "little") + bytes((jt, jf)) + k.to_bytes(4, "little") for op, jt, jf, k in code
    )


def held_problem() -> str | None:
    """Why processes started as another account cannot be held to their CPUs and priorities here,
    or None (they are)."""
    if platform.machine() not in SYSCALLS:
        return f"no seccomp filter for {platform.machine() or 'this machine'} (only {', '.join(SYSCALLS)})"
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            if not any(line.startswith("Seccomp:") for line in fh):
                return "the kernel has no seccomp (CONFIG_SECCOMP)"
    except OSError as exc:
        return f"cannot read /proc/self/status: {exc.strerror}"
    return None


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.cache
def held_program() -> tuple[_SockFprog, ctypes.Array[ctypes.c_char]] | None:
    """:func:`held_filter` for this machine, ready for ``prctl`` (built in the harness, before a
    fork); None where :func:`held_problem` says why not."""
    if held_problem() is not None:
        return None
    arch, numbers = SYSCALLS[platform.machine()]
    code = held_filter(arch, numbers)
    buffer = ctypes.create_string_buffer(code, len(code))
    return _SockFprog(len(code) // 8, ctypes.addressof(buffer)), buffer


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def limit_account(
    before_exec: Callable[[], None] | None,
    program: tuple[_SockFprog, ctypes.Array[ctypes.c_char]] | None,
) -> None:
    """In a child after the switch to its account, before exec: ``before_exec`` (where given),
    then ``no_new_privs``, at most :data:`NPROC` processes, and ``program`` (:func:`held_program`,
    None: no filter here).  A limit that cannot be set ends the child with :data:`LIMITS_FAILED`
    and a line on its stderr: its binary never runs unlimited."""
    if before_exec is not None:
        before_exec()
    libc = _libc()
    if libc.prctl(
        PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
    ):
        _limits_failed("no_new_privs", ctypes.get_errno())
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    cap = NPROC if hard == resource.RLIM_INFINITY else min(NPROC, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
    except OSError as exc:
        _limits_failed("the process limit", exc.errno or 0)
    if program is not None:
        prog, _buffer = program
        if libc.prctl(
            PR_SET_SECCOMP,
            ctypes.c_ulong(SECCOMP_MODE_FILTER),
            ctypes.byref(prog),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        ):
            _limits_failed("the seccomp filter on " + ", ".join(HELD_CALLS), ctypes.get_errno())


def _limits_failed(what: str, errno: int) -> None:
    os.write(2, f"diskbench: cannot set {what} before exec ({os.strerror(errno)})\n".encode())
    os._exit(LIMITS_FAILED)


def _device_groups() -> tuple[int, ...]:
    """The gids of :data:`DEVICE_GROUPS` that exist: what a side's own uid gets for ``/dev/kvm``."""
    gids = []
    for name in DEVICE_GROUPS:
        try:
            gids.append(grp.getgrnam(name).gr_gid)
        except KeyError:
            continue
    return tuple(gids)


def as_account(runs_as: int | None = None) -> dict[str, Any]:
    """``subprocess`` arguments that start a child as :func:`account` (none when that is us): for
    what a pull request built or named, such as ``qemu-img --version`` or a gate's build command."""
    return account(runs_as).popen_kwargs()


def give_tree(path: Path, acct: Account) -> None:
    """Make the tree at ``path`` (a checkout its build writes into) the account's; nothing when the
    account is us.  Symlinks are changed themselves, never followed."""
    if not acct.switches:
        return
    os.chown(path, acct.uid, acct.gid, follow_symlinks=False)
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.chown(os.path.join(root, name), acct.uid, acct.gid, follow_symlinks=False)


def device_problem(path: str, acct: Account) -> str | None:
    """Why ``acct`` cannot open the device ``path`` read-write (``/dev/kvm``), or None."""
    if not acct.switches:
        return None
    st = os.stat(path)
    mode = st.st_mode
    if (
        mode & 0o006 == 0o006
        or (st.st_uid == acct.uid and mode & 0o600 == 0o600)
        or ((st.st_gid == acct.gid or st.st_gid in acct.groups) and mode & 0o060 == 0o060)
    ):
        return None
    return (
        f"{path} cannot be opened by {acct.name}, which runs QEMU (mode {mode & 0o777:o}, group "
        f"{st.st_gid}): make it group kvm, mode 660, and the account a member of kvm ({SETUP_HINT})"
    )


def reach_problem(path: Path, acct: Account) -> str | None:
    """Why ``acct`` cannot reach ``path`` by name (a directory on the way it may not search), or
    None; nothing when the account is us."""
    if not acct.switches:
        return None
    current = Path("/")
    for part in path.resolve().parts[1:-1] if path.is_file() else path.resolve().parts[1:]:
        current = current / part
        st = current.stat()
        if st.st_uid == acct.uid:
            ok = bool(st.st_mode & 0o100)
        elif st.st_gid == acct.gid or st.st_gid in acct.groups:
            ok = bool(st.st_mode & 0o010)
        else:
            ok = bool(st.st_mode & 0o001)
        if not ok:
            return (
                f"{current} (mode {st.st_mode & 0o777:o}) cannot be searched by {acct.name}, which runs "
                f"QEMU, so {path} is out of its reach"
            )
    return None


def describe(runs_as: int | None = None) -> dict[str, Any]:
    """The record's line on who ran QEMU and qemu-img (never raises: a record is written anyway)."""
    try:
        return account(runs_as).as_dict()
    except InfraError as exc:
        return {"user": None, "error": exc.message, "sandbox": SANDBOX}


@dataclass
class Handoff:
    """Files handed to one confined process as inherited descriptors.

    ``with Handoff(acct) as h: argv = [..., h.read(kernel), h.write(image)]``,
    then start the process with ``h.popen_kwargs()``; the descriptors are
    closed when the block ends (the child keeps its own copies).
    """

    account: Account
    _fds: list[int] = field(default_factory=list)
    _fdsets: list[tuple[int, str]] = field(default_factory=list)

    def read(self, path: Path) -> str:
        """A name the process can open ``path`` by, for reading."""
        return self._pass(path, os.O_RDONLY)

    def write(self, path: Path, *, create: bool = False) -> str:
        """A name the process can open ``path`` by, for reading and writing.

        ``create`` makes a new file (it must not exist) and gives it to the
        account, so that qemu-img can create the image in it. An existing file
        is never given away: the account must own it already (an image that
        qemu-img created), or QEMU's open fails.
        """
        if create and self.account.switches:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise InfraError(f"cannot create {path} for {self.account.name}: {exc.strerror}") from None
            try:
                os.fchown(fd, self.account.uid, self.account.gid)
            finally:
                os.close(fd)
        return self._pass(path, os.O_RDWR)

    def output(self, path: Path) -> str:
        """A name QEMU writes ``path`` by (a log), without giving the file away.

        The descriptor goes into a QEMU fd set (:meth:`qemu_args`), which QEMU
        duplicates instead of opening a path: the file stays the harness's.
        """
        if not self.account.switches:
            return str(path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise InfraError(f"cannot open {path} for {self.account.name}: {exc.strerror}") from None
        self._fds.append(fd)
        self._fdsets.append((fd, str(path)))
        return f"/dev/fdset/{len(self._fdsets)}"

    def qemu_args(self) -> list[str]:
        """The ``-add-fd`` options for :meth:`output`'s fd sets."""
        args = []
        for index, (fd, path) in enumerate(self._fdsets, 1):
            # opaque: the file's name, for QMP query-fdsets and for whoever reads the argv
            args += ["-add-fd", f"fd={fd},set={index},opaque={path.replace(',', ',,')}"]
        return args

    def directory(self, path: Path) -> Path:
        """A private directory the process creates files in (a QMP socket): given to the account."""
        if self.account.switches:
            os.chown(path, self.account.uid, self.account.gid, follow_symlinks=False)
        return path

    def _pass(self, path: Path, flags: int) -> str:
        if not self.account.switches:
            return str(path)
        # O_NOFOLLOW: the harness itself never follows a symlink put where a file should be
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise InfraError(f"cannot open {path} for {self.account.name}: {exc.strerror}") from None
        self._fds.append(fd)
        return f"/proc/self/fd/{fd}"

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self._fds)

    def popen_kwargs(self, before_exec: Callable[[], None] | None = None) -> dict[str, Any]:
        """``subprocess`` arguments: the account and its limits (``before_exec`` runs first, see
        :meth:`Account.popen_kwargs`), and the descriptors to inherit."""
        return {**self.account.popen_kwargs(before_exec), "pass_fds": self.pass_fds}

    def close(self) -> None:
        self._fdsets.clear()
        while self._fds:
            os.close(self._fds.pop())

    def __enter__(self) -> Handoff:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
