"""The guest recipe: ``images/recipe.toml`` and ``images/payload.lock``, parsed, checked and hashed.

A pull request brings its own ``images/``, so everything here is untrusted
input: the build reads only regular files inside the recipe directory (no
symlink out of it, no device or FIFO, no second hard link), and every name in
the recipe is checked before it reaches a path or an argv (guest paths are
absolute without ``..``; package names, versions and module names are what
Debian and the kernel allow). A bad recipe is a :class:`RecipeError`, exit 2.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ExitCode, GuestBuildError
from harness.paths import IMAGES_DIR
from harness.untrusted import clean_line, toml_loads

#: Bump when the build code changes what it produces; part of the recipe hash.
BUILD_CODE_VERSION = "2"

PIN_COMMAND = "diskbench guest pin"

#: The most packages one recipe may pin (kernel, initramfs, tools and payload together); the
#: shipped one has about 130. Over it is exit 2, before anything is fetched.
MAX_RECIPE_PACKAGES = 400


class RecipeError(GuestBuildError):
    """The guest recipe (``images/``) is bad input: one line naming the entry and the fix, exit 2."""

    exit_code = ExitCode.USAGE


# Debian policy 5.6.1 (Package) and 5.6.12 (Version); a leading '-' would read as an option.
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{0,99}")
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+~:-]{0,99}")
_MODULE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SUITE = re.compile(r"[a-z][a-z0-9-]{0,31}")
# a guest path: absolute, plain components, no '.' or '..'
_GUEST_PATH = re.compile(r"(/[A-Za-z0-9_+@-][A-Za-z0-9._+@-]{0,99}){1,16}")


def check_guest_path(path: str, where: str, table: str = "initramfs") -> str:
    """``path`` if it is an absolute guest path without ``.`` or ``..`` components."""
    parts = path.split("/")[1:]
    if not _GUEST_PATH.fullmatch(path) or any(p in (".", "..") for p in parts):
        raise RecipeError(
            f"{where}: [{table}] files entry {path[:100]!r} is not a plain guest path: "
            "use an absolute path inside the packages without '..', such as /sbin/mke2fs"
        )
    return path


def _check(pattern: re.Pattern[str], value: str, what: str, where: str, fix: str) -> str:
    if not pattern.fullmatch(value):
        raise RecipeError(f"{where}: {what} {value[:100]!r} is not valid: {fix}")
    return value


def _package(name: str, where: str) -> str:
    return _check(_PACKAGE, name, "package name", where, "use a Debian package name such as e2fsprogs")


def _version(version: str, where: str) -> str:
    return _check(_VERSION, version, "version", where, f"use a Debian version; re-pin with `{PIN_COMMAND}`")


@dataclass(frozen=True)
class PayloadPackage:
    """One package of the install payload, from ``images/payload.lock``."""

    name: str
    version: str
    essential: bool  # extracted first (debootstrap's "required" set)


@dataclass(frozen=True)
class Recipe:
    """The parsed guest recipe: ``images/recipe.toml`` plus ``images/payload.lock``."""

    kernel_package: str
    kernel_version: str
    modules: tuple[str, ...]
    initramfs_packages: Mapping[str, str]
    initramfs_files: tuple[str, ...]
    payload: tuple[PayloadPackage, ...]
    payload_small: tuple[str, ...]
    suite: str
    variant: str
    # the tools drive: guest paths and the packages they come from (empty: no tools drive)
    tools_files: tuple[str, ...] = ()
    tools_packages: Mapping[str, str] = field(default_factory=dict)

    def payload_sets(self) -> dict[str, tuple[PayloadPackage, ...]]:
        """The named payloads: ``full`` is every locked package, ``small`` the listed subset."""
        small = set(self.payload_small)
        return {
            "full": self.payload,
            "small": tuple(p for p in self.payload if p.name in small),
        }

    def all_pins(self) -> dict[str, str]:
        """Every pinned package of guest and payload, name -> version."""
        pins = {self.kernel_package: self.kernel_version}
        pins.update(self.initramfs_packages)
        pins.update(self.tools_packages)
        for p in self.payload:
            pins.setdefault(p.name, p.version)
        return pins


def parse_payload_lock(text: str) -> tuple[PayloadPackage, ...]:
    """Parse ``payload.lock``: ``name version essential|base`` per line, ``#`` comments."""
    out: list[PayloadPackage] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or parts[2] not in ("essential", "base"):
            raise RecipeError(
                f"payload.lock line {lineno}: expected 'name version essential|base', "
                f"got {raw!r}; regenerate it with `{PIN_COMMAND}`"
            )
        where = f"images/payload.lock line {lineno}"
        out.append(
            PayloadPackage(_package(parts[0], where), _version(parts[1], where), parts[2] == "essential")
        )
    return tuple(out)


