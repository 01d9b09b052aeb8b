"""The guest's data drives, ext2 images written with ``mke2fs -d`` (no mount needed).

* ``payload-<name>.img``: the install workload's input, repacked packages under ``debs/``
  and their ``manifest.txt``;
* ``tools.img``: the ``[tools]`` files with their libraries and a launcher per tool,
  mounted read-only at :data:`TOOLS_MOUNT`.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from harness.errors import GuestBuildError
from harness.guest.elf import elf_interpreter
from harness.guest.recipe import PayloadPackage, RecipeError
from harness.guest.tree import Collected, Tree, guest_path
from harness.host.proc import run


def write_payload_image(
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


def write_tools_image(
    img: Path, tree: Path, collected: Collected, tools: Sequence[str], source: Tree | None = None
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
        dest = _inside(tree, tree / guest_path(guest).lstrip("/"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(host, dest)
        dest.chmod(stat.S_IMODE(host.stat().st_mode) & 0o755 | 0o444)
        total += dest.stat().st_size
    for guest, target in sorted(collected.symlinks.items()):
        name = PurePosixPath(guest_path(guest))
        # the target as the kernel reads it: from the link's real directory in the packages
        base = source.resolve(str(name.parent)) if source is not None else None
        absolute = guest_path(str(PurePosixPath(base or name.parent) / target))
        dest = _inside(tree, tree / str(name).lstrip("/"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)
        dest.symlink_to(os.path.relpath(absolute, str(name.parent)))
    lib_dirs = sorted(
        {
            str(PurePosixPath(guest_path(p)).parent)
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
        interp = guest_path(interp)
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
