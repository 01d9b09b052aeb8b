"""Build the benchmark guest from pinned Debian packages, and the pure helpers it needs.

The guest is a kernel plus an initramfs, booted with QEMU's direct kernel boot:

* ``vmlinux``: the ELF kernel taken out of Debian's bzImage. Under TCG the XZ
  decompression of a bzImage costs seconds on every boot; QEMU boots the ELF
  directly through PVH.
* ``initramfs.cpio``: busybox, the real tools the workloads call (mke2fs,
  e2fsck, sfdisk, dpkg-deb, tar, bonnie++), exactly the shared libraries they
  need, the kernel modules for every disk bus in their load order, and
  ``images/init``.
* ``payload-<name>.img``: ext2 images holding the install workload's input,
  Debian's minbase package set repacked with uncompressed members so that the
  guest measures disk IO rather than decompression.

Everything comes from ``apt-get download`` of pinned versions; nothing is
downloaded as a prebuilt image. The build goes to ``cache/guest/<recipe_hash>/``
and is reused until a file under ``images/`` (or :data:`BUILD_CODE_VERSION`)
changes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import GuestBuildError
from harness.guest.cpio import CpioWriter
from harness.guest.elf import (
    ElfError,
    elf_interpreter,
    elf_needed,
    elf_runpath,
    elf_section_data,
    module_depends,
    module_load_order,
    module_name,
    parse_modinfo,
    vmlinux_from_bzimage,
)
from harness.guest.packages import extract_deb, fetch_debs, prune_package_cache, repack_uncompressed
from harness.guest.recipe import (
    Log,
    PayloadPackage,
    Recipe,
    RecipeError,
    load_recipe,
    read_recipe_file,
    recipe_files,
    recipe_hash,
)
from harness.paths import IMAGES_DIR, cache_dir
from harness.proc import run

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1

#: Where the dynamic loader looks in the guest (no ld.so.cache is built).
LIBRARY_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/lib",
    "/usr/lib",
)


class Tree:
    """A directory of extracted packages, seen with guest paths (``/sbin/mke2fs``).

    Symlinks are resolved inside the tree, never against the host.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def host(self, guest_path: str) -> Path:
        # normalised from the guest's root: '..' stops at the tree's top, never above it
        return self.root / os.path.normpath("/" + guest_path).lstrip("/")

    def resolve(self, guest_path: str, *, depth: int = 0) -> str | None:
        """The guest path after following symlinks in every component, or None if missing."""
        if depth > 40:
            return None
        parts = PurePosixPath(os.path.normpath("/" + guest_path)).parts[1:]
        current = PurePosixPath("/")
        for i, part in enumerate(parts):
            candidate = current / part
            host = self.host(str(candidate))
            if host.is_symlink():
                target = os.readlink(host)
                base = PurePosixPath("/") if target.startswith("/") else current
                rest = "/".join(parts[i + 1 :])
                joined = os.path.normpath(str(base / target / rest) if rest else str(base / target))
                return self.resolve(joined, depth=depth + 1)
            if not host.exists() and not host.is_symlink():
                return None
            current = candidate
        return str(current)

    def find_library(self, soname: str, runpath: Sequence[str] = ()) -> str | None:
        """Where the dynamic loader finds ``soname``: the needing file's RUNPATH, then the
        standard directories."""
        for d in (*runpath, *LIBRARY_DIRS):
            if self.resolve(f"{d}/{soname}") is not None:
                return f"{d}/{soname}"
        return None


@dataclass
class _Collected:
    files: dict[str, Path] = field(default_factory=dict)  # guest path -> host file
    symlinks: dict[str, str] = field(default_factory=dict)  # guest path -> target


def _guest_path(path: str) -> str:
    """``path`` normalised from the guest's root: no ``.``, ``..`` or ``//`` left in it."""
    return "/" + os.path.normpath("/" + path).lstrip("/")


def collect_with_libraries(
    tree: Tree, paths: Sequence[str], *, packages_table: str = "initramfs.packages"
) -> _Collected:
    """The files at ``paths``, their symlink chains, and every shared library they need.

    DT_NEEDED is followed recursively (in the needing file's RUNPATH, then the
    standard directories), and each executable's PT_INTERP (the dynamic loader)
    is included; a library that no pinned package provides fails the build with
    its soname, naming ``packages_table``.

    Every path is normalised and every symlink followed inside the tree: a
    RUNPATH with ``..`` or a symlink in a parent directory never reaches a
    host file, and no recorded path names anything outside the tree.
    """
    got = _Collected()
    queue: list[tuple[str, str]] = [(p, "recipe") for p in paths]
    while queue:
        wanted, wanted_by = queue.pop(0)
        path = _guest_path(wanted)
        if path in got.files or path in got.symlinks:
            continue
        # Record every symlink on the way, by the names asked for, so the guest sees the same
        # names.  Each step's directory is resolved in the tree first, and a relative target
        # is taken from there (as the kernel does): the host never follows a link of the tree.
        current: str | None = path
        real = None
        for _ in range(40):
            assert current is not None
            parent = tree.resolve(str(PurePosixPath(current).parent))
            if parent is None:
                break
            host = tree.host(str(PurePosixPath(parent) / PurePosixPath(current).name))
            if not host.is_symlink():
                real = tree.resolve(current)
                break
            target = os.readlink(host)
            got.symlinks[current] = target
            current = _guest_path(str(PurePosixPath(parent) / target))
        if real is None:
            raise RecipeError(
                f"{wanted} (needed by {wanted_by}) is in no pinned {packages_table.split('.')[0]} "
                f"package; add its package to [{packages_table}] in images/recipe.toml"
            )
        assert current is not None
        if real != current:
            got.symlinks.setdefault(current, real)
        host = tree.host(real)
        if not host.is_file():
            raise RecipeError(
                f"{wanted} (needed by {wanted_by}) is not a regular file in its package "
                f"(it is {real}): list files only in images/recipe.toml"
            )
        got.files[real] = host
        data = host.read_bytes()
        if not data.startswith(b"\x7fELF"):
            continue
        try:
            interp, needed, runpath = elf_interpreter(data), elf_needed(data), elf_runpath(data)
        except ElfError as exc:
            raise RecipeError(
                f"{real} (needed by {wanted_by}) is an ELF file this build cannot read ({exc}); "
                "list another file in images/recipe.toml"
            ) from None
        if interp:
            queue.append((interp, real))
        origin = str(PurePosixPath(real).parent)
        runpath = [d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for d in runpath]
        # $LIB, $PLATFORM and other tokens are not expanded: such a directory is skipped
        runpath = [_guest_path(d) for d in runpath if d.startswith("/") and "$" not in d]
        for soname in needed:
            if "/" in soname:
                raise RecipeError(
                    f"{real} needs {soname!r}, a path, not a library name: list such files "
                    "in images/recipe.toml instead"
                )
            lib = tree.find_library(soname, runpath)
            if lib is None:
                raise RecipeError(
                    f"shared library {soname} (needed by {real}) is in no pinned "
                    f"{packages_table.split('.')[0]} package; add the library's package to "
                    f"[{packages_table}]"
                )
            queue.append((lib, real))
    return got


# --------------------------------------------------------------------------- artifacts


@dataclass(frozen=True)
class GuestArtifacts:
    """A built guest: what the VM runner boots and what a record says it booted."""

    build_dir: Path
    kernel: Path  # ELF vmlinux, booted through PVH
    initrd: Path  # uncompressed cpio newc
    payloads: Mapping[str, Path]  # "small", "full" -> ext2 image
    recipe_hash: str
    kernel_version: str  # uname -r of the guest, e.g. "6.1.0-50-amd64"
    packages: Mapping[str, str]  # every pinned package, name -> version
    payload_packages: Mapping[str, int] = field(default_factory=dict)  # payload -> count
    modules: tuple[str, ...] = ()  # insmod order
    tools: Path | None = None  # ext2 image of the [tools] files, mounted at /tools (fio)

    def as_dict(self) -> dict[str, Any]:
        """The manifest: paths relative to the build directory."""
        return {
            "format": MANIFEST_FORMAT,
            "recipe_hash": self.recipe_hash,
            "kernel_version": self.kernel_version,
            "kernel": self.kernel.name,
            "initrd": self.initrd.name,
            "payloads": {k: v.name for k, v in self.payloads.items()},
            "payload_packages": dict(self.payload_packages),
            "modules": list(self.modules),
            "packages": dict(sorted(self.packages.items())),
            "tools": self.tools.name if self.tools is not None else None,
        }

    @classmethod
    def load(cls, build_dir: Path) -> GuestArtifacts:
        """Read ``manifest.json`` of a finished build; a bad one says to rebuild."""
        path = build_dir / MANIFEST_NAME
        try:
            data = json.loads(path.read_text())
            if data.get("format") != MANIFEST_FORMAT:
                raise ValueError(f"manifest format {data.get('format')!r}")
            art = cls(
                build_dir=build_dir,
                kernel=build_dir / data["kernel"],
                initrd=build_dir / data["initrd"],
                payloads={k: build_dir / v for k, v in data["payloads"].items()},
                recipe_hash=str(data["recipe_hash"]),
                kernel_version=str(data["kernel_version"]),
                packages={str(k): str(v) for k, v in data["packages"].items()},
                payload_packages={str(k): int(v) for k, v in data["payload_packages"].items()},
                modules=tuple(str(m) for m in data["modules"]),
                tools=build_dir / str(data["tools"]) if data.get("tools") else None,
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise GuestBuildError(
                f"guest build {build_dir} is unreadable ({exc}); rebuild it with "
                f"`diskbench guest build --force`"
            ) from exc
        for p in (art.kernel, art.initrd, *art.payloads.values(), *([art.tools] if art.tools else [])):
            if not p.is_file():
                raise GuestBuildError(
                    f"guest build {build_dir} lacks {p.name}; rebuild it with `diskbench guest build --force`"
                )
        return art


# --------------------------------------------------------------------------- build


KEEP_BUILDS = 4


def build_guest(
    *,
    recipe_dir: Path = IMAGES_DIR,
    cache: Path | None = None,
    log: Log = print,
    force: bool = False,
) -> GuestArtifacts:
    """Build (or reuse) the guest for the recipe in ``recipe_dir``.

    The result lives in ``cache/guest/<recipe_hash>/``; an existing complete
    build is returned at once unless ``force``. Downloads are kept in
    ``cache/debs/`` and repacked payload packages in ``cache/debs-uncompressed/``.
    """
    cache = cache if cache is not None else cache_dir()
    rhash = recipe_hash(recipe_dir)
    guest_root = cache / "guest"
    out = guest_root / rhash
    if out.is_dir() and not force:
        try:
            art = GuestArtifacts.load(out)
        except GuestBuildError:
            log(f"guest: {out} is incomplete, rebuilding")
        else:
            log(f"guest: using cached build {out}")
            os.utime(out)  # marks it in use, so that pruning spares it
            return art
    recipe = load_recipe(recipe_dir)
    start = time.monotonic()
    log(f"guest: building recipe {rhash} into {out}")
    guest_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=guest_root, prefix=f".{rhash}-"))
    tmp.chmod(0o755)
    try:
        art = _build_into(recipe, recipe_dir, cache, tmp, rhash, log)
        (tmp / MANIFEST_NAME).write_text(json.dumps(art.as_dict(), indent=2) + "\n")
        for scratch in ("rootfs", "kernel-tree", "payload-trees", "tools-root", "tools-tree"):
            shutil.rmtree(tmp / scratch, ignore_errors=True)
        if out.exists():
            old = guest_root / f".{rhash}-old-{os.getpid()}"
            os.replace(out, old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, out)
        except OSError:
            # Another build of the same recipe finished first: use that one.
            shutil.rmtree(tmp, ignore_errors=True)
            return GuestArtifacts.load(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"guest: built in {time.monotonic() - start:.1f} s: {out}")
    prune_builds(guest_root, keep=KEEP_BUILDS, log=log)
    return GuestArtifacts.load(out)


