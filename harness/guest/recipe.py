"""The guest recipe: ``images/recipe.toml`` and ``images/payload.lock``, parsed and hashed."""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import GuestBuildError
from harness.paths import IMAGES_DIR

#: Bump when the build code changes what it produces; part of the recipe hash.
BUILD_CODE_VERSION = "1"

PIN_COMMAND = "diskbench guest pin"

Log = Callable[[str], None]


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
            raise GuestBuildError(
                f"payload.lock line {lineno}: expected 'name version essential|base', "
                f"got {raw!r}; regenerate it with `{PIN_COMMAND}`"
            )
        out.append(PayloadPackage(parts[0], parts[1], parts[2] == "essential"))
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
        raise GuestBuildError(f"{where}: missing table [{key}]")
    return value


def _str_list(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GuestBuildError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _str(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise GuestBuildError(f"{where}: {key} must be a non-empty string")
    return value


def parse_recipe(recipe_toml: str, payload_lock: str, *, require_lock: bool = True) -> Recipe:
    """Parse the recipe texts (pure); errors name the file and the key.

    ``require_lock=False`` accepts a missing or stale payload lock (what
    re-pinning starts from).
    """
    where = "images/recipe.toml"
    try:
        data = tomllib.loads(recipe_toml)
    except tomllib.TOMLDecodeError as exc:
        raise GuestBuildError(f"{where}: {exc}") from exc
    kernel = _table(data, "kernel", where)
    initramfs = _table(data, "initramfs", where)
    pkgs = _table(initramfs, "packages", where)
    if not all(isinstance(v, str) for v in pkgs.values()):
        raise GuestBuildError(f"{where}: [initramfs.packages] values must be version strings")
    payload_cfg = _table(data, "payload", where)
    payload = parse_payload_lock(payload_lock) if require_lock else ()
    names = {p.name for p in payload}
    small = _str_list(payload_cfg, "small", where)
    unknown = sorted(set(small) - names)
    if require_lock and not payload:
        raise GuestBuildError(f"images/payload.lock is empty; generate it with `{PIN_COMMAND}`")
    if require_lock and unknown:
        raise GuestBuildError(
            f"{where}: payload.small names packages not in payload.lock: {', '.join(unknown)}"
        )
    return Recipe(
        kernel_package=_str(kernel, "package", where),
        kernel_version=_str(kernel, "version", where),
        modules=_str_list(kernel, "modules", where),
        initramfs_packages=dict(pkgs),
        initramfs_files=_str_list(initramfs, "files", where),
        payload=payload,
        payload_small=small,
        suite=_str(payload_cfg, "suite", where),
        variant=_str(payload_cfg, "variant", where),
    )


def load_recipe(recipe_dir: Path = IMAGES_DIR, *, require_lock: bool = True) -> Recipe:
    """Read and parse the recipe in ``recipe_dir``."""
    try:
        toml_text = (recipe_dir / "recipe.toml").read_text()
        lock_path = recipe_dir / "payload.lock"
        lock_text = lock_path.read_text() if require_lock or lock_path.exists() else ""
    except OSError as exc:
        raise GuestBuildError(f"cannot read the guest recipe in {recipe_dir}: {exc}") from exc
    return parse_recipe(toml_text, lock_text, require_lock=require_lock)


def recipe_hash(recipe_dir: Path = IMAGES_DIR) -> str:
    """A short hash over every file under ``recipe_dir`` and the build code version.

    Any change to the recipe, the init script or the workloads gives a new
    build directory, so a stale guest is never reused.
    """
    files = sorted(p for p in recipe_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return hash_files((p.relative_to(recipe_dir).as_posix(), p.read_bytes()) for p in files)


def hash_files(files: Iterable[tuple[str, bytes]]) -> str:
    """Pure part of :func:`recipe_hash`: names and contents, order-independent."""
    h = hashlib.sha256(f"diskbench-guest-build {BUILD_CODE_VERSION}\n".encode())
    for name, data in sorted(files):
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]
