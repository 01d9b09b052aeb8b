"""Extracted packages seen with guest paths, and the files a guest needs out of them.

:class:`Tree` resolves guest paths (``/sbin/mke2fs``) inside a directory of
extracted packages, never against the host; :func:`collect_with_libraries`
takes the listed files with their symlink chains, dynamic loader and every
shared library they need (DT_NEEDED, RUNPATH), for the initramfs and the tools
drive alike.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from harness.guest.elf import ElfError, elf_interpreter, elf_needed, elf_runpath
from harness.guest.recipe import RecipeError

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
class Collected:
    """What :func:`collect_with_libraries` took, by guest path."""

    files: dict[str, Path] = field(default_factory=dict)  # guest path -> host file
    symlinks: dict[str, str] = field(default_factory=dict)  # guest path -> target


def guest_path(path: str) -> str:
    """``path`` normalised from the guest's root: no ``.``, ``..`` or ``//`` left in it."""
    return "/" + os.path.normpath("/" + path).lstrip("/")


def collect_with_libraries(
    tree: Tree, paths: Sequence[str], *, packages_table: str = "initramfs.packages"
) -> Collected:
    """The files at ``paths``, their symlink chains, and every shared library they need.

    DT_NEEDED is followed recursively (in the needing file's RUNPATH, then the
    standard directories), and each executable's PT_INTERP (the dynamic loader)
    is included; a library that no pinned package provides fails the build with
    its soname, naming ``packages_table``.

    Every path is normalised and every symlink followed inside the tree: a
    RUNPATH with ``..`` or a symlink in a parent directory never reaches a
    host file, and no recorded path names anything outside the tree.
    """
    got = Collected()
    queue: list[tuple[str, str]] = [(p, "recipe") for p in paths]
    while queue:
        wanted, wanted_by = queue.pop(0)
        path = guest_path(wanted)
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
            current = guest_path(str(PurePosixPath(parent) / target))
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
        runpath = [guest_path(d) for d in runpath if d.startswith("/") and "$" not in d]
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
