"""Re-pinning the recipe: every package to the mirror's current candidate, and the install
payload to what ``debootstrap --download-only`` fetches (``diskbench guest pin``)."""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from harness.errors import GuestBuildError
from harness.guest.logs import Log, reported_to
from harness.guest.packages import deb_fields
from harness.guest.recipe import PIN_COMMAND, PayloadPackage, Recipe, format_payload_lock, load_recipe
from harness.host.proc import run
from harness.paths import IMAGES_DIR

logger = logging.getLogger(__name__)


def parse_apt_policy(text: str) -> dict[str, str | None]:
    """Candidate version per package from ``apt-cache policy A B ...`` (None: no candidate)."""
    out: dict[str, str | None] = {}
    current: str | None = None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            current = line[:-1]
        elif current is not None and line.strip().startswith("Candidate:"):
            value = line.split(":", 1)[1].strip()
            out[current] = None if value == "(none)" else value
    return out


def rewrite_recipe_pins(text: str, kernel_version: str, packages: Mapping[str, str]) -> str:
    """``recipe.toml`` with new versions, comments and layout kept (pure)."""
    section = ""
    lines = []
    for line in text.splitlines(keepends=True):
        m = re.match(r"^\s*\[([^\]]+)\]", line)
        if m:
            section = m.group(1).strip()
        kv = re.match(r'^(\s*)("?)([A-Za-z0-9.+_-]+)\2(\s*=\s*)"([^"]*)"(.*)$', line, re.S)
        if kv and section == "kernel" and kv.group(3) == "version":
            line = f'{kv.group(1)}version{kv.group(4)}"{kernel_version}"{kv.group(6)}'
        elif kv and section in ("initramfs.packages", "tools.packages") and kv.group(3) in packages:
            name = kv.group(3)
            q = kv.group(2)
            line = f'{kv.group(1)}{q}{name}{q}{kv.group(4)}"{packages[name]}"{kv.group(6)}'
        lines.append(line)
    return "".join(lines)


def _candidates(names: Sequence[str]) -> dict[str, str]:
    result = run(["apt-cache", "policy", *names], timeout_s=120, error_cls=GuestBuildError)
    policy = parse_apt_policy(result.stdout)
    missing = [n for n in names if not policy.get(n)]
    if missing:
        raise GuestBuildError(
            f"no candidate version in the apt sources for: {', '.join(missing)}; "
            f"run `apt-get update`, or change images/recipe.toml"
        )
    return {n: str(policy[n]) for n in names}


def parse_depends(value: str) -> list[list[str]]:
    """A Depends-style field as alternatives of package names (versions and arch dropped)."""
    groups = []
    for group in value.split(","):
        alts = []
        for alt in group.split("|"):
            name = alt.strip().split(" ", 1)[0].split("(", 1)[0].split(":", 1)[0].strip()
            if name:
                alts.append(name)
        if alts:
            groups.append(alts)
    return groups


def required_closure(controls: Mapping[str, Mapping[str, str]]) -> set[str]:
    """debootstrap's "required" set: Essential/Priority-required packages and their dependencies.

    ``controls`` maps package name to its control fields. Dependencies are
    followed through Depends and Pre-Depends within the given packages; of
    alternatives, the first one present counts (as debootstrap resolves them).
    """
    todo = [n for n, f in controls.items() if f.get("Essential") == "yes" or f.get("Priority") == "required"]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        f = controls[name]
        for key in ("Pre-Depends", "Depends"):
            for alts in parse_depends(f.get(key, "")):
                present = [a for a in alts if a in controls]
                if present:
                    todo.append(present[0])
    return seen


def pin_recipe(recipe_dir: Path = IMAGES_DIR, log: Log | None = None) -> Recipe:
    """Re-pin every package to the mirror's current candidate and rewrite the lock files.

    The payload set is what ``debootstrap --variant=minbase --download-only``
    fetches (needs root; it installs nothing). The "essential" packages are
    debootstrap's required set (:func:`required_closure`), which it extracts
    before letting the target's dpkg unpack everything. Progress is logged (INFO); ``log``
    takes it instead (:func:`~harness.guest.logs.reported_to`).
    """
    with reported_to(log):
        return _pin_recipe(recipe_dir)


def _pin_recipe(recipe_dir: Path) -> Recipe:
    recipe = load_recipe(recipe_dir, require_lock=False)
    names = list(dict.fromkeys([recipe.kernel_package, *recipe.initramfs_packages, *recipe.tools_packages]))
    cands = _candidates(names)
    pinned = {
        **recipe.tools_packages,
        **recipe.initramfs_packages,
        recipe.kernel_package: recipe.kernel_version,
    }
    for name in names:
        old = pinned[name]
        if old != cands[name]:
            logger.info("guest pin: %s %s -> %s", name, old, cands[name])
    toml_path = recipe_dir / "recipe.toml"
    new_toml = rewrite_recipe_pins(
        toml_path.read_text(),
        cands[recipe.kernel_package],
        {n: cands[n] for n in (*recipe.initramfs_packages, *recipe.tools_packages)},
    )

    logger.info("guest pin: debootstrap --variant=%s --download-only %s", recipe.variant, recipe.suite)
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="diskbench-pin-") as tmp:
        target = Path(tmp) / "target"
        run(
            [
                "debootstrap", f"--variant={recipe.variant}", "--download-only",
                recipe.suite, target, _apt_mirror(),
            ],
            timeout_s=1200,
            error_cls=GuestBuildError,
        )  # fmt: skip
        archives = target / "var" / "cache" / "apt" / "archives"
        controls = {}
        for deb in sorted(archives.glob("*.deb")):
            f = deb_fields(deb)
            controls[f["Package"]] = f
        required = required_closure(controls)
        packages = [PayloadPackage(n, f["Version"], n in required) for n, f in sorted(controls.items())]
    if not packages:
        raise GuestBuildError("debootstrap --download-only fetched no packages")
    lock = format_payload_lock(
        packages,
        header=(
            f"Install payload: debootstrap --variant={recipe.variant} --download-only {recipe.suite}\n"
            f"Generated by `{PIN_COMMAND}`; columns: package version essential|base\n"
            "essential = Essential: yes or Priority: required, and their dependencies\n"
            "(debootstrap's required set, extracted first)"
        ),
    )
    old_small = set(recipe.payload_small)
    dropped = old_small - {p.name for p in packages}
    if dropped:
        raise GuestBuildError(
            f"payload.small names packages that are no longer in the payload: "
            f"{', '.join(sorted(dropped))}; edit [payload] small in images/recipe.toml"
        )
    _write_atomic(toml_path, new_toml)
    _write_atomic(recipe_dir / "payload.lock", lock)
    logger.info(
        "guest pin: %d payload packages, %d essential", len(packages), sum(p.essential for p in packages)
    )
    return load_recipe(recipe_dir)


def _apt_mirror() -> str:
    """The Debian mirror URL of the host's apt sources (the only network there is)."""
    for src in _apt_source_lines():
        m = re.search(r"(https?://\S+/debian)/?(\s|$)", src)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


def _apt_source_lines() -> Iterator[str]:
    listdir = Path("/etc/apt/sources.list.d")
    sources = [
        Path("/etc/apt/sources.list"),
        *sorted(listdir.glob("*.list")),
        *sorted(listdir.glob("*.sources")),
    ]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(("deb ", "URIs:")) and "security" not in line:
                yield line


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
