"""The boot half of the guest: the kernel package's version, its modules in load order, and
the initramfs (tools with their libraries, busybox, modules, ``images/init``) as a cpio."""

from __future__ import annotations

import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from harness.errors import GuestBuildError
from harness.guest.cpio import CpioWriter
from harness.guest.elf import elf_section_data, module_depends, module_load_order, module_name, parse_modinfo
from harness.guest.recipe import read_recipe_file, recipe_files
from harness.guest.tree import Collected


def find_kernel(ktree: Path) -> tuple[str, Path]:
    """The kernel version (its one module tree) and bzImage of the extracted kernel package."""
    moddirs = sorted((ktree / "lib" / "modules").iterdir()) if (ktree / "lib" / "modules").is_dir() else []
    if len(moddirs) != 1:
        raise GuestBuildError(f"kernel package has {len(moddirs)} module trees, expected one")
    kversion = moddirs[0].name
    bz = ktree / "boot" / f"vmlinuz-{kversion}"
    if not bz.is_file():
        raise GuestBuildError(f"kernel package lacks boot/vmlinuz-{kversion}")
    return kversion, bz


def resolve_modules(moddir: Path, wanted: Sequence[str]) -> list[tuple[str, Path]]:
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


def write_initramfs(
    path: Path,
    recipe_dir: Path,
    collected: Collected,
    modules: Sequence[tuple[str, Path]],
    kversion: str,
    rhash: str,
) -> None:
    """The initramfs at ``path``: an uncompressed cpio newc the kernel unpacks as its root."""
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
