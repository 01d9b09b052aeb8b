"""The disk under test: ``qemu-img create``, allocation, integrity.

I/O only: every figure here is measured with the real ``qemu-img`` or ``stat``.  Each
function runs the ``qemu_img`` given (default: the one on PATH).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import CommandError, ImageError, UsageError
from harness.host import confine, proc
from harness.host.hostinfo import filesystem_type
from harness.spec import SECRET_ID, Cache, Format, ImageSpec, secret_object
from harness.subject.qemu_build import environ_for

MEMORY_FILESYSTEMS = {"tmpfs", "ramfs"}


@dataclass(frozen=True)
class CreatedImage:
    path: Path
    spec: ImageSpec
    create_s: float
    allocated_bytes: int
    file_bytes: int
    # why earlier tries of ``qemu-img create`` failed (see LUKS_RETRY_MARKER)
    retries: tuple[str, ...] = ()


# qemu-img times its LUKS key derivation against the CPU; under load that
# measurement fails and the same command succeeds when repeated
LUKS_RETRY_MARKER = "Unable to get accurate CPU usage"
LUKS_CREATE_TRIES = 4


@dataclass(frozen=True)
class CheckResult:
    """``qemu-img check``: 0 clean, 2 corrupt, 3 leaks, 63 not applicable (raw)."""

    returncode: int
    report: dict[str, Any]

    @property
    def verdict(self) -> str:
        return {0: "clean", 2: "corrupt", 3: "leaks", 63: "not-applicable"}.get(self.returncode, "error")

    @property
    def fails_sample(self) -> bool:
        return self.returncode not in (0, 3, 63)


def allocated_bytes(path: Path) -> int:
    """Bytes the host filesystem really allocated to the file (``st_blocks``)."""
    return os.stat(path).st_blocks * 512


WRITE_CHUNK = 8 * 1024 * 1024


def write_zeros(path: Path, size: int) -> None:
    """Write every byte of ``path`` (seed 003's ``dd if=/dev/zero``), then fsync.

    Real writes, not fallocate: the file has no holes and no unwritten
    extents, so the guest's first writes cost what rewrites cost.
    """
    zeros = bytes(WRITE_CHUNK)
    with open(path, "r+b") as fh:
        left = size
        while left > 0:
            left -= fh.write(zeros[: min(left, WRITE_CHUNK)])
        fh.flush()
        os.fsync(fh.fileno())


def drop_page_cache(path: Path) -> str:
    """Drop the host page cache of one file; return how, for the record.

    ``posix_fadvise(DONTNEED)`` after an fsync drops the file's clean pages
    for any user and leaves the rest of the host's cache alone (the guest
    kernel, the payload), unlike ``/proc/sys/vm/drop_caches``.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return "posix_fadvise(POSIX_FADV_DONTNEED) on the image file after fsync"


def resident_bytes(path: Path) -> int | None:
    """Bytes of the file in the host page cache (``fincore``), or None if unknown."""
    try:
        result = proc.run(["fincore", "-b", "-n", "-o", "RES", str(path)], timeout_s=60, check=False)
    except CommandError:
        return None
    text = result.stdout.strip()
    return int(text) if result.ok and text.isdigit() else None


def image_args(path: Path, fmt: Format, *, encrypted: bool = False, backed: bool = False) -> list[str]:
    """How qemu-img names an existing image: ``-f FMT PATH``, or with its LUKS secret.

    An encrypted qcow2 cannot even be opened for ``map`` or ``check`` without
    its key, so those get the secret object and ``--image-opts``.  An overlay (``backed``) is
    opened without its backing file: its own clusters are what ``map`` and ``check`` are about,
    and the chain's names are out of the account's reach (:mod:`harness.sample.chain`).
    """
    if backed:
        node = {"driver": fmt.value, "file": {"driver": "file", "filename": str(path)}, "backing": None}
        return ["json:" + json.dumps(node)]
    if not encrypted:
        return ["-f", fmt.value, str(path)]
    opts = f"driver={fmt.value},file.filename={str(path).replace(',', ',,')},encrypt.key-secret={SECRET_ID}"
    return ["--object", secret_object(), "--image-opts", opts]


