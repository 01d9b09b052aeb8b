"""``diskbench bundle``: everything a bare x86-64 Linux machine needs to run a gate, in one file.

The tree (unpacked to ``/tmp/diskbench-bundle-ID`` by the entry script)::

    bin/            sh wrappers: qemu-system-x86_64, qemu-img, qemu-io, git (through the loader), diskbench
    libexec/        the programs themselves
    lib/            every library they load, the loader; lib/qemu/ QEMU's accelerator modules
    share/qemu/     the firmware QEMU loads for an x86 guest (-L): SeaBIOS, the PVH and linuxboot ROMs
    cache/guest/    the built guest, by its recipe's hash ($DISKBENCH_CACHE)
    harness/ images/ policy.toml scripts/   the harness as in a checkout: its recipe and policy
    site/           the pure-Python packages it imports; site-cpXY/ the compiled ones, per CPython
    env.sh          the environment (the Python, PATH, PYTHONPATH, the cache), sourced by bin/diskbench
    bundle.json     what is inside: versions, sizes

The harness finds its recipe and policy beside the package (:data:`harness.paths.REPO_ROOT` is the
bundle's root), the guest through ``$DISKBENCH_CACHE``; ``bin/diskbench`` names the bundle's QEMU
with ``--qemu`` and ``--qemu-img``.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import lzma
import os
import shutil
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from harness import __version__
from harness.bundle.entry import DISKBENCH_SCRIPT, ENTRY_NAME, ENV_SCRIPT, entry_header
from harness.bundle.natives import Program, install_programs
from harness.bundle.python import install_packages, own_tag
from harness.errors import InfraError, UsageError
from harness.files import file_digest
from harness.guest import MANIFEST_NAME, GuestArtifacts, recipe_hash
from harness.host import proc
from harness.paths import REPO_ROOT
from harness.subject.binaries import Binaries

#: the most the bundle may weigh: a bare machine's command brings at most 64 MiB
MAX_BUNDLE_BYTES = 60 * 1024 * 1024
#: the CPythons the bundle carries compiled modules for (the running one's always)
PYTHON_TAGS = ("cp311", "cp312", "cp313")
#: xz's preset (after the x86 BCJ filter): -9e gains 2 % on the guest's tools drive over -6 for
#: 15 % more time
XZ_PRESET = 6
#: a dictionary that spans QEMU's libraries and the guest's drives (unpacking needs as much memory)
XZ_DICT_MIB = 256
#: packed natives and guests kept in the cache, per part
KEEP_PARTS = 2
#: QEMU's data files an x86 guest with direct kernel boot loads, from its data directories
FIRMWARE = (
    "bios-256k.bin",
    "bios.bin",
    "bios-microvm.bin",
    "kvmvapic.bin",
    "linuxboot.bin",
    "linuxboot_dma.bin",
    "multiboot.bin",
    "multiboot_dma.bin",
    "pvh.bin",
    "qboot.rom",
    "sgabios.bin",
)
#: the guest's install payloads the bundle carries: "full" (88 packages, 141 MiB) would not fit
BUNDLED_PAYLOADS = ("small",)
#: the harness's files the bundle carries beside the package (paths relative to the checkout)
CHECKOUT_FILES = ("images", "policy.toml", "scripts/kvm-check.sh")


@dataclass(frozen=True)
class BundleInfo:
    """A built bundle: its entry file and what went into it."""

    path: Path
    bundle_id: str
    size_bytes: int
    unpacked_bytes: int
    parts: dict[str, int]  # part of the tree -> bytes unpacked
    qemu_version: str
    guest: str
    python_tags: tuple[str, ...]
    compiled: tuple[str, ...]  # distributions with compiled modules, carried per CPython
    build_s: float
    libraries: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": 1,
            "diskbench": __version__,
            "id": self.bundle_id,
            "entry": self.path.name,
            "size_bytes": self.size_bytes,
            "unpacked_bytes": self.unpacked_bytes,
            "parts": self.parts,
            "qemu_version": self.qemu_version,
            "guest": self.guest,
            "python_tags": list(self.python_tags),
            "compiled": list(self.compiled),
            "libraries": list(self.libraries),
            "build_s": round(self.build_s, 1),
        }


def make_bundle(
    out_dir: Path,
    *,
    binaries: Binaries,
    guest: GuestArtifacts,
    wheel_cache: Path,
    parts_cache: Path,
    python_tags: Iterable[str] = PYTHON_TAGS,
    progress: Callable[[str], None] = lambda _m: None,
) -> BundleInfo:
    """Build the bundle into ``out_dir`` (created; an existing bundle there is replaced) from
    ``binaries`` (their qemu-io beside qemu-img), the built ``guest`` and this harness.  Compiled
    modules for the CPythons of ``python_tags`` other than the running one come from PyPI wheels,
    kept in ``wheel_cache``; the compressed natives and guest are kept in ``parts_cache``."""
    started = time.monotonic()
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tags = tuple(sorted({*python_tags, own_tag()}))
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=out_dir) as tmp:
        root = Path(tmp) / "root"
        root.mkdir(mode=0o755)
        progress("bundle: QEMU, qemu-img, qemu-io and git with their libraries")
        qemu_version, libs = _natives(root, binaries)
        progress(f"bundle: the guest {guest.recipe_hash}")
        _guest(root, guest)
        progress(f"bundle: the harness and its Python packages ({', '.join(tags)})")
        _harness(root)
        if recipe_hash(root / "images") != guest.recipe_hash:
            raise InfraError(
                f"bundle: the guest recipe in images/ changed while bundling (its hash is not the built "
                f"guest's {guest.recipe_hash}): run diskbench bundle again"
            )
        compiled = install_packages(root, tags, wheel_cache, progress)
        parts = _sizes(root)
        bundle_json = {
            "diskbench": __version__,
            "qemu_version": qemu_version,
            "guest": guest.recipe_hash,
            "python_tags": list(tags),
            "parts": parts,
        }
        (root / "bundle.json").write_text(json.dumps(bundle_json, indent=1) + "\n")
        packed = _pack(root, Path(tmp), parts_cache, progress)
        payload = _payload(packed, Path(tmp))
        bundle_id = file_digest(payload)[:12]
        header = entry_header(bundle_id=bundle_id, what=f"diskbench {__version__}, {qemu_version}")
        entry = out_dir / ENTRY_NAME
        partial = Path(tmp) / ENTRY_NAME
        with open(partial, "wb") as f, open(payload, "rb") as src:
            f.write(header)
            shutil.copyfileobj(src, f, 1 << 20)
        partial.chmod(0o755)
        os.replace(partial, entry)
    info = BundleInfo(
        path=entry,
        bundle_id=bundle_id,
        size_bytes=entry.stat().st_size,
        unpacked_bytes=sum(parts.values()),
        parts=parts,
        qemu_version=qemu_version,
        guest=guest.recipe_hash,
        python_tags=tags,
        compiled=compiled,
        build_s=time.monotonic() - started,
        libraries=tuple(libs),
    )
    (out_dir / "bundle.json").write_text(json.dumps(info.as_dict(), indent=1) + "\n")
    if info.size_bytes > MAX_BUNDLE_BYTES:
        biggest = ", ".join(
            f"{k} {v / 2**20:.1f} MiB" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])
        )
        raise InfraError(
            f"the bundle is {info.size_bytes / 2**20:.1f} MiB, over {MAX_BUNDLE_BYTES / 2**20:.0f} MiB "
            f"(unpacked: {biggest})"
        )
    return info


def check_out_dir(out_dir: Path) -> None:
    """OUT_DIR is a directory that is empty, or holds a bundle already; anything else is bad input."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"bundle: {out_dir} is not a directory: name a new or empty one")
    if out_dir.is_dir():
        others = sorted(p.name for p in out_dir.iterdir() if p.name not in (ENTRY_NAME, "bundle.json"))
        if others:
            raise UsageError(
                f"bundle: {out_dir} holds other files ({', '.join(others[:3])}): name a new or empty directory"
            )