def format_payload_lock(packages: Iterable[PayloadPackage], *, header: str = "") -> str:
    """The text of ``payload.lock``; essential packages first, each group sorted by name."""
    pkgs = sorted(packages, key=lambda p: (not p.essential, p.name))
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines += [f"{p.name} {p.version} {'essential' if p.essential else 'base'}" for p in pkgs]
    return "\n".join(lines) + "\n"


def _table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise RecipeError(f"{where}: missing table [{key}]")
    return value


def _str_list(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecipeError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _str(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise RecipeError(f"{where}: {key} must be a non-empty string")
    return value


def parse_recipe(recipe_toml: str, payload_lock: str, *, require_lock: bool = True) -> Recipe:
    """Parse the recipe texts (pure); errors name the file and the key.

    ``require_lock=False`` accepts a missing or stale payload lock (what
    re-pinning starts from).
    """
    where = "images/recipe.toml"
    try:
        data = toml_loads(recipe_toml)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{where}: {exc}") from exc
    kernel = _table(data, "kernel", where)
    initramfs = _table(data, "initramfs", where)
    pkgs = _table(initramfs, "packages", where)
    if not all(isinstance(v, str) for v in pkgs.values()):
        raise RecipeError(f"{where}: [initramfs.packages] values must be version strings")
    payload_cfg = _table(data, "payload", where)
    payload = parse_payload_lock(payload_lock) if require_lock else ()
    names = {p.name for p in payload}
    small = _str_list(payload_cfg, "small", where)
    for name in small:
        _package(name, f"{where} [payload] small")
    unknown = sorted(set(small) - names)
    if require_lock and not payload:
        raise RecipeError(f"images/payload.lock is empty; generate it with `{PIN_COMMAND}`")
    if require_lock and unknown:
        raise RecipeError(f"{where}: payload.small names packages not in payload.lock: {', '.join(unknown)}")
    for name, version in pkgs.items():
        _package(name, f"{where} [initramfs.packages]")
        _version(version, f"{where} [initramfs.packages] {name}")
    other_pins = {name: ("[initramfs.packages]", v) for name, v in pkgs.items()}
    other_pins[str(kernel.get("package"))] = ("[kernel]", kernel.get("version"))
    tools_files, tools_pkgs = _tools(data, other_pins, where)
    modules = _str_list(kernel, "modules", where)
    for module in modules:
        _check(
            _MODULE,
            module,
            "kernel module",
            f"{where} [kernel] modules",
            "use a module name such as virtio_blk",
        )
    recipe = Recipe(
        kernel_package=_package(_str(kernel, "package", where), f"{where} [kernel] package"),
        kernel_version=_version(_str(kernel, "version", where), f"{where} [kernel] version"),
        modules=modules,
        initramfs_packages=dict(pkgs),
        initramfs_files=tuple(check_guest_path(f, where) for f in _str_list(initramfs, "files", where)),
        payload=payload,
        payload_small=small,
        suite=_check(
            _SUITE, _str(payload_cfg, "suite", where), "suite", where, "use a suite such as bookworm"
        ),
        variant=_check(
            _SUITE, _str(payload_cfg, "variant", where), "variant", where, "use a variant such as minbase"
        ),
        tools_files=tools_files,
        tools_packages=tools_pkgs,
    )
    count = len(recipe.all_pins())
    if count > MAX_RECIPE_PACKAGES:
        raise RecipeError(
            f"{where} and images/payload.lock pin {count} packages, over the cap of "
            f"{MAX_RECIPE_PACKAGES} per recipe: pin fewer packages"
        )
    return recipe


def _tools(
    data: Mapping[str, Any], other_pins: Mapping[str, tuple[str, Any]], where: str
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The optional ``[tools]`` table: ``files`` and ``[tools.packages]``, checked.

    ``other_pins`` (name -> (table, version)) are the kernel's and the initramfs's pins: a
    package has one version in the whole guest, or a tools pin would replace theirs.
    """
    if "tools" not in data:
        return (), {}
    tools = _table(data, "tools", where)
    # each tool gets a launcher /tools/bin/NAME: a name listed twice would need two
    files = tuple(
        dict.fromkeys(check_guest_path(f, where, "tools") for f in _str_list(tools, "files", where))
    )
    pkgs = _table(tools, "packages", f"{where} [tools]")
    out: dict[str, str] = {}
    for name, version in pkgs.items():
        _package(name, f"{where} [tools.packages]")
        if not isinstance(version, str):
            raise RecipeError(f"{where}: [tools.packages] {name} must be a version string")
        _version(version, f"{where} [tools.packages] {name}")
        table, other = other_pins.get(name, ("", version))
        if other != version:
            raise RecipeError(
                f"{where}: {name} is pinned to {other} in {table} and {version} in "
                f"[tools.packages]; pin one version (`{PIN_COMMAND}` does)"
            )
        out[name] = version
    if files and not out:
        raise RecipeError(
            f"{where}: [tools] files without [tools.packages]: list the packages they come from"
        )
    return files, out


def load_recipe(recipe_dir: Path = IMAGES_DIR, *, require_lock: bool = True) -> Recipe:
    """Read and parse the recipe in ``recipe_dir``."""
    toml_text = read_recipe_file(recipe_dir, "recipe.toml").decode("utf-8", "replace")
    lock_path = recipe_dir / "payload.lock"
    lock_text = (
        read_recipe_file(recipe_dir, "payload.lock").decode("utf-8", "replace")
        if require_lock or lock_path.exists() or lock_path.is_symlink()
        else ""
    )
    return parse_recipe(toml_text, lock_text, require_lock=require_lock)


def recipe_files(recipe_dir: Path = IMAGES_DIR) -> list[str]:
    """Every file under ``recipe_dir`` (relative POSIX names, sorted), each checked to stay inside.

    A symlink is followed only when it resolves inside ``recipe_dir``; a
    symlinked directory inside is skipped (its target is listed anyway).
    """
    _check_root(recipe_dir)
    root = recipe_dir.resolve()
    names: list[str] = []
    for dirpath, dirnames, filenames in os.walk(recipe_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for d in list(dirnames):
            path = Path(dirpath) / d
            if path.is_symlink():
                _inside(root, path, recipe_dir)
                dirnames.remove(d)
        for f in filenames:
            names.append((Path(dirpath) / f).relative_to(recipe_dir).as_posix())
    for name in names:
        _checked(recipe_dir, name)
    return sorted(names)


def read_recipe_file(recipe_dir: Path, name: str) -> bytes:
    """The bytes of ``recipe_dir/name``, a regular file inside ``recipe_dir`` (RecipeError if not)."""
    path = _checked(recipe_dir, name)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RecipeError(
            f"cannot read {_shown(recipe_dir, path)}: {exc.strerror}: restore the file"
        ) from None


def recipe_hash(recipe_dir: Path = IMAGES_DIR) -> str:
    """A short hash over every file under ``recipe_dir`` and the build code version.

    Any change to the recipe, the init script or the workloads gives a new
    build directory, so a stale guest is never reused.
    """
    return hash_files((name, read_recipe_file(recipe_dir, name)) for name in recipe_files(recipe_dir))


def _shown(recipe_dir: Path, path: Path) -> str:
    return f"{recipe_dir.name}/{path.relative_to(recipe_dir).as_posix()}"


def _check_root(recipe_dir: Path) -> None:
    if recipe_dir.is_symlink():
        raise RecipeError(
            f"the guest recipe {recipe_dir} is a symlink to {_link(recipe_dir)}: "
            "images/ must be a directory of the checkout"
        )


def _link(path: Path) -> str:
    """A symlink's target as one printable line (a pull request names it)."""
    return clean_line(os.readlink(path), max_chars=200)


def _inside(root: Path, path: Path, recipe_dir: Path) -> Path:
    """``path`` resolved; a RecipeError if that is outside ``root`` or a symlink loop."""
    try:
        real = path.resolve()
    except (RuntimeError, OSError):  # a loop: RuntimeError before Python 3.13, ELOOP since
        raise RecipeError(
            f"{_shown(recipe_dir, path)} is a symlink loop: replace the symlink with the file itself"
        ) from None
    if real != root and root not in real.parents:
        what = f"a symlink to {_link(path)}" if path.is_symlink() else f"resolves to {real}"
        raise RecipeError(
            f"{_shown(recipe_dir, path)} is {what}, outside {recipe_dir.name}/: "
            "replace the symlink with the file itself"
        )
    return real


def _checked(recipe_dir: Path, name: str) -> Path:
    """``recipe_dir/name`` after the checks: no '..', inside after symlinks, a regular file, one link."""
    _check_root(recipe_dir)
    if name.startswith("/") or ".." in name.split("/"):
        raise RecipeError(f"{recipe_dir.name}/{name}: a name outside {recipe_dir.name}/: use a relative path")
    path = recipe_dir / name
    try:
        real = _inside(recipe_dir.resolve(), path, recipe_dir)
        st = real.lstat()
    except FileNotFoundError:
        raise RecipeError(
            f"{_shown(recipe_dir, path)} does not exist: restore it from the repository"
        ) from None
    except OSError as exc:
        raise RecipeError(f"cannot read {_shown(recipe_dir, path)}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise RecipeError(
            f"{_shown(recipe_dir, path)} is not a regular file (a device, FIFO or socket): "
            "put a plain file there"
        )
    if st.st_nlink > 1:
        raise RecipeError(
            f"{_shown(recipe_dir, path)} has {st.st_nlink} hard links: a file under "
            f"{recipe_dir.name}/ must be its own copy (cp it)"
        )
    return real


def hash_files(files: Iterable[tuple[str, bytes]]) -> str:
    """Pure part of :func:`recipe_hash`: names and contents, order-independent."""
    h = hashlib.sha256(f"diskbench-guest-build {BUILD_CODE_VERSION}\n".encode())
    for name, data in sorted(files):
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]
