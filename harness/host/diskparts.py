"""The system's own tables as a host disk model sees them (:mod:`harness.host.hostdisk`): mounts,
loop devices and their backing files, processes by command line, cgroup v1 blkio's throttle limits;
and the small acts that take a model's parts down (unmount, stop a process)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from harness.errors import CommandError
from harness.host import proc

#: where a model keeps its parts under the work dir, and its FUSE export's name there
STATE_DIR = ".host-disk"
EXPORT_NAME = "export.img"
#: how a model's loop device's backing file ends
EXPORT_SUFFIX = f"/{STATE_DIR}/{EXPORT_NAME}"
BLKIO = Path("/sys/fs/cgroup/blkio")
BLKIO_FILES = (
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
)


def is_mounted(path: Path) -> bool:
    target = str(path)
    with contextlib.suppress(OSError), open("/proc/mounts", encoding="utf-8") as mounts:
        return any(line.split()[1].replace("\\040", " ") == target for line in mounts if line.strip())
    return False


def blkio_available() -> bool:
    return all((BLKIO / name).is_file() for name in BLKIO_FILES)


def throttle_kind() -> str:
    """How a model is throttled on this host: ``blkio`` (cgroup v1, per bio at the loop device) or
    ``qemu-storage-daemon`` (its throttle group, per FUSE request)."""
    return "blkio" if blkio_available() else "qemu-storage-daemon"


def set_blkio(devno: str, bps: int, iops: int) -> None:
    for name in BLKIO_FILES:
        value = bps if "bps" in name else iops
        (BLKIO / name).write_text(f"{devno} {value}\n")


def clear_blkio(devno: str) -> None:
    for name in BLKIO_FILES:
        with contextlib.suppress(OSError):
            (BLKIO / name).write_text(f"{devno} 0\n")


def cmdline(pid: int) -> list[str]:
    with contextlib.suppress(OSError):
        return [
            a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a
        ]
    return []


def daemons(export: Path) -> list[int]:
    """qemu-storage-daemon processes serving ``export`` (found by their command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            argv = cmdline(int(entry.name))
            if argv and Path(argv[0]).name == "qemu-storage-daemon" and any(str(export) in a for a in argv):
                found.append(int(entry.name))
    return found


def loops(export: Path) -> list[str]:
    """Loop devices attached to ``export``."""
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if backing.read_text().strip().removesuffix(" (deleted)") == str(export):
                found.append(f"/dev/{backing.parent.parent.name}")
    return found


def umount(path: Path, notes: list[str]) -> None:
    if not is_mounted(path):
        return
    for argv in (["umount", str(path)], ["umount", "-l", str(path)]):
        with contextlib.suppress(CommandError):
            proc.run(argv, timeout_s=60)
            notes.append(f"unmounted {path}")
            return
    notes.append(f"could not unmount {path}")


def stop(pid: int, notes: list[str], what: str) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and not zombie(pid):
            time.sleep(0.05)
        if Path(f"/proc/{pid}").exists() and not zombie(pid):
            os.kill(pid, signal.SIGKILL)
        notes.append(f"stopped {what} (pid {pid})")


def zombie(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return True
