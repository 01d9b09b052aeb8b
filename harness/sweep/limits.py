"""Numbers a run accepts, checked before anything is created.

argparse takes ``--mem-mib 0`` and ``--workload-timeout-s nan`` as numbers;
QEMU would then silently give the guest its default RAM, and a NaN deadline
never passes.  Each check here names the flag or spec key, the value and
what is allowed (exit 2).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from harness.errors import ImageError, SpecError
from harness.spec import Cell, Format, format_size

# the least guest RAM the guest boots with: with 96 MiB its kernel panics
# unpacking the initramfs; 128 MiB boots and runs dd
MIN_MEM_MIB = 128
# QEMU's largest image (BDRV_MAX_LENGTH: INT64_MAX rounded down to whole 512 B sectors)
QEMU_MAX_IMAGE_BYTES = (2**63 - 1) & ~(2**31 - 1)
# the largest file a filesystem holds (raw images are one file); others: QEMU's limit
FS_MAX_FILE_BYTES = {"ext4": 16 * 1024**4, "ext3": 2 * 1024**4, "ext2": 2 * 1024**4}
# the runner's own cap on a cell's disk (its size, and the host bytes it can take), unless
# --max-disk-size says otherwise: a spec or a pull request's policy cannot ask for more
MAX_DISK_BYTES = 64 * 1024**3


def host_mem_mib() -> int:
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0


def host_cores() -> int:
    return len(os.sched_getaffinity(0)) or os.cpu_count() or 1


def check_guest(*, mem_mib: int, smp: int) -> None:
    """Guest RAM from MIN_MEM_MIB to the host's memory; vCPUs from 1 to the host's cores."""
    host = host_mem_mib()
    if not MIN_MEM_MIB <= mem_mib <= max(host, MIN_MEM_MIB):
        raise SpecError(
            f"--mem-mib {mem_mib} is not allowed: use {MIN_MEM_MIB} (the least the guest boots with) "
            f"to {host} (this host's memory)"
        )
    cores = host_cores()
    if not 1 <= smp <= cores:
        raise SpecError(f"--smp {smp} is not allowed: use 1 to {cores} (this host's cores)")


def check_deadline(flag: str, value: float | None, *, none_ok: bool = True) -> None:
    """A deadline is a finite number of seconds above zero (None: the default, where allowed)."""
    if value is None and none_ok:
        return
    if value is None or not math.isfinite(value) or value <= 0:
        raise SpecError(f"{flag} {value} is not allowed: use a finite number of seconds above 0")


def check_images(
    cells: Sequence[Cell],
    work_dir: Path,
    *,
    qemu_img: str,
    max_disk_bytes: int = MAX_DISK_BYTES,
) -> None:
    """Every image size within qemu-img's limits, the work dir's filesystem and ``max_disk_bytes``
    (``--max-disk-size``: the size and the host bytes a sample's image can take, preallocation
    included); ``qemu_img measure`` agrees."""
    from harness.host.hostinfo import filesystem_type
    from harness.sweep import image_need_bytes, measure_image

    fstype = filesystem_type(_existing(work_dir))
    seen: set[tuple[str, ...]] = set()
    for cell in cells:
        image = cell.image
        key = (image.format.value, *image.create_options(), str(image.size))
        if key in seen:
            continue
        seen.add(key)
        size = format_size(image.size)
        if image.size > QEMU_MAX_IMAGE_BYTES:
            raise SpecError(
                f"size {size} is not allowed: QEMU's images hold at most {format_size(QEMU_MAX_IMAGE_BYTES)}"
            )
        cap = format_size(max_disk_bytes)
        if image.size > max_disk_bytes:
            raise SpecError(
                f"size {size} is over this runner's cap of {cap} (--max-disk-size): "
                "use a smaller size, or raise --max-disk-size on a runner with the disk for it"
            )
        limit = FS_MAX_FILE_BYTES.get(fstype)
        if image.format is Format.RAW and limit is not None and image.size > limit:
            raise SpecError(
                f"size {size} is not allowed for raw on {fstype} ({work_dir}): a file there holds at most "
                f"{format_size(limit)}; use a smaller size or qcow2"
            )
        try:
            measure = measure_image(cell, qemu_img=qemu_img)
        except ImageError as exc:
            reason = (exc.stderr.strip().splitlines() or [exc.message])[-1].removeprefix("qemu-img: ")
            raise SpecError(
                f"size {size} of {image.format.value} is not allowed: qemu-img says: {reason}"
            ) from None
        need = image_need_bytes(cell, measure)
        if need > max_disk_bytes:
            raise SpecError(
                f"{cell.id}: its image can take {format_size(need)} of the host's disk "
                f"(preallocation {image.preallocation}), over this runner's cap of {cap} "
                "(--max-disk-size): use a smaller size or less preallocation"
            )


def _existing(path: Path) -> Path:
    probe = path.resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe
