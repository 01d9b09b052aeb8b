"""Build the benchmark guest from pinned Debian packages: the steps, and the builds kept by recipe hash.

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
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from harness.errors import GuestBuildError
from harness.guest.artifacts import MANIFEST_NAME, GuestArtifacts
from harness.guest.drives import write_payload_image, write_tools_image
from harness.guest.elf import vmlinux_from_bzimage
from harness.guest.initramfs import find_kernel, resolve_modules, write_initramfs
from harness.guest.logs import Log, reported_to
from harness.guest.packages import extract_deb, fetch_debs, prune_package_cache, repack_uncompressed
from harness.guest.recipe import Recipe, load_recipe, recipe_hash
from harness.guest.tree import Tree, collect_with_libraries
from harness.paths import IMAGES_DIR, cache_dir

logger = logging.getLogger(__name__)

KEEP_BUILDS = 4
#: what all guest builds may take together before the least recently used go (a build: ~300 MB)
MAX_BUILD_BYTES = 4 * 2**30
#: a build used this recently may be in use right now: never removed
IN_USE_S = 3600.0


def build_guest(
    *,
    recipe_dir: Path = IMAGES_DIR,
    cache: Path | None = None,
    log: Log | None = None,
    force: bool = False,
) -> GuestArtifacts:
    """Build (or reuse) the guest for the recipe in ``recipe_dir``.

    The result lives in ``cache/guest/<recipe_hash>/``; an existing complete
    build is returned at once unless ``force``. Downloads are kept in
    ``cache/debs/`` and repacked payload packages in ``cache/debs-uncompressed/``.
    Progress is logged (INFO); ``log`` takes it instead (:func:`~harness.guest.logs.reported_to`).
    """
    with reported_to(log):
        return _cached_build(recipe_dir, cache if cache is not None else cache_dir(), force=force)


def _cached_build(recipe_dir: Path, cache: Path, *, force: bool) -> GuestArtifacts:
    """The build of ``recipe_dir``'s hash in ``cache/guest/``: reused, or built and swapped in."""
    rhash = recipe_hash(recipe_dir)
    guest_root = cache / "guest"
    out = guest_root / rhash
    if out.is_dir() and not force:
        try:
            art = GuestArtifacts.load(out)
        except GuestBuildError:
            logger.warning("guest: %s is incomplete, rebuilding", out)
        else:
            logger.info("guest: using cached build %s", out)
            os.utime(out)  # marks it in use, so that pruning spares it
            return art
    recipe = load_recipe(recipe_dir)
    start = time.monotonic()
    logger.info("guest: building recipe %s into %s", rhash, out)
    guest_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=guest_root, prefix=f".{rhash}-"))
    tmp.chmod(0o755)
    try:
        art = _build_into(recipe, recipe_dir, cache, tmp, rhash)
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
    logger.info("guest: built in %.1f s: %s", time.monotonic() - start, out)
    prune_builds(guest_root, keep=KEEP_BUILDS, current=rhash)
    return GuestArtifacts.load(out)


def prune_builds(
    guest_root: Path,
    *,
    keep: int,
    log: Log | None = None,
    idle_s: float = 86400.0,
    current: str | None = None,
    max_bytes: int = MAX_BUILD_BYTES,
    in_use_s: float = IN_USE_S,
) -> None:
    """Remove builds (each is ~300 MB) beyond the ``keep`` newest that were unused for ``idle_s``; then,
    while all builds take more than ``max_bytes``, the least recently used.

    The build of recipe ``current`` is never removed, nor one used within ``in_use_s``: another
    checkout (the other side of a gate, a sweep) may be running on it right now.  Every push of a
    pull request that changes ``images/`` builds a guest of its own: by age alone they would pile
    up on a runner for a day.
    """
    with reported_to(log):
        _prune_builds(
            guest_root, keep=keep, idle_s=idle_s, current=current, max_bytes=max_bytes, in_use_s=in_use_s
        )