def _which(name: str, what: str) -> Path:
    found = shutil.which(name)
    if not found:
        raise InfraError(f"bundle: {what} {name!r} is not an executable here: install it or name another")
    return Path(found).resolve()


def _natives(root: Path, binaries: Binaries) -> tuple[str, list[str]]:
    """QEMU's three programs and git, their libraries and the loader, QEMU's accelerator modules
    and firmware; returns QEMU's version line and the libraries' names."""
    qemu = _which(binaries.qemu, "QEMU")
    qemu_img = _which(binaries.qemu_img, "qemu-img")
    qemu_io = qemu_img.with_name("qemu-io")
    if not os.access(qemu_io, os.X_OK):
        raise InfraError(f"bundle: no qemu-io beside {qemu_img}: the replay cells need it")
    git = _which("git", "git (the gate checks its sides out with it)")
    modules = _accel_modules(qemu)
    version = proc.run([str(qemu), "--version"], timeout_s=60).stdout.splitlines()[0].strip()
    libs = install_programs(
        root,
        [
            Program(
                qemu,
                "qemu-system-x86_64",
                env={"QEMU_MODULE_DIR": "$r/lib/qemu"},
                args=("-L", "$r/share/qemu"),
            ),
            Program(qemu_img, "qemu-img"),
            Program(qemu_io, "qemu-io"),
            Program(git, "git"),
        ],
        modules=modules,
    )
    _firmware(root / "share" / "qemu", qemu)
    (root / "share" / "git-templates").mkdir(parents=True)
    return version, libs


