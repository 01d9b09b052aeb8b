"""What this QEMU can do, probed rather than assumed (io_uring, native aio, encryption), and the
probes a preset reports but cannot run (qcow2 compressed writes), written next to its records."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.errors import CommandError
from harness.files import write_json_atomic
from harness.host import confine, proc
from harness.sample.vm.config import option_value
from harness.spec import Aio, Cache, Cell
from harness.subject.binaries import Binaries

_QMP_QUIT = '{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n'


@lru_cache(maxsize=16)
def aio_problem(qemu: str, aio: Aio, cache: Cache, work_dir: Path, runs_as: int | None = None) -> str | None:
    """Why QEMU cannot open an image in ``work_dir`` with ``aio``/``cache``, or None.

    Opens a 1 MiB raw image with ``-machine none`` and quits over QMP on
    stdin: the drive is opened exactly as a sample would open it, in a
    second, without a guest.
    """
    with (
        tempfile.TemporaryDirectory(prefix=".diskbench-aio-", dir=work_dir) as tmp,
        confine.Handoff(confine.account(runs_as)) as handoff,  # as the samples' QEMU runs
    ):
        image = Path(tmp) / "probe.raw"
        name = handoff.write(image, create=True)
        image.write_bytes(bytes(1024 * 1024))
        drive = f"if=none,id=d,file={option_value(name)},format=raw,aio={aio.value},cache={cache.value}"
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


def _create_problem(
    qemu_img: str, work_dir: Path, runs_as: int | None, prefix: str, **image: Any
) -> str | None:
    """Why this qemu-img cannot create a 64 MiB qcow2 with the ``image`` parameters (in a temp
    dir named ``prefix``... under ``work_dir``), or None."""
    from harness.sample.images import create
    from harness.spec import make_cell

    with tempfile.TemporaryDirectory(prefix=prefix, dir=work_dir) as tmp:
        spec = make_cell(format="qcow2", size="64M", **image).image
        try:
            create(Path(tmp) / "probe.qcow2", spec, qemu_img=qemu_img, runs_as=runs_as)
        except CommandError as exc:
            return exc.message
    return None


@lru_cache(maxsize=4)
def encryption_problem(qemu_img: str, encrypt: str, work_dir: Path, runs_as: int | None = None) -> str | None:
    """Why this qemu-img cannot create a qcow2 with ``encrypt``, or None (probed on a 64 MiB image)."""
    return _create_problem(qemu_img, work_dir, runs_as, ".diskbench-encrypt-", encrypt=encrypt)


@lru_cache(maxsize=4)
def extended_l2_problem(qemu_img: str, work_dir: Path, runs_as: int | None = None) -> str | None:
    """Why this qemu-img cannot create a qcow2 with ``extended_l2=on`` (QEMU 5.2 and later can), or None."""
    return _create_problem(qemu_img, work_dir, runs_as, ".diskbench-encrypt-l2-", extended_l2=True)


def unsupported_reason(cell: Cell, work_dir: Path, binaries: Binaries) -> str | None:
    """Why ``binaries`` cannot run ``cell`` here, with what to do instead: aio modes other than
    threads, encryption and qcow2's extended L2 entries (of the image or its base) are probed."""
    if cell.image.extended_l2 or (cell.backing is not None and cell.backing.extended_l2):
        problem = extended_l2_problem(binaries.qemu_img, work_dir.resolve(), binaries.runs_as)
        if problem is not None:
            return f"extended_l2 does not work with this qemu-img: {problem}: drop extended_l2, or use QEMU 5.2 or later"
    if cell.image.encrypted:
        problem = encryption_problem(
            binaries.qemu_img, cell.image.encrypt, work_dir.resolve(), binaries.runs_as
        )
        if problem is not None:
            return (
                f"encrypt={cell.image.encrypt} does not work with this qemu-img: {problem}: use encrypt=none"
            )
    if cell.drive.aio is Aio.THREADS:
        return None
    problem = aio_problem(
        binaries.qemu, cell.drive.aio, cell.drive.cache, work_dir.resolve(), binaries.runs_as
    )
    if problem is None:
        return None
    return (
        f"aio={cell.drive.aio.value} with cache={cell.drive.cache.value} does not work here: {problem}: "
        "use aio=threads"
    )


# -- probes: what a preset reports but cannot run ------------------------------------------------------


def probe_compressed_writes(work_dir: Path, binaries: Binaries) -> dict[str, Any]:
    """Whether a guest could write to a compressed qcow2: QEMU's compress filter, probed.

    qcow2 compresses only what ``qemu-img convert -c`` writes or what goes
    through the ``compress`` filter driver; a guest filesystem rewrites its
    blocks, so the probe writes a cluster twice through the filter.
    """

    qemu_io = binaries.qemu_io
    work_dir.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix=".diskbench-compress-", dir=work_dir) as tmp,
        # as the samples' qemu-img and qemu-io run: the side's unprivileged account, the image handed over
        confine.Handoff(confine.account(binaries.runs_as)) as handoff,
    ):
        image = handoff.write(Path(tmp) / "probe.qcow2", create=True)
        node = {
            "driver": "compress",
            "file": {"driver": "qcow2", "file": {"driver": "file", "filename": image}},
        }
        steps = [
            ("create", [binaries.qemu_img, "create", "-q", "-f", "qcow2", image, "16M"]),
            ("write", [qemu_io, "-c", "write -P 0x5a 0 64k", "json:" + json.dumps(node)]),
            ("rewrite", [qemu_io, "-c", "write -P 0xa5 0 64k", "json:" + json.dumps(node)]),
        ]
        for step, argv in steps:
            try:
                result = proc.run(argv, timeout_s=60, check=False, confined=handoff.popen_kwargs())
            except CommandError as exc:
                return {"supported": False, "reason": exc.message, "argv": argv}
            text = (result.stdout + result.stderr).strip()
            if result.ok and "failed" not in text:
                continue
            last = text.splitlines()[-1] if text else f"exit {result.returncode}"
            why = {
                "create": "qemu-img cannot create a qcow2 here",
                "write": "the compress filter cannot write",
                "rewrite": "a compressed cluster cannot be rewritten through the compress filter, "
                "so a guest filesystem (which rewrites its blocks) cannot run on a compressed qcow2",
            }[step]
            return {"supported": False, "reason": f"{why} ({' '.join(argv[:3])}: {last})", "argv": argv}
    return {"supported": True, "reason": "two writes to one cluster through the compress filter worked"}


PROBES: dict[str, Callable[[Path, Binaries], dict[str, Any]]] = {"compressed-writes": probe_compressed_writes}
PROBE_LABELS = {"compressed-writes": "qcow2 compressed (compress filter)"}


def record_probes(probes: Sequence[str], directory: Path, work_dir: Path, binaries: Binaries) -> list[str]:
    """Run ``probes`` (names of :data:`PROBES`); write each to ``DIR/probes/NAME.json``; say what."""
    notes = []
    for probe in probes:
        result = PROBES[probe](work_dir, binaries)
        write_json_atomic(
            directory / "probes" / f"{probe}.json", {"probe": probe, "label": PROBE_LABELS[probe], **result}
        )
        state = "supported" if result["supported"] else "unsupported"
        notes.append(f"probe {probe}: {state}: {result['reason']}")
    return notes


def read_probes(directories: Sequence[Path]) -> list[dict[str, Any]]:
    """What :func:`record_probes` wrote in each of ``directories``; an unreadable file is skipped."""
    found = []
    for directory in directories:
        for path in sorted((directory / "probes").glob("*.json")):
            try:
                found.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
    return found
