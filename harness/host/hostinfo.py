"""The host this runs on: what a record says of it (kernel, CPU, accel, QEMU versions, the image file system); a sample is never mixed across it.

A QEMU process is :class:`harness.sample.vm.Machine`; this module describes the host.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.errors import CommandError
from harness.host import confine, proc
from harness.subject.binaries import Binaries


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total_kib() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@lru_cache(maxsize=8)
def tool_version(binary: str, *, runs_as: int | None = None) -> str:
    """First line of ``BINARY --version``, e.g. ``QEMU emulator version 7.2.22 (...)``.

    A binary a pull request built or named: it runs as QEMU does, never as root
    (:func:`harness.host.confine.as_account`)."""
    try:
        result = proc.run([binary, "--version"], timeout_s=30, confined=confine.as_account(runs_as))
    except CommandError as exc:
        raise CommandError(
            f"{binary} cannot run ({exc.message}): run scripts/setup.sh, or pass working binaries "
            "(--qemu, --qemu-img)",
            argv=exc.argv,
        ) from exc
    first = result.stdout.strip().splitlines()
    return first[0] if first else ""


def short_version(text: str) -> str:
    match = re.search(r"version (\S+)", text)
    return match.group(1) if match else text


def debian_version(text: str) -> str:
    """The Debian version a ``--version`` line names (``(Debian 1:10.0.2+ds-2...)``), or ""."""
    match = re.search(r"\(Debian ([^)\s]+)\)", text)
    return match.group(1) if match else ""


def build_identity(qemu: str, qemu_img: str, *, runs_as: int | None = None) -> dict[str, Any]:
    """What names the QEMU build exactly: its Debian version, the SHA256 of each binary, and the
    fetched build's prefix (``diskbench qemu get``) or None."""
    from harness.subject.qemu_build import binary_digest, build_of

    build = build_of(qemu)
    return {
        "qemu_debian_version": debian_version(tool_version(qemu, runs_as=runs_as)),
        "qemu_sha256": binary_digest(qemu),
        "qemu_img_sha256": binary_digest(qemu_img),
        "qemu_build": str(build.prefix) if build is not None else None,
    }


def machine_info(
    work_dir: Path, *, accel: str, accel_reason: str, binaries: Binaries, host_disk: str | None = None
) -> dict[str, Any]:
    """Everything that makes two samples comparable or not, ``binaries`` among it, as given;
    ``host_disk`` names the disk model the work dir is on (None: the native disk, no key)."""
    qemu = binaries.qemu
    qemu_img = binaries.qemu_img
    uname = os.uname()
    return {
        "hostname": socket.gethostname(),
        "host_kernel": f"{uname.sysname} {uname.release}",
        "arch": uname.machine,
        "cpu": cpu_model(),
        "cores": os.cpu_count() or 0,
        "mem_kib": mem_total_kib(),
        "accel": accel,
        "accel_reason": accel_reason,
        "qemu": qemu,
        "qemu_version": short_version(tool_version(qemu, runs_as=binaries.runs_as)),
        "qemu_img": qemu_img,
        "qemu_img_version": short_version(tool_version(qemu_img, runs_as=binaries.runs_as)),
        **build_identity(qemu, qemu_img, runs_as=binaries.runs_as),
        "work_dir": str(work_dir),
        "work_dir_fs": filesystem_type(work_dir),
        **({"host_disk": host_disk} if host_disk is not None else {}),
    }


def filesystem_type(path: Path) -> str:
    """The filesystem a path lives on, from the longest mount point in /proc/mounts."""
    target = os.path.realpath(path)
    best = ("", "unknown")
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mnt = fields[1].replace("\\040", " ")
                inside = target == mnt or target.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best[0]):
                    best = (mnt, fields[2])
    except OSError:
        pass
    return best[1]
