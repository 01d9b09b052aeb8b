"""Native programs carried to another machine: each with every shared library it loads and the
dynamic loader, started through that loader so the other machine's own libraries never count.

A program ``NAME`` of the bundle lies at ``libexec/NAME``; ``bin/NAME`` is a small ``sh`` script
that runs it as ``lib/ld-linux-x86-64.so.2 --library-path lib libexec/NAME ARGS``, from wherever
the bundle was unpacked (the script finds itself through ``$0``).  The libraries are what ``ldd``
lists; libraries a program opens itself (QEMU's accelerator modules) are named by the caller.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InfraError
from harness.host import proc

#: the loader's name in the bundle (``lib/``), as x86-64 glibc names it
LOADER = "ld-linux-x86-64.so.2"

# "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)"
_NEEDED = re.compile(r"^\s*(\S+)\s+=>\s+(\S+)\s+\(0x[0-9a-f]+\)\s*$")
_LOADER_LINE = re.compile(r"^\s*(/\S*ld-linux[^\s]*)\s+\(0x[0-9a-f]+\)\s*$")
_MISSING = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$")


@dataclass(frozen=True)
class Libraries:
    """What ``ldd`` said of one program: soname -> the file, and the loader it names."""

    needed: Mapping[str, Path]
    loader: Path | None
    missing: tuple[str, ...] = ()


def parse_ldd(text: str) -> Libraries:
    """``ldd``'s output as :class:`Libraries` (pure); ``linux-vdso`` and other lines without a
    file are left out."""
    needed: dict[str, Path] = {}
    loader: Path | None = None
    missing: list[str] = []
    for line in text.splitlines():
        if m := _NEEDED.match(line):
            needed[m.group(1)] = Path(m.group(2))
        elif m := _LOADER_LINE.match(line):
            loader = Path(m.group(1))
        elif m := _MISSING.match(line):
            missing.append(m.group(1))
    return Libraries(needed=needed, loader=loader, missing=tuple(missing))


def libraries(program: Path) -> Libraries:
    """The shared libraries ``program`` loads (``ldd``); one that cannot be found is an error
    naming it."""
    result = proc.run(["ldd", str(program)], timeout_s=60, check=False)
    if result.returncode != 0:
        raise InfraError(f"ldd {program} failed: {result.stderr.strip() or result.stdout.strip()}")
    libs = parse_ldd(result.stdout)
    if libs.missing:
        raise InfraError(f"{program} needs {', '.join(libs.missing)}, which ldd does not find here")
    return libs


def wrapper_script(name: str, *, env: Mapping[str, str] | None = None, args: Sequence[str] = ()) -> str:
    """``bin/NAME``: run ``libexec/NAME`` through the bundled loader (pure).

    ``env`` and ``args`` may say ``$r`` for the bundle's root; ``args`` come before the caller's.
    The loader's ``--argv0`` keeps the program's own name in ``argv[0]``."""
    lines = [
        "#!/bin/sh",
        f"# diskbench bundle: {name} through the bundled loader and libraries",
        'r="${0%/*}/.."',
    ]
    lines += [f'export {key}="{value}"' for key, value in (env or {}).items()]
    extra = "".join(f' "{a}"' for a in args)
    lines.append(
        f'exec "$r/lib/{LOADER}" --library-path "$r/lib" --argv0 "$0" "$r/libexec/{name}"{extra} "$@"'
    )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Program:
    """A program to carry: its file, what it is called in the bundle, what its wrapper adds."""

    path: Path
    name: str
    env: Mapping[str, str] | None = None
    args: tuple[str, ...] = ()


def install_programs(root: Path, programs: Iterable[Program], *, modules: Iterable[Path] = ()) -> list[str]:
    """Copy ``programs`` into ``root`` (``libexec/``, their wrappers in ``bin/``), the libraries
    they and ``modules`` (copied to ``lib/qemu/``) load into ``lib/``, and the loader; returns the
    libraries' names."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "libexec").mkdir(exist_ok=True)
    qemu_modules = root / "lib" / "qemu"
    qemu_modules.mkdir(parents=True, exist_ok=True)
    libs: dict[str, Path] = {}
    loader: Path | None = None
    for program in programs:
        found = libraries(program.path)
        libs.update(found.needed)
        loader = loader or found.loader
        shutil.copyfile(program.path, root / "libexec" / program.name)
        (root / "libexec" / program.name).chmod(0o755)
        wrapper = root / "bin" / program.name
        wrapper.write_text(wrapper_script(program.name, env=program.env, args=program.args))
        wrapper.chmod(0o755)
    for module in modules:
        libs.update(libraries(module).needed)
        shutil.copyfile(module, qemu_modules / module.name)
    if loader is None:
        raise InfraError("ldd named no dynamic loader for the programs to bundle: are they static?")
    for soname, path in libs.items():
        shutil.copyfile(path, root / "lib" / soname)  # follows the symlink: the file, by its soname
    shutil.copyfile(loader, root / "lib" / LOADER)
    (root / "lib" / LOADER).chmod(0o755)
    return sorted(libs)
