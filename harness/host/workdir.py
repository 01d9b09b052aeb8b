"""Who owns a directory: one run per results dir and per work dir, and what dead runs left behind.

Two runs writing into the same dirs delete each other's images and
overwrite each other's samples.  Each run takes an exclusive ``flock`` on
``DIR/.diskbench.lock`` for as long as it runs and writes its pid and
command into it, so the run that is refused can name the holder, and
removes the file when it ends.  The kernel drops the lock when its holder
dies, even by SIGKILL: the file such a run leaves names a dead pid, and the
next run takes it over with a note.

A sample's image is named ``CELL_ID.PID.FORMAT``: unique per run, and the
pid tells a stale image (its run is dead) from a live one.  With the work
dir's lock held, stale images, the temp dirs of interrupted probes and the
private dirs (QMP sockets) of dead runs are removed at start.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.errors import InfraError

log = logging.getLogger(__name__)

# the private dirs (QMP sockets) of a QEMU the harness starts: diskbench-vm-PID-...
TMP_PREFIX = "diskbench-vm-"


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_tmp_dirs(root: Path | None = None) -> list[Path]:
    """Remove private dirs (QMP sockets) left by harness processes that died."""
    root = root or Path(tempfile.gettempdir())
    removed = []
    pattern = re.compile(rf"^{TMP_PREFIX}(\d+)-")
    for path in root.glob(f"{TMP_PREFIX}*"):
        match = pattern.match(path.name)
        if match and path.is_dir() and not pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


LOCK_NAME = ".diskbench.lock"
_IMAGE_RE = re.compile(r"^.+\.(?P<pid>\d+)\.(raw|qcow2)$")
_PROBE_RE = re.compile(r"^\.diskbench-(aio|encrypt)-")


class DirBusy(InfraError):
    """Another diskbench run holds the lock of a results dir or work dir (exit 3)."""


def image_path(work_dir: Path, cell_id: str, fmt: str) -> Path:
    """Where a sample's image lives: ``CELL_ID.PID.FORMAT`` (see the module docstring)."""
    return work_dir / f"{cell_id}.{os.getpid()}.{fmt}"


def _holder(fd: int) -> str:
    """What the lock file says about its holder: ``pid 1234: diskbench sweep x.toml``."""
    with contextlib.suppress(OSError):
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 4096).decode("utf-8", "replace").strip()
        pid, _, command = text.partition("\n")
        if pid.isdigit():
            return f"pid {pid}: {command.strip() or '?'}"
    return "a process that has not written its name yet"


def _command() -> str:
    try:
        argv = Path("/proc/self/cmdline").read_bytes().split(b"\0")
        words = [a.decode("utf-8", "replace") for a in argv if a]
    except OSError:
        words = sys.argv
    # "python -m harness sweep ..." and ".venv/bin/diskbench sweep ..." read the same
    if len(words) >= 3 and words[1:3] == ["-m", "harness"]:
        words = ["diskbench", *words[3:]]
    elif words and Path(words[0]).name == "diskbench":
        words = ["diskbench", *words[1:]]
    return " ".join(words)[:300]


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a run that ended removes its lock file)."""
    try:
        there = path.stat()
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _open_locked(directory: Path, *, what: str, flag: str) -> int:
    """The lock file of ``directory``, open and flocked; :class:`DirBusy` if a run holds it."""
    path = directory / LOCK_NAME
    while True:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise InfraError(f"{what} {directory} cannot be used: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            busy = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
            holder = _holder(fd)
            os.close(fd)
            if not busy:
                raise
            raise DirBusy(
                f"{what} {directory} is in use by another diskbench run ({holder}): "
                f"wait for it to finish or pass another {flag}"
            ) from None
        if _same_file(fd, path):
            return fd
        # the run that held it removed the file between our open and our lock: lock the new one
        os.close(fd)


def _dead_holder(fd: int) -> str | None:
    """What the lock file says about a holder that is no longer running (None: none, or ourselves)."""
    with contextlib.suppress(OSError):
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        pid, _, command = text.partition("\n")
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            return f"pid {pid}: {command.strip() or '?'}"
    return None


@contextlib.contextmanager
def locked(directory: Path, *, what: str, flag: str) -> Iterator[Path]:
    """Hold ``directory``'s lock for the block; refuse at once (:class:`DirBusy`) if a run holds it.

    ``what`` names the directory in the message ("results dir"), ``flag``
    the option that picks another one ("--results-dir").  The lock file is
    removed when the block ends; one a killed run left is taken over with a note.
    """
    fd = _open_locked(directory, what=what, flag=flag)
    try:
        dead = _dead_holder(fd)
        if dead is not None:
            log.info(f"{what} {directory}: taking over the lock of a run that is no longer running ({dead})")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{_command()}\n".encode(), 0)
        yield directory
    finally:
        # removed while still held: a run that opened it meanwhile finds it gone and opens a new one
        if _same_file(fd, directory / LOCK_NAME):
            with contextlib.suppress(OSError):
                (directory / LOCK_NAME).unlink()
        os.close(fd)  # closing drops the flock


@contextlib.contextmanager
def hold(
    results_dir: Path,
    work_dir: Path,
    *,
    host_disk: str = "native",
    progress: Callable[[str], None] = lambda _msg: None,
) -> Iterator[None]:
    """Both locks of a run (results dir first), then the work dir cleaned of dead runs' leftovers
    (a dead run's host disk model among them); with a ``host_disk`` model other than native, that
    model built under the work dir for the block and torn down after it
    (:mod:`harness.host.hostdisk`; the sessions' work dir is its mount point)."""
    from harness.host import hostdisk

    with (
        locked(results_dir, what="results dir", flag="--results-dir"),
        locked(work_dir, what="work dir", flag="--work-dir"),
    ):
        clean_dead_runs(work_dir)
        if (work_dir / hostdisk.STATE_DIR).exists() or any(work_dir.glob(f"{hostdisk.MOUNT_PREFIX}*")):
            for note in hostdisk.clean_stale(work_dir):
                progress(note)
        model = hostdisk.profile(host_disk)
        if model is None:
            yield
        else:
            with hostdisk.mounted(work_dir, model, progress=progress):
                yield


def clean_dead_runs(work_dir: Path) -> list[Path]:
    """Remove what dead runs left in ``work_dir`` and in the temp dir; call with the work dir's lock."""
    removed = clean_stale_tmp_dirs()
    if not work_dir.is_dir():
        return removed
    for path in work_dir.iterdir():
        match = _IMAGE_RE.match(path.name)
        if match and int(match.group("pid")) != os.getpid() and not pid_alive(int(match.group("pid"))):
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
        elif _PROBE_RE.match(path.name) and path.is_dir():
            # the probes' temp dirs: with the lock held, none is in use
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
