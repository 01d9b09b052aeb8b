"""QEMU and qemu-img confined: an unprivileged account, the full seccomp sandbox, only their files.

A pull request brings what QEMU is given (policy, recipe, the guest), so QEMU
is treated as hostile. When the harness runs as root (CI, self-hosted
runners), QEMU and qemu-img are *started* as the system account
:data:`ACCOUNT` (``scripts/setup.sh`` creates it, a member of ``kvm`` for
``/dev/kvm``): every path they open by name is checked against that account,
so ``/etc/shadow``, ``/dev/sda`` or ``/proc/1/mem`` stay closed whatever
reached the command line. (``-runas`` would not do: QEMU drops privileges
only after it has opened its files.)

The files they must use live in places the account cannot reach (the guest
build under ``/root/.cache``, logs and images under the caller's directories).
The harness opens exactly those files itself and hands them over as inherited
descriptors, named ``/proc/self/fd/N`` on the command line; opening that name
again checks only the file's own permissions, not its directories'. Files
QEMU writes (the disk under test, the console and report logs) are given to
the account first; the read-only inputs stay root's.

Run as any other user (a developer's own account), nothing changes: the
processes run as that user, with the same sandbox, and paths are passed as
they are.
"""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
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

    def popen_kwargs(self) -> dict[str, Any]:
        """``subprocess`` arguments that start a child as this account (none if it is us)."""
        if not self.switches:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def as_dict(self) -> dict[str, Any]:
        """What a record says of the confinement."""
        return {
            "user": self.name,
            "uid": self.uid,
            "runs": ["qemu-system", "qemu-img", "qemu-io"],
            "sandbox": SANDBOX,
        }


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

    def popen_kwargs(self) -> dict[str, Any]:
        """``subprocess`` arguments: the account, and the descriptors to inherit."""
        return {**self.account.popen_kwargs(), "pass_fds": self.pass_fds}

    def close(self) -> None:
        self._fdsets.clear()
        while self._fds:
            os.close(self._fds.pop())

    def __enter__(self) -> Handoff:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
