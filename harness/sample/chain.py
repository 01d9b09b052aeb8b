"""A cell's backing chain on disk: its base and layers built once per key, a fresh overlay per sample.

The chain of a :class:`~harness.backing.Backing` lives in the work dir (on the disk the samples
measure, never elsewhere) under ``bases/KEY/``: ``layer0.FMT`` is the base, its fill written
from the host and converted by the side's ``qemu-img``; ``layer1.qcow2`` ... are empty qcow2
layers, each naming the one under it by a relative name.  The key hashes the chain's
parameters, the disk's size and the ``qemu-img`` version that builds it, so a chain is shared by
the two sides of a gate only where they would build the very same files.

A chain is built in a private directory (``bases/.KEY.PID.*``), every qcow2 layer checked
(``qemu-img check``), its ``meta.json`` written last, and the directory renamed to its key in
one step: a run killed while building leaves a private directory that no run loads (and the
next build removes), never a ``bases/KEY`` without its ``meta.json``.

QEMU and ``qemu-img`` run as an account that cannot reach the work dir by name (see
:mod:`harness.host.confine`): an overlay is created with ``-u`` (its backing is not opened), and
QEMU (and a replay's ``qemu-io``: :mod:`harness.sample.replay.replay`) is given every layer as a
descriptor (:attr:`harness.sample.vm.config.Drive.backing`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backing import FILL_CHUNK, Backing
from harness.errors import ImageError
from harness.files import publish_dir, write_json_atomic
from harness.host import confine, proc
from harness.host.hostinfo import tool_version
from harness.host.workdir import pid_alive
from harness.sample import images
from harness.spec import Cell, Format, ImageSpec
from harness.subject.binaries import Binaries
from harness.subject.qemu_build import environ_for

FORMAT_VERSION = 1
BASES_DIR = "bases"
META_FILE = "meta.json"
#: the bytes every written chunk of a base holds: not zero, so no layer or check takes it for a hole
FILL_BYTE = 0xA5
_PRIVATE = re.compile(r"^\.(?P<key>[0-9a-f]+)\.(?P<pid>\d+)\.")


@dataclass(frozen=True)
class Chain:
    """A built chain: its layers from the base up, and whether this call built it."""

    key: str
    directory: Path
    layers: tuple[tuple[Path, str], ...]
    built: bool
    build_s: float
    meta: dict[str, Any]

    @property
    def top_first(self) -> tuple[tuple[Path, str], ...]:
        """The layers from the one under the overlay down to the base (QEMU's ``backing.`` order)."""
        return tuple(reversed(self.layers))

    def as_dict(self) -> dict[str, Any]:
        """What a sample's host figures say of the chain it ran over."""
        return {
            "key": self.key,
            "built": self.built,
            "build_s": round(self.build_s, 3),
            "fill_bytes": self.meta.get("fill_bytes"),
            "layers": self.meta.get("layers", []),
        }


def key_material(backing: Backing, disk_size: int, qemu_img_version: str) -> dict[str, Any]:
    """What a chain's files depend on (pure)."""
    return {
        "format": FORMAT_VERSION,
        "backing": backing.as_dict(),
        "disk_bytes": disk_size,
        "fill_byte": FILL_BYTE,
        "qemu_img_version": qemu_img_version,
    }


def chain_key(material: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]


def layer_names(backing: Backing) -> list[tuple[str, str]]:
    """(file name, format) of the chain's layers from the base up."""
    names = [(f"layer0.{backing.format}", backing.format)]
    names += [(f"layer{n}.qcow2", "qcow2") for n in range(1, backing.depth)]
    return names


def bases_root(work_dir: Path) -> Path:
    return work_dir / BASES_DIR


def load(key: str, root: Path) -> Chain | None:
    """The chain built under ``root/key``, or None where there is none (or no finished one)."""
    directory = root / key
    try:
        meta = json.loads((directory / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("key") != key:
        return None
    layers = tuple((directory / name, fmt) for name, fmt in meta.get("files", []))
    if not layers or not all(path.is_file() for path, _ in layers):
        return None
    return Chain(key, directory, layers, built=False, build_s=0.0, meta=meta)


def ensure(backing: Backing, disk_size: int, *, work_dir: Path, binaries: Binaries) -> Chain:
    """The chain of ``backing`` for a disk of ``disk_size``: loaded if built, else built now."""
    root = bases_root(work_dir)
    material = key_material(backing, disk_size, tool_version(binaries.qemu_img, runs_as=binaries.runs_as))
    key = chain_key(material)
    found = load(key, root)
    if found is not None:
        return found
    return build(backing, disk_size, key=key, material=material, root=root, binaries=binaries)


def clean_private(root: Path) -> list[Path]:
    """Remove the private build directories of runs that died (never a live run's)."""
    removed = []
    for entry in root.glob(".*"):
        match = _PRIVATE.match(entry.name)
        if match and entry.is_dir() and not pid_alive(int(match.group("pid"))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def build(
    backing: Backing, disk_size: int, *, key: str, material: dict[str, Any], root: Path, binaries: Binaries
) -> Chain:
    """Build the chain privately, check it, and rename it to ``root/key`` (see the module's docstring)."""
    root.mkdir(parents=True, exist_ok=True)
    clean_private(root)
    start = time.monotonic()
    tmp = root / f".{key}.{os.getpid()}.{time.time_ns()}"
    tmp.mkdir()
    try:
        layers = []
        names = layer_names(backing)
        for index, (name, fmt) in enumerate(names):
            path = tmp / name
            if index == 0:
                fill = _write_base(path, backing, disk_size, binaries)
            else:
                _create_layer(path, backing, disk_size, below=names[index - 1], binaries=binaries)
            layers.append({"name": name, "format": fmt, "check": _check_layer(path, fmt, binaries)})
            # the harness's from now on, read-only: no side's QEMU may write what both sides read
            os.chown(path, os.geteuid(), os.getegid())
            os.chmod(path, 0o444)
        meta = {
            "key": key,
            "material": material,
            "files": [[name, fmt] for name, fmt in names],
            "layers": layers,
            "fill_bytes": fill,
            "built": time.time(),
        }
        write_json_atomic(tmp / META_FILE, meta)
        final = root / key
        if final.exists() and load(key, root) is None:
            shutil.rmtree(final, ignore_errors=True)  # not a finished chain: never trusted
        vanished = ImageError(f"the backing chain {key} vanished after it was built")
        chain = publish_dir(tmp, final, lambda: load(key, root), vanished)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Chain(chain.key, chain.directory, chain.layers, True, time.monotonic() - start, chain.meta)


def _write_base(path: Path, backing: Backing, disk_size: int, binaries: Binaries) -> int:
    """The base: its fill written from the host into a raw file, converted where it is qcow2."""
    raw = path if backing.format == "raw" else path.with_suffix(".fill.raw")
    chunk = bytes([FILL_BYTE]) * FILL_CHUNK
    written = 0
    with open(raw, "wb") as fh:
        fh.truncate(disk_size)
        for offset, length in backing.extents(disk_size):
            fh.seek(offset)
            for at in range(0, length, FILL_CHUNK):
                fh.write(chunk[: min(FILL_CHUNK, length - at)])
            written += length
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(raw, 0o644)  # read by QEMU's account through a descriptor
    if backing.format == "raw":
        return written
    spec = ImageSpec(
        format=Format.QCOW2,
        size=disk_size,
        cluster_size=backing.cluster_size,
        extended_l2=backing.extended_l2,
    )
    try:
        with confine.Handoff(confine.account(binaries.runs_as)) as handoff:
            argv = [binaries.qemu_img, "convert", "-q", "-f", "raw", "-O", "qcow2",
                    "-o", ",".join(spec.create_options()),
                    handoff.read(raw), handoff.write(path, create=True)]  # fmt: skip
            proc.run(argv, timeout_s=3600, error_cls=ImageError, env=environ_for(binaries.qemu_img),
                     confined=handoff.popen_kwargs())  # fmt: skip
    finally:
        raw.unlink(missing_ok=True)
    return written


def _create_layer(
    path: Path, backing: Backing, disk_size: int, *, below: tuple[str, str], binaries: Binaries
) -> None:
    """An empty qcow2 layer with the base's options, naming the layer under it relatively."""
    spec = ImageSpec(
        format=Format.QCOW2,
        size=disk_size,
        cluster_size=backing.cluster_size,
        extended_l2=backing.extended_l2,
    )
    _overlay(
        path,
        spec,
        backing_name=below[0],
        backing_format=below[1],
        qemu_img=binaries.qemu_img,
        runs_as=binaries.runs_as,
    )


def _overlay(
    path: Path, spec: ImageSpec, *, backing_name: str, backing_format: str, qemu_img: str, runs_as: int | None
) -> None:
    # -u: the backing file is not opened (the account cannot reach it by name); its size is given
    with confine.Handoff(confine.account(runs_as)) as handoff:
        argv = [qemu_img, "create", "-q", "-f", "qcow2", "-u", "-b", backing_name,
                "-F", backing_format, "-o", ",".join(spec.create_options()),
                handoff.write(path, create=True), str(spec.size)]  # fmt: skip
        proc.run(argv, timeout_s=600, error_cls=ImageError, env=environ_for(qemu_img),
                 confined=handoff.popen_kwargs())  # fmt: skip


def _check_layer(path: Path, fmt: str, binaries: Binaries) -> str:
    """``qemu-img check`` of one layer alone; a layer that is not clean fails the build."""
    if fmt == "raw":
        return "not-applicable"
    result = images.check(
        path, Format.QCOW2, qemu_img=binaries.qemu_img, runs_as=binaries.runs_as, backed=True
    )
    if result.returncode != 0:
        raise ImageError(
            f"qemu-img check of the backing layer {path.name} says {result.verdict} (exit {result.returncode})"
        )
    return result.verdict


def create_overlay(path: Path, cell: Cell, chain: Chain, binaries: Binaries) -> images.CreatedImage:
    """A fresh overlay of ``cell``'s image over ``chain`` at ``path`` (replacing any old one), timed."""
    start = time.monotonic()
    overlay_on(path, cell.image, chain, qemu_img=binaries.qemu_img, runs_as=binaries.runs_as)
    return images.CreatedImage(
        path=path,
        spec=cell.image,
        create_s=time.monotonic() - start,
        allocated_bytes=images.allocated_bytes(path),
        file_bytes=path.stat().st_size,
    )


def overlay_on(path: Path, spec: ImageSpec, chain: Chain, *, qemu_img: str, runs_as: int | None) -> None:
    """A fresh overlay of ``spec`` over ``chain`` at ``path`` (replacing any old one), created by
    ``qemu_img`` as ``runs_as`` (a replay's, which has no :class:`Binaries`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    top, top_format = chain.layers[-1]
    _overlay(
        path,
        spec,
        backing_name=os.path.relpath(top, path.parent),
        backing_format=top_format,
        qemu_img=qemu_img,
        runs_as=runs_as,
    )


def create_disk(
    path: Path, cell: Cell, *, work_dir: Path, binaries: Binaries, host: dict[str, Any] | None = None
) -> images.CreatedImage:
    """The sample's disk: a fresh image, or a fresh overlay over the cell's chain (built once per
    key); ``host`` (a sample's host figures) gets the chain's line."""
    if cell.backing is None:
        return images.create(path, cell.image, qemu_img=binaries.qemu_img, runs_as=binaries.runs_as)
    chain = ensure(cell.backing, cell.image.size, work_dir=work_dir, binaries=binaries)
    if host is not None:
        host["chain"] = chain.as_dict()
    return create_overlay(path, cell, chain, binaries)


def drive_backing(cell: Cell, *, work_dir: Path, binaries: Binaries) -> tuple[tuple[Path, str], ...]:
    """What the disk's drive is given of its chain (:attr:`~harness.sample.vm.config.Drive.backing`)."""
    if cell.backing is None:
        return ()
    return ensure(cell.backing, cell.image.size, work_dir=work_dir, binaries=binaries).top_first