def prune_builds(guest_root: Path, *, keep: int, log: Log, idle_s: float = 86400.0) -> None:
    """Remove builds (each is ~300 MB) beyond the ``keep`` newest that were unused for a day.

    Builds used within ``idle_s`` are kept whatever their number: another
    checkout (another commit under asv, the other side of a gate, a sweep in
    progress) may be running on another recipe right now.
    """
    builds = sorted(
        (p for p in guest_root.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    now = time.time()
    for old in builds[keep:]:
        if now - old.stat().st_mtime < idle_s:
            continue
        log(f"guest: removing old build {old}")
        shutil.rmtree(old, ignore_errors=True)


def _build_into(
    recipe: Recipe, recipe_dir: Path, cache: Path, tmp: Path, rhash: str, log: Log
) -> GuestArtifacts:
    debs = cache / "debs"
    pins = recipe.all_pins()
    paths = fetch_debs(pins, debs, log)

    # Kernel: vmlinux plus the module files, from the one kernel package.
    log(f"guest: extracting {recipe.kernel_package}={recipe.kernel_version}")
    ktree = tmp / "kernel-tree"
    extract_deb(paths[recipe.kernel_package], ktree)
    kversion, bzimage = _find_kernel(ktree)
    vmlinux = vmlinux_from_bzimage(bzimage.read_bytes())
    (tmp / "vmlinux").write_bytes(vmlinux)
    log(f"guest: vmlinux {kversion}: {len(vmlinux) / 2**20:.1f} MiB")
    moddir = ktree / "lib" / "modules" / kversion
    modules = _resolve_modules(moddir, recipe.modules)
    log(f"guest: {len(modules)} kernel modules in load order: {' '.join(m for m, _ in modules)}")

    # Initramfs: tools with their libraries, busybox, modules, init.
    rootfs = tmp / "rootfs"
    for name in recipe.initramfs_packages:
        extract_deb(paths[name], rootfs)
    collected = collect_with_libraries(Tree(rootfs), recipe.initramfs_files)
    log(f"guest: initramfs tools: {len(recipe.initramfs_files)} files, {len(collected.files)} with libraries")
    initrd = tmp / "initramfs.cpio"
    _write_initramfs(initrd, recipe_dir, collected, modules, kversion, rhash)
    log(f"guest: initramfs.cpio: {initrd.stat().st_size / 2**20:.1f} MiB")

    # Payloads: repacked uncompressed packages on ext2 images.
    repacked_dir = cache / "debs-uncompressed"
    repacked_dir.mkdir(parents=True, exist_ok=True)
    repacked: dict[str, Path] = {}
    todo = [p for p in recipe.payload if not (repacked_dir / paths[p.name].name).is_file()]
    if todo:
        log(f"guest: repacking {len(todo)} payload packages uncompressed")
    for p in recipe.payload:
        target = repacked_dir / paths[p.name].name
        if not target.is_file():
            repack_uncompressed(paths[p.name], target, tmp)
        repacked[p.name] = target
    prune_package_cache(repacked_dir, keep=repacked.values(), log=log)
    payload_files: dict[str, Path] = {}
    counts: dict[str, int] = {}
    for set_name, pkgs in recipe.payload_sets().items():
        img = tmp / f"payload-{set_name}.img"
        _write_payload_image(img, tmp / "payload-trees" / set_name, pkgs, repacked)
        payload_files[set_name] = img
        counts[set_name] = len(pkgs)
        log(f"guest: payload-{set_name}.img: {len(pkgs)} packages, {img.stat().st_size / 2**20:.1f} MiB")

    tools = None
    if recipe.tools_files:
        troot = tmp / "tools-root"
        for name in recipe.tools_packages:
            extract_deb(paths[name], troot)
        got = collect_with_libraries(Tree(troot), recipe.tools_files, packages_table="tools.packages")
        tools = tmp / "tools.img"
        _write_tools_image(tools, tmp / "tools-tree", got, recipe.tools_files, Tree(troot))
        log(
            f"guest: tools.img: {len(recipe.tools_files)} tools, {len(got.files)} files with "
            f"libraries, {tools.stat().st_size / 2**20:.1f} MiB"
        )

    return GuestArtifacts(
        build_dir=tmp,
        kernel=tmp / "vmlinux",
        initrd=initrd,
        payloads=payload_files,
        recipe_hash=rhash,
        kernel_version=kversion,
        packages=pins,
        payload_packages=counts,
        modules=tuple(m for m, _ in modules),
        tools=tools,
    )


def _find_kernel(ktree: Path) -> tuple[str, Path]:
    moddirs = sorted((ktree / "lib" / "modules").iterdir()) if (ktree / "lib" / "modules").is_dir() else []
    if len(moddirs) != 1:
        raise GuestBuildError(f"kernel package has {len(moddirs)} module trees, expected one")
    kversion = moddirs[0].name
    bz = ktree / "boot" / f"vmlinuz-{kversion}"
    if not bz.is_file():
        raise GuestBuildError(f"kernel package lacks boot/vmlinuz-{kversion}")
    return kversion, bz


def _resolve_modules(moddir: Path, wanted: Sequence[str]) -> list[tuple[str, Path]]:
    """Load order of ``wanted`` plus dependencies, read from each ``.ko``'s ``.modinfo``."""
    files: dict[str, Path] = {}
    for ko in (moddir / "kernel").rglob("*.ko"):
        files[module_name(ko.name)] = ko
    builtin_file = moddir / "modules.builtin"
    builtin = (
        [module_name(line.strip()) for line in builtin_file.read_text().splitlines() if line.strip()]
        if builtin_file.is_file()
        else []
    )
    cache: dict[str, list[str]] = {}

    def depends(name: str) -> list[str]:
        if name not in cache:
            if name not in files:
                raise GuestBuildError(
                    f"kernel module {name} is neither a .ko nor built in; fix [kernel] modules "
                    f"in images/recipe.toml"
                )
            section = elf_section_data(files[name].read_bytes(), ".modinfo")
            cache[name] = module_depends(parse_modinfo(section or b""))
        return cache[name]

    order = module_load_order(wanted, depends, builtin)
    return [(m, files[m]) for m in order]


_BUSYBOX_LINKS = ("/bin/sh",)


def _write_initramfs(
    path: Path,
    recipe_dir: Path,
    collected: _Collected,
    modules: Sequence[tuple[str, Path]],
    kversion: str,
    rhash: str,
) -> None:
    with path.open("wb") as f:
        w = CpioWriter(f)
        for d in ("dev", "proc", "sys", "tmp", "run", "mnt", "target", "payload", "etc", "root"):
            w.add_dir(d)
        # The kernel opens /dev/console for init before anything is mounted.
        w.add_chardev("dev/console", 5, 1)
        w.add_chardev("dev/null", 1, 3, 0o666)
        for guest, host in sorted(collected.files.items()):
            mode = stat.S_IMODE(host.stat().st_mode)
            w.add_file(guest, host.read_bytes(), mode)
        for guest, target in sorted(collected.symlinks.items()):
            w.add_symlink(guest, target)
        for link in _BUSYBOX_LINKS:
            w.add_symlink(link, "/bin/busybox")
        # only regular files inside images/ (read_recipe_file refuses symlinks out of it)
        w.add_file("init", read_recipe_file(recipe_dir, "init"), 0o755)
        for name in recipe_files(recipe_dir):
            script = PurePosixPath(name)
            if script.parent.as_posix() == "workloads" and script.suffix in (".sh", ".fio"):
                w.add_file(f"usr/share/diskbench/{script.name}", read_recipe_file(recipe_dir, name), 0o644)
        mod_root = f"lib/modules/{kversion}"
        for name, ko in modules:
            w.add_file(f"{mod_root}/{name}.ko", ko.read_bytes(), 0o644)
        w.add_file(
            "etc/diskbench/modules",
            "".join(f"/{mod_root}/{name}.ko\n" for name, _ in modules).encode(),
        )
        w.add_file("etc/diskbench/kernel", f"{kversion}\n".encode())
        w.add_file("etc/diskbench/recipe", f"{rhash}\n".encode())
        w.close()


def _write_payload_image(
    img: Path, tree: Path, pkgs: Sequence[PayloadPackage], repacked: Mapping[str, Path]
) -> None:
    """An ext2 image (``mke2fs -d``, no mount needed) with ``debs/`` and ``manifest.txt``.

    ``manifest.txt`` has one ``essential|base FILE`` line per package, the
    essential ones (extracted first, as debootstrap does) first.
    """
    debs_dir = tree / "debs"
    debs_dir.mkdir(parents=True)
    lines = []
    total = 0
    for p in sorted(pkgs, key=lambda p: (not p.essential, p.name)):
        src = repacked[p.name]
        os.link(src, debs_dir / src.name) if _same_fs(src, debs_dir) else shutil.copy2(src, debs_dir)
        total += src.stat().st_size
        lines.append(f"{'essential' if p.essential else 'base'} {src.name}\n")
    (tree / "manifest.txt").write_text("".join(lines))
    # Room for ext2 metadata and block rounding of many small files.
    _write_ext2_image(img, tree, label="diskbench-payload", size_kib=int(total * 1.15 / 1024) + 8192)


def _write_ext2_image(img: Path, tree: Path, *, label: str, size_kib: int) -> None:
    """An ext2 image of ``tree`` (``mke2fs -d``, no mount needed), every file owned by root."""
    run(
        [
            "mke2fs", "-q", "-F", "-t", "ext2", "-m", "0", "-b", "4096",
            "-L", label, "-E", "root_owner=0:0", "-d", tree, img, f"{size_kib}k",
        ],
        timeout_s=600,
        error_cls=GuestBuildError,
    )  # fmt: skip


#: where the guest mounts the tools drive (read-only); its launchers are TOOLS_MOUNT/bin/NAME
TOOLS_MOUNT = "/tools"


#: what a path in a launcher may hold: nothing the shell would read as more than a word
_LAUNCHER_PATH = re.compile(r"/[A-Za-z0-9._+@/-]*")


def _inside(tree: Path, dest: Path) -> Path:
    """``dest`` if its directory is inside ``tree`` on the host (no link of the drive leads out)."""
    top = os.path.realpath(tree)
    where = os.path.realpath(dest.parent)
    if where != top and not where.startswith(top + os.sep):
        raise RecipeError(f"tools drive: {dest} would be written outside the drive's tree")
    return dest


def _write_tools_image(
    img: Path, tree: Path, collected: _Collected, tools: Sequence[str], source: Tree | None = None
) -> None:
    """An ext2 image of the tools with their libraries, and a launcher per tool.

    The guest mounts it at :data:`TOOLS_MOUNT`, away from its own root, so every tool is
    started through its own dynamic loader with ``--library-path`` naming the drive's
    library directories: ``/tools/bin/fio`` runs ``/tools/usr/bin/fio`` on the drive's
    libraries only (RUNPATHs such as Ceph's ``.../ceph`` included).  Every symlink is made
    relative to its target as resolved in ``source`` (the extracted packages), so that none
    of them leads out of the drive, and a launcher holds only plain paths (no word the shell
    would expand).
    """
    tree.mkdir(parents=True)
    total = 0
    for guest, host in sorted(collected.files.items()):
        dest = _inside(tree, tree / _guest_path(guest).lstrip("/"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(host, dest)
        dest.chmod(stat.S_IMODE(host.stat().st_mode) & 0o755 | 0o444)
        total += dest.stat().st_size
    for guest, target in sorted(collected.symlinks.items()):
        name = PurePosixPath(_guest_path(guest))
        # the target as the kernel reads it: from the link's real directory in the packages
        base = source.resolve(str(name.parent)) if source is not None else None
        absolute = _guest_path(str(PurePosixPath(base or name.parent) / target))
        dest = _inside(tree, tree / str(name).lstrip("/"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)
        dest.symlink_to(os.path.relpath(absolute, str(name.parent)))
    lib_dirs = sorted(
        {
            str(PurePosixPath(_guest_path(p)).parent)
            for p in (*collected.files, *collected.symlinks)
            if re.search(r"\.so(\.|$)", PurePosixPath(p).name)
        }
    )
    library_path = ":".join(TOOLS_MOUNT + d for d in lib_dirs)
    (tree / "bin").mkdir(exist_ok=True)
    for tool in tools:
        real = Tree(tree).resolve(tool) or tool
        data = collected.files[real].read_bytes() if real in collected.files else b""
        interp = elf_interpreter(data) if data.startswith(b"\x7fELF") else None
        if interp is None:
            raise RecipeError(f"[tools] file {tool} is not a dynamic executable; list executables only")
        interp = _guest_path(interp)
        for what, path in (
            ("its dynamic loader", interp),
            ("it", real),
            *(("a library directory", d) for d in lib_dirs),
        ):
            if not _LAUNCHER_PATH.fullmatch(path):
                raise RecipeError(
                    f"[tools] file {tool}: {what} {path[:100]!r} has characters a launcher cannot "
                    "hold (only letters, digits and ._+@/-): list another file"
                )
        launcher = tree / "bin" / PurePosixPath(tool).name
        if launcher.exists() or launcher.is_symlink():
            raise RecipeError(
                f"[tools] file {tool}: its launcher /bin/{launcher.name} of the tools drive would "
                "replace another tool's launcher or a file of the drive; list files of another name"
            )
        launcher.write_text(
            f'#!/bin/sh\nexec {TOOLS_MOUNT}{interp} --library-path {library_path} {TOOLS_MOUNT}{real} "$@"\n'
        )
        launcher.chmod(0o755)
    _write_ext2_image(img, tree, label="diskbench-tools", size_kib=int(total * 1.1 / 1024) + 8192)


def _same_fs(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.stat().st_dev
