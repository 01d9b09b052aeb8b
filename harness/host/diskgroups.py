"""A disk of its own for each process that drives a guest's IO on a host disk model.

A model's throttle (cgroup v1 blkio limits on its loop device, :mod:`harness.host.hostdisk`) holds
every process in one cgroup to one budget: two QEMU of a gate's pair on one model would share its
150 requests a second, and whichever side's requests reach the throttle first would finish first.
So each QEMU (and each replay's ``qemu-io``) whose image lies on a model runs in a blkio cgroup of
its own with the same limits on that device (:func:`own_disk`): each has a disk of the profile to
itself, as each side of a crossed pair has a CPU of its own. What the kernel writes back from the
page cache and the file system's journal stay in the root cgroup, under the model's own limits.

The cgroups are named ``diskbench-disk-MAJ_MIN-PID-N`` (the loop device, the harness); those of a
model's device are removed when it is taken down (:func:`remove_all`), a dead run's with it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

from harness.host.diskparts import BLKIO, BLKIO_FILES, EXPORT_SUFFIX, blkio_available

PREFIX = "diskbench-disk-"
_numbers = itertools.count()


def model_device(path: Path) -> str | None:
    """The device number (``MAJ:MIN``) of the model ``path`` lies on; None where it lies on none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    devno = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    with contextlib.suppress(OSError):
        backing = Path(f"/sys/dev/block/{devno}/loop/backing_file").read_text().strip()
        if backing.endswith(EXPORT_SUFFIX):
            return devno
    return None


def _limits(root: Path, devno: str) -> dict[str, str]:
    """The root cgroup's blkio limits on ``devno``, by file: the model's profile."""
    found = {}
    for name in BLKIO_FILES:
        with contextlib.suppress(OSError):
            for line in (root / name).read_text().splitlines():
                if line.split()[:1] == [devno]:
                    found[name] = line.split()[1]
    return found


@contextlib.contextmanager
def own_disk(path: Path, *, uid: int | None = None, root: Path = BLKIO) -> Iterator[Path | None]:
    """For the block, a blkio cgroup with the model's limits on the device ``path`` lies on (None
    where ``path`` is on no model, or the model is not throttled by blkio). ``uid``: the account
    that moves its own process in (:func:`join`), given the cgroup's ``cgroup.procs``. The cgroup is
    removed after the block, once its processes are gone."""
    devno = model_device(path)
    limits = _limits(root, devno) if devno and blkio_available() else {}
    if devno is None or len(limits) != len(BLKIO_FILES):
        yield None
        return
    group = root / f"{PREFIX}{devno.replace(':', '_')}-{os.getpid()}-{next(_numbers)}"
    group.mkdir()
    try:
        for name, value in limits.items():
            (group / name).write_text(f"{devno} {value}\n")
        if uid is not None and uid != os.geteuid():
            os.chown(group / "cgroup.procs", uid, -1)
        yield group
    finally:
        _remove(group, root)


def join(group: Path | None, pid: int = 0) -> None:
    """Move process ``pid`` (0: the caller, in a child before exec) and its threads into ``group``."""
    if group is not None:
        (group / "cgroup.procs").write_text(f"{pid}\n")


def _remove(group: Path, root: Path) -> None:
    """``group`` removed; a process still in it (a QEMU being killed) is moved to ``root`` first."""
    with contextlib.suppress(OSError):
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (root / "cgroup.procs").write_text(f"{pid}\n")
    with contextlib.suppress(OSError):
        group.rmdir()


def remove_all(devno: str, root: Path = BLKIO) -> int:
    """Every such cgroup of device ``devno`` removed (a model taken down, a dead run's cleared);
    how many."""
    removed = 0
    for group in root.glob(f"{PREFIX}{devno.replace(':', '_')}-*"):
        _remove(group, root)
        removed += not group.exists()
    return removed
