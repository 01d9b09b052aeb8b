"""What this QEMU can do, probed rather than assumed (io_uring, native aio)."""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

from harness import confine, proc
from harness.binaries import ON_PATH, Binaries
from harness.errors import CommandError
from harness.spec import Aio, Cache, Cell

_QMP_QUIT = '{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n'


@lru_cache(maxsize=16)
def aio_problem(qemu: str, aio: Aio, cache: Cache, work_dir: Path) -> str | None:
    """Why QEMU cannot open an image in ``work_dir`` with ``aio``/``cache``, or None.

    Opens a 1 MiB raw image with ``-machine none`` and quits over QMP on
    stdin: the drive is opened exactly as a sample would open it, in a
    second, without a guest.
    """
    with (
        tempfile.TemporaryDirectory(prefix=".diskbench-aio-", dir=work_dir) as tmp,
        confine.Handoff(confine.account()) as handoff,  # as the samples' QEMU runs
    ):
        image = Path(tmp) / "probe.raw"
        name = handoff.write(image, create=True)
        image.write_bytes(bytes(1024 * 1024))
        drive = f"if=none,id=d,file={name},format=raw,aio={aio.value},cache={cache.value}"
        argv = [qemu, "-machine", "none", "-nodefaults", "-display", "none", "-S",
                "-qmp", "stdio", "-drive", drive]  # fmt: skip
        try:
            result = proc.run(
                argv, timeout_s=60, check=False, input_text=_QMP_QUIT, confined=handoff.popen_kwargs()
            )
        except CommandError as exc:
            return exc.message
    if result.ok:
        return None
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else f"QEMU exited with {result.returncode}"


@lru_cache(maxsize=4)
def encryption_problem(qemu_img: str, encrypt: str, work_dir: Path) -> str | None:
    """Why this qemu-img cannot create a qcow2 with ``encrypt``, or None (probed on a 16 MiB image)."""
    from harness.images import create
    from harness.spec import make_cell

    with tempfile.TemporaryDirectory(prefix=".diskbench-encrypt-", dir=work_dir) as tmp:
        spec = make_cell(format="qcow2", encrypt=encrypt, size="64M").image
        try:
            create(Path(tmp) / "probe.qcow2", spec, qemu_img=qemu_img)
        except CommandError as exc:
            return exc.message
    return None


def unsupported_reason(cell: Cell, work_dir: Path, binaries: Binaries = ON_PATH) -> str | None:
    """Why ``binaries`` cannot run ``cell`` here: aio modes other than threads and encryption are probed."""
    if cell.image.encrypted:
        problem = encryption_problem(binaries.qemu_img, cell.image.encrypt, work_dir.resolve())
        if problem is not None:
            return f"encrypt={cell.image.encrypt} does not work with this qemu-img: {problem}"
    if cell.drive.aio is Aio.THREADS:
        return None
    problem = aio_problem(binaries.qemu, cell.drive.aio, cell.drive.cache, work_dir.resolve())
    if problem is None:
        return None
    return f"aio={cell.drive.aio.value} with cache={cell.drive.cache.value} does not work here: {problem}"