def create(path: Path, spec: ImageSpec, *, qemu_img: str, runs_as: int | None = None) -> CreatedImage:
    """Create a fresh image (replacing any old one) and time it.

    ``create_s`` is the time of ``qemu-img create`` plus, for the raw
    ``written`` preallocation, writing every byte.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    retries: list[str] = []
    while True:
        start = time.monotonic()
        try:
            with confine.Handoff(confine.account(runs_as)) as handoff:
                argv = [
                    qemu_img,
                    "create",
                    "-q",
                    *(["--object", secret_object()] if spec.encrypted else []),
                    "-f",
                    spec.format.value,
                    "-o",
                    ",".join(spec.create_options()),
                    handoff.write(path, create=True),
                    str(spec.size),
                ]
                proc.run(
                    argv,
                    timeout_s=3600,
                    error_cls=ImageError,
                    env=environ_for(qemu_img),
                    confined=handoff.popen_kwargs(),
                )
            break
        except ImageError as exc:
            if (
                not (spec.encrypted and LUKS_RETRY_MARKER in exc.stderr)
                or len(retries) + 1 >= LUKS_CREATE_TRIES
            ):
                raise
            retries.append(f"try {len(retries) + 1}: {exc.message}")
            path.unlink(missing_ok=True)
    if spec.written:
        try:
            write_zeros(path, spec.size)
        except OSError as exc:
            raise ImageError(f"writing every byte of {path} failed: {exc.strerror}") from exc
    create_s = time.monotonic() - start
    return CreatedImage(
        path=path,
        spec=spec,
        create_s=create_s,
        allocated_bytes=allocated_bytes(path),
        file_bytes=path.stat().st_size,
        retries=tuple(retries),
    )


def info(path: Path, *, qemu_img: str, runs_as: int | None = None) -> dict[str, Any]:
    with confine.Handoff(confine.account(runs_as)) as handoff:
        result = proc.run(
            [qemu_img, "info", "-U", "--output=json", handoff.read(path)],
            timeout_s=60,
            error_cls=ImageError,
            env=environ_for(qemu_img),
            confined=handoff.popen_kwargs(),
        )
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def mapped_bytes(
    path: Path,
    fmt: Format,
    *,
    qemu_img: str,
    encrypted: bool = False,
    runs_as: int | None = None,
    backed: bool = False,
) -> dict[str, int]:
    """What ``qemu-img map`` says is data vs zero, in guest-visible bytes."""
    with confine.Handoff(confine.account(runs_as)) as handoff:
        result = proc.run(
            [
                qemu_img,
                "map",
                "-U",
                "--output=json",
                *image_args(Path(handoff.read(path)), fmt, encrypted=encrypted, backed=backed),
            ],
            timeout_s=300,
            error_cls=ImageError,
            env=environ_for(qemu_img),
            confined=handoff.popen_kwargs(),
        )
    data = 0
    zero = 0
    for extent in json.loads(result.stdout):
        if extent.get("data"):
            data += int(extent["length"])
        if extent.get("zero"):
            zero += int(extent["length"])
    return {"data_bytes": data, "zero_bytes": zero}


def check(
    path: Path,
    fmt: Format,
    *,
    qemu_img: str,
    encrypted: bool = False,
    runs_as: int | None = None,
    backed: bool = False,
) -> CheckResult:
    """``qemu-img check --output=json``; exit codes are figures, not failures."""
    with confine.Handoff(confine.account(runs_as)) as handoff:
        result = proc.run(
            [
                qemu_img,
                "check",
                "--output=json",
                *image_args(Path(handoff.read(path)), fmt, encrypted=encrypted, backed=backed),
            ],
            timeout_s=600,
            check=False,
            error_cls=ImageError,
            env=environ_for(qemu_img),
            confined=handoff.popen_kwargs(),
        )
    report: dict[str, Any] = {}
    if result.stdout.strip().startswith("{"):
        try:
            report = json.loads(result.stdout)
        except json.JSONDecodeError:
            report = {}
    if not report and result.returncode not in (0, 63):
        report = {"stderr": result.stderr.strip()[-500:]}
    return CheckResult(returncode=result.returncode, report=report)


def supports_o_direct(directory: Path) -> bool:
    """Whether files in ``directory`` can be opened with O_DIRECT (cache=none needs it)."""
    probe = directory / f".diskbench-odirect-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    else:
        os.close(fd)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            probe.unlink()


def check_work_dir(work_dir: Path, caches: set[Cache]) -> str:
    """Refuse a work dir that cannot hold honest measurements; return its filesystem.

    Checked before anything is created, so the sweep never starts on a bad dir.
    """
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"work dir {work_dir} cannot be created ({exc.strerror}): pass --work-dir DIR"
        ) from exc
    fstype = filesystem_type(work_dir)
    direct = sorted(c.value for c in caches if c.direct)
    if direct and not supports_o_direct(work_dir):
        raise UsageError(
            f"work dir {work_dir} is on {fstype}, which does not support O_DIRECT that "
            f"cache={direct[0]} needs: put --work-dir on a disk filesystem (ext4, xfs) "
            "or use cache=writeback"
        )
    if fstype in MEMORY_FILESYSTEMS:
        raise UsageError(
            f"work dir {work_dir} is on {fstype} (memory, not a disk): put --work-dir on the runner's disk"
        )
    return fstype