def _prune_builds(
    guest_root: Path, *, keep: int, idle_s: float, current: str | None, max_bytes: int, in_use_s: float
) -> None:
    builds = sorted(
        (p for p in guest_root.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    now = time.time()

    def spared(build: Path) -> bool:
        return build.name == current or now - build.stat().st_mtime < in_use_s

    for old in builds[keep:]:
        if spared(old) or now - old.stat().st_mtime < idle_s:
            continue
        logger.info("guest: removing old build %s", old)
        shutil.rmtree(old, ignore_errors=True)
    left = [b for b in builds if b.exists()]
    sizes = {b: _tree_bytes(b) for b in left}
    total = sum(sizes.values())
    for old in reversed(left):  # least recently used first
        if total <= max_bytes:
            return
        if spared(old):
            continue
        logger.info(
            "guest: removing build %s: builds take %.0f MiB, over the cap of %.0f MiB",
            old,
            total / 2**20,
            max_bytes / 2**20,
        )
        shutil.rmtree(old, ignore_errors=True)
        total -= sizes[old]
    if total > max_bytes:
        logger.warning(
            "guest: builds take %.0f MiB, over the cap of %.0f MiB, all in use",
            total / 2**20,
            max_bytes / 2**20,
        )


def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _build_into(recipe: Recipe, recipe_dir: Path, cache: Path, tmp: Path, rhash: str) -> GuestArtifacts:
    """Every file of the guest built in ``tmp``: kernel, initramfs, payload and tools drives."""
    debs = cache / "debs"
    pins = recipe.all_pins()
    paths = fetch_debs(pins, debs)

    # Kernel: vmlinux plus the module files, from the one kernel package.
    logger.info("guest: extracting %s=%s", recipe.kernel_package, recipe.kernel_version)
    ktree = tmp / "kernel-tree"
    extract_deb(paths[recipe.kernel_package], ktree)
    kversion, bzimage = find_kernel(ktree)
    vmlinux = vmlinux_from_bzimage(bzimage.read_bytes())
    (tmp / "vmlinux").write_bytes(vmlinux)
    logger.info("guest: vmlinux %s: %.1f MiB", kversion, len(vmlinux) / 2**20)
    moddir = ktree / "lib" / "modules" / kversion
    modules = resolve_modules(moddir, recipe.modules)
    logger.info("guest: %d kernel modules in load order: %s", len(modules), " ".join(m for m, _ in modules))

    # Initramfs: tools with their libraries, busybox, modules, init.
    rootfs = tmp / "rootfs"
    for name in recipe.initramfs_packages:
        extract_deb(paths[name], rootfs)
    collected = collect_with_libraries(Tree(rootfs), recipe.initramfs_files)
    logger.info(
        "guest: initramfs tools: %d files, %d with libraries",
        len(recipe.initramfs_files),
        len(collected.files),
    )
    initrd = tmp / "initramfs.cpio"
    write_initramfs(initrd, recipe_dir, collected, modules, kversion, rhash)
    logger.info("guest: initramfs.cpio: %.1f MiB", initrd.stat().st_size / 2**20)

    # Payloads: repacked uncompressed packages on ext2 images.
    repacked_dir = cache / "debs-uncompressed"
    repacked_dir.mkdir(parents=True, exist_ok=True)
    repacked: dict[str, Path] = {}
    todo = [p for p in recipe.payload if not (repacked_dir / paths[p.name].name).is_file()]
    if todo:
        logger.info("guest: repacking %d payload packages uncompressed", len(todo))
    for p in recipe.payload:
        target = repacked_dir / paths[p.name].name
        if not target.is_file():
            repack_uncompressed(paths[p.name], target, tmp)
        repacked[p.name] = target
    prune_package_cache(repacked_dir, keep=repacked.values())
    payload_files: dict[str, Path] = {}
    counts: dict[str, int] = {}
    for set_name, pkgs in recipe.payload_sets().items():
        img = tmp / f"payload-{set_name}.img"
        write_payload_image(img, tmp / "payload-trees" / set_name, pkgs, repacked)
        payload_files[set_name] = img
        counts[set_name] = len(pkgs)
        logger.info(
            "guest: payload-%s.img: %d packages, %.1f MiB", set_name, len(pkgs), img.stat().st_size / 2**20
        )

    tools = None
    if recipe.tools_files:
        troot = tmp / "tools-root"
        for name in recipe.tools_packages:
            extract_deb(paths[name], troot)
        got = collect_with_libraries(Tree(troot), recipe.tools_files, packages_table="tools.packages")
        tools = tmp / "tools.img"
        write_tools_image(tools, tmp / "tools-tree", got, recipe.tools_files, Tree(troot))
        logger.info(
            "guest: tools.img: %d tools, %d files with libraries, %.1f MiB",
            len(recipe.tools_files),
            len(got.files),
            tools.stat().st_size / 2**20,
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