def _module_dirs(qemu: Path) -> list[Path]:
    prefix = qemu.parent.parent
    return [prefix / "lib" / "x86_64-linux-gnu" / "qemu", prefix / "lib64" / "qemu", prefix / "lib" / "qemu"]


def _accel_modules(qemu: Path) -> list[Path]:
    """The accelerator modules of ``qemu``'s build (a QEMU built with modules loads TCG from one:
    Debian's ``accel-tcg-x86_64.so``); the display, audio and USB modules no guest here uses stay."""
    for directory in _module_dirs(qemu):
        found = sorted(directory.glob("accel-*x86_64.so"))
        if found:
            return found
    return []


def _firmware_dirs(qemu: Path) -> list[Path]:
    prefix = qemu.parent.parent
    dirs = [
        prefix / "share" / "qemu",
        prefix / "share" / "seabios",
        Path("/usr/share/qemu"),
        Path("/usr/share/seabios"),
    ]
    return list(dict.fromkeys(dirs))


def _firmware(into: Path, qemu: Path) -> None:
    """The files of :data:`FIRMWARE` from ``qemu``'s data directories (links followed); the
    guest's BIOS and the PVH ROM must be among them."""
    into.mkdir(parents=True, exist_ok=True)
    for name in FIRMWARE:
        for directory in _firmware_dirs(qemu):
            if (directory / name).is_file():
                shutil.copyfile(directory / name, into / name)
                break
    for needed in ("bios-256k.bin", "pvh.bin"):
        if not (into / needed).is_file():
            raise InfraError(
                f"bundle: QEMU's {needed} is in none of {', '.join(map(str, _firmware_dirs(qemu)))}"
            )


def _guest(root: Path, guest: GuestArtifacts) -> None:
    """The guest's files and manifest, where ``build_guest`` finds them under ``$DISKBENCH_CACHE``:
    the payloads of :data:`BUNDLED_PAYLOADS` only (the manifest says so)."""
    into = root / "cache" / "guest" / guest.recipe_hash
    into.mkdir(parents=True)
    missing = [name for name in BUNDLED_PAYLOADS if name not in guest.payloads]
    if missing:
        raise InfraError(f"bundle: the guest {guest.recipe_hash} has no payload {', '.join(missing)}")
    carried = replace(
        guest,
        payloads={k: v for k, v in guest.payloads.items() if k in BUNDLED_PAYLOADS},
        payload_packages={k: v for k, v in guest.payload_packages.items() if k in BUNDLED_PAYLOADS},
    )
    files = [guest.kernel, guest.initrd, *carried.payloads.values(), *([guest.tools] if guest.tools else [])]
    for path in files:
        shutil.copyfile(path, into / path.name)
    (into / MANIFEST_NAME).write_text(json.dumps(carried.as_dict(), indent=2) + "\n")


def _harness(root: Path) -> None:
    """The package (sources and data, no caches), the recipe, the policy, the check, and the scripts
    that set up the environment."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO_ROOT / "harness", root / "harness", ignore=ignore)
    for name in CHECKOUT_FILES:
        source = REPO_ROOT / name
        if not source.exists():
            raise InfraError(f"bundle: this checkout lacks {name}: run it from a full clone")
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        else:
            shutil.copyfile(source, root / name)
    (root / "scripts" / "kvm-check.sh").chmod(0o755)
    (root / "env.sh").write_text(ENV_SCRIPT)
    (root / "bin" / "diskbench").write_text(DISKBENCH_SCRIPT)
    (root / "bin" / "diskbench").chmod(0o755)


def _sizes(root: Path) -> dict[str, int]:
    """Bytes per part of the tree (top-level directory or file)."""
    sizes: dict[str, int] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            part = path.relative_to(root).parts[0]
            sizes[part] = sizes.get(part, 0) + path.stat().st_size
    return dict(sorted(sizes.items()))


#: the parts of the tree packed apart, each its own ``tar.xz`` (top-level names; the rest is
#: "harness").  QEMU's programs and libraries go with the guest in one stream: the guest's tools
#: drive holds many of the same libraries (fio links Ceph, Gluster and RDMA), which a dictionary
#: that spans both finds again (50.9 MB for both against 61.3 MB packed apart).  That part is
#: kept in the cache by its content, so that a second bundle of the same QEMU and guest packs only
#: the harness
CHUNKS = {"qemu-guest": ("lib", "libexec", "share", "cache")}
#: in the qemu-guest stream, what comes first: the libraries, then the drive that repeats them
_ORDER = ("lib", "libexec", "share", "tools.img", "payload-", "initramfs", "vmlinux")
#: what a part is kept in the cache under, beside the digest of its files: the compression's settings
_XZ_KEY = f"x86+lzma2-{XZ_PRESET}-dict{XZ_DICT_MIB}"


def _rank(relative: Path) -> tuple[int, int, str]:
    """Where a path goes in its chunk: directories first, then by :data:`_ORDER`, then by name."""
    text = str(relative)
    for i, start in enumerate(_ORDER):
        if text.startswith(start) or relative.name.startswith(start):
            return (1, i, text)
    return (1, len(_ORDER), text)


def _chunk_of(relative: Path) -> str:
    for name, tops in CHUNKS.items():
        if relative.parts[0] in tops:
            return name
    return "harness"


def _chunks(root: Path) -> dict[str, list[Path]]:
    """The tree's paths (sorted, directories before what they hold) by chunk."""
    out: dict[str, list[Path]] = {"harness": [], **{name: [] for name in CHUNKS}}
    for path in sorted(root.rglob("*")):
        out[_chunk_of(path.relative_to(root))].append(path)
    return {
        name: sorted(paths, key=lambda p: (0, 0, str(p)) if p.is_dir() else _rank(p.relative_to(root)))
        for name, paths in out.items()
    }


def _chunk_digest(root: Path, paths: list[Path]) -> str:
    sha = hashlib.sha256(_XZ_KEY.encode())
    for path in paths:
        mode = 0o755 if path.is_dir() or path.stat().st_mode & 0o100 else 0o644
        sha.update(f"{path.relative_to(root)}\0{mode:o}\0".encode())
        if path.is_file():
            sha.update(file_digest(path).encode())
    return sha.hexdigest()


def _write_tar_xz(root: Path, paths: list[Path], target: Path, stop: threading.Event) -> None:
    """``paths`` of the tree as one ``tar.xz`` at ``target``: root-owned, their modes kept, x86 code
    filtered (BCJ) before LZMA2."""

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        info.mode = 0o755 if info.isdir() or info.mode & 0o100 else 0o644
        return info

    filters: list[dict[str, Any]] = [
        {"id": lzma.FILTER_X86},
        {"id": lzma.FILTER_LZMA2, "preset": XZ_PRESET, "dict_size": XZ_DICT_MIB * 2**20},
    ]
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        with (
            lzma.open(partial, "wb", format=lzma.FORMAT_XZ, filters=filters) as xz,
            tarfile.open(fileobj=xz, mode="w|", format=tarfile.PAX_FORMAT) as tar,
        ):
            for path in paths:
                info = clean(tar.gettarinfo(str(path), arcname=str(path.relative_to(root))))
                if info.isfile():
                    with open(path, "rb") as f:
                        tar.addfile(info, _Stoppable(f, stop))
                else:
                    tar.addfile(info)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


class _Stoppable:
    """A file read for the tar, that stops the packing (an error) once ``stop`` is set: an
    interrupted bundle does not wait minutes for its compression to end."""

    def __init__(self, f: BinaryIO, stop: threading.Event) -> None:
        self._f, self._stop = f, stop

    def read(self, size: int = -1) -> bytes:
        if self._stop.is_set():
            raise InfraError("bundle: packing stopped")
        return self._f.read(size)


def _pack(root: Path, out: Path, parts_cache: Path, progress: Callable[[str], None]) -> list[Path]:
    """The tree's chunks as ``tar.xz`` files (the big ones from ``parts_cache`` when their files are
    the same), compressed side by side; their paths, in the order the entry unpacks them."""
    chunks = _chunks(root)
    parts_cache.mkdir(parents=True, exist_ok=True)
    jobs: dict[str, Path] = {}
    done: list[Path] = []
    for name, paths in chunks.items():
        if name == "harness":
            jobs[name] = out / f"{name}.tar.xz"
            continue
        cached = parts_cache / f"{name}-{_chunk_digest(root, paths)[:20]}.tar.xz"  # name-DIGEST
        if cached.is_file():
            os.utime(cached)  # in use: pruning spares it
            progress(f"bundle: {name}: packed already ({cached})")
            done.append(cached)
        else:
            jobs[name] = cached
    if jobs:
        progress(
            f"bundle: compressing {', '.join(jobs)} (xz -{XZ_PRESET}, a dictionary of {XZ_DICT_MIB} MiB)"
        )
    stop = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        futures = [
            pool.submit(_write_tar_xz, root, chunks[name], target, stop) for name, target in jobs.items()
        ]
        try:
            for future in futures:
                future.result()
        except BaseException:
            stop.set()  # the other parts stop at their next read: the pool's exit waits for them
            raise
    for name, target in jobs.items():
        if name != "harness":
            for old in sorted(parts_cache.glob(f"{name}-*.tar.xz"), key=lambda p: p.stat().st_mtime)[
                :-KEEP_PARTS
            ]:
                if old != target:
                    old.unlink(missing_ok=True)
    return [*done, *jobs.values()]


def _payload(parts: list[Path], into: Path) -> Path:
    """The entry's payload: a plain ``tar`` of the chunks (each compressed already)."""
    payload = into / "payload.tar"
    with tarfile.open(payload, "w", format=tarfile.PAX_FORMAT) as tar:
        for part in parts:
            name = (
                part.name.removesuffix(".tar.xz").rsplit("-", 1)[0] + ".tar.xz"
                if part.parent != into
                else part.name
            )
            info = tar.gettarinfo(str(part), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(part, "rb") as f:
                tar.addfile(info, f)
    return payload
