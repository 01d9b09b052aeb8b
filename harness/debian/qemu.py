"""QEMU builds fetched from Debian's archives (``diskbench qemu list`` / ``get``).

The versions are those the configured suites offer, through a private apt configuration that adds
backports where the system lacks them (:mod:`harness.debian.apt`; apt checks the indexes'
signatures). ``get`` resolves a version (exact, or a short form such as ``10.0``: the newest
build it matches, :func:`resolve`), fetches its packages at exact versions into a cache that checks each one
(:mod:`harness.debian.debs`: only those packages, their Package, Version and Architecture, the
index's size and hash for one already cached), unpacks them as the guest build does (files, never
maintainer scripts) into a fresh directory, confines the tree (no link out of it, no set-id bit,
readable by QEMU's account) and swaps it in at ``builds/VERSION`` with its manifest
(:mod:`harness.subject.qemu_build`).

Layout under the root (:func:`harness.paths.qemu_cache_dir`)::

    apt/      private sources list, index lists and caches
    debs/     fetched packages, pruned to PACKAGE_CACHE_BYTES like the guest's
    builds/   one prefix per Debian version, the KEEP_BUILDS newest kept
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.debian import apt as debian_apt
from harness.debian import debs
from harness.debian.apt import Apt, Offer
from harness.debian.version import depends_on, satisfies, version_key
from harness.errors import CommandError, InfraError
from harness.files import file_digest
from harness.host import confine
from harness.host.hostinfo import short_version, tool_version
from harness.subject.qemu_build import (
    BINARIES,
    MANIFEST,
    REQUIRED_FILES,
    QemuBuild,
    QemuBuildError,
    load_build,
    upstream_version,
)

logger = logging.getLogger(__name__)

#: what a build is made of, all at one Debian version (qemu-system-data, arch all, at its source's)
QEMU_PACKAGES = (
    "qemu-system-x86",
    "qemu-system-common",
    "qemu-system-data",
    "qemu-utils",
    "qemu-block-extra",
)
#: the firmware qemu-system-x86 depends on: the lowest version the suites offer that satisfies it
FIRMWARE_PACKAGES = ("seabios", "ipxe-qemu")
#: the most bytes of packages one build may take; over it is exit 2
MAX_BUILD_BYTES = 1 << 30
#: ``debs/`` is pruned to this size, oldest first (as the guest's package cache)
PACKAGE_CACHE_BYTES = 2 << 30
#: builds beyond the newest KEEP_BUILDS that were unused for BUILD_IDLE_S are removed
KEEP_BUILDS = 4
BUILD_IDLE_S = 86400.0
LIST_COMMAND = "diskbench qemu list"


class QemuFetchError(CommandError):
    """A QEMU build could not be fetched or unpacked (exit 3)."""


@dataclass(frozen=True)
class Offered:
    """A QEMU build the configured suites offer whole: every package of :data:`QEMU_PACKAGES`."""

    debian_version: str
    suites: tuple[str, ...]

    @property
    def upstream(self) -> str:
        return upstream_version(self.debian_version)

    def describe(self) -> str:
        return f"{self.debian_version} ({', '.join(self.suites)})"


def source_version(debian_version: str) -> str:
    """The source's version of a binary package's (a binNMU's ``+bN`` dropped): arch-all packages
    of a binNMU keep the source's."""
    return re.sub(r"\+b\d+$", "", debian_version)


def offered_versions(offers: Iterable[Offer]) -> list[Offered]:
    """The builds offered whole, newest first (pure)."""
    by_package: dict[str, dict[str, set[str]]] = {}
    for offer in offers:
        by_package.setdefault(offer.package, {}).setdefault(offer.version, set()).add(offer.suite)
    out = []
    for version, suites in (by_package.get("qemu-system-x86") or {}).items():
        whole = all(
            (source_version(version) if name == "qemu-system-data" else version) in by_package.get(name, {})
            for name in QEMU_PACKAGES
        )
        if whole:
            out.append(Offered(version, tuple(sorted(suites))))
    return sorted(out, key=lambda o: version_key(o.debian_version), reverse=True)


def resolve(text: str, offered: Sequence[Offered]) -> Offered:
    """The offered build ``text`` names (pure): its Debian version (with or without the epoch), or
    for a short form of QEMU's version (``7.2``, ``10.0.2``) the **newest** build it matches in
    Debian's version order, whichever suite offers it (``7.2`` on bookworm: the point release's
    ``+deb12u18+b3`` over the security suite's older ``+deb12u15``; the newest carries every fix of
    the version).  A pin that must not move gives the Debian version whole."""
    wanted = text.strip()
    exact = [o for o in offered if wanted in (o.debian_version, o.debian_version.split(":", 1)[-1])]
    if exact:
        return exact[0]
    known = ", ".join(o.describe() for o in offered) or "none"
    if re.fullmatch(r"\d+(\.\d+)*", wanted):
        hits = [o for o in offered if o.upstream == wanted or o.upstream.startswith(wanted + ".")]
        if hits:
            return max(hits, key=lambda o: version_key(o.debian_version))
    shown = wanted if re.fullmatch(r"[\w.+~:-]{1,80}", wanted) else repr(wanted[:80])
    raise QemuBuildError(
        f"QEMU {shown}: not a version the configured suites offer (they offer: {known}); see `{LIST_COMMAND}`"
    )


def firmware_pins(depends: str, offers: Iterable[Offer]) -> dict[str, str]:
    """For each of :data:`FIRMWARE_PACKAGES`: the lowest offered version that satisfies
    qemu-system-x86's ``depends`` (pure)."""
    offers = list(offers)
    pins = {}
    for name in FIRMWARE_PACKAGES:
        constraints = depends_on(depends, name) or []
        fits = sorted(
            {o.version for o in offers if o.package == name and satisfies(o.version, constraints)},
            key=version_key,
        )
        if not fits:
            wanted = " ".join(f"{r} {v}" for r, v in constraints) or "any version"
            raise QemuFetchError(
                f"the configured suites offer no {name} ({wanted}) that this QEMU depends on"
            )
        pins[name] = fits[0]
    return pins


def build_key(debian_version: str) -> str:
    """The directory name of a build (the epoch colon as ``%3a``, as apt names files)."""
    return debian_version.replace(":", "%3a")


@dataclass(frozen=True)
class QemuCache:
    """The QEMU builds' cache under ``root``: its private apt, packages and builds."""

    root: Path

    @property
    def apt(self) -> Apt:
        return debian_apt.private_apt(self.root / "apt")

    @property
    def builds(self) -> Path:
        return self.root / "builds"

    def origin(self, version: str) -> debs.Origin:
        return debs.Origin(
            input=f"QEMU {version}",
            unit="QEMU build",
            refetch=f"pick another version from `{LIST_COMMAND}`",
            cap_fix="it is not a QEMU build this project can fetch",
            bad_input=QemuBuildError,
            failed=QemuFetchError,
            logger=__name__,
            prefix="qemu",
            max_bytes=MAX_BUILD_BYTES,
            cache_bytes=PACKAGE_CACHE_BYTES,
            apt=self.apt,
            verify_cached=True,
        )

    def offered(self, *, refresh: bool = True) -> list[Offered]:
        """What the configured suites offer (their indexes fetched first when stale)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if refresh:
            try:
                debian_apt.refresh(self.apt)
            except InfraError as exc:
                if not debian_apt.has_lists(self.apt):
                    raise
                # the indexes fetched before are still signed and exact, only older
                logger.warning("qemu: %s; using the indexes fetched before", exc.message)
        return offered_versions(debian_apt.offers(self.apt, QEMU_PACKAGES))

    def fetched(self) -> list[QemuBuild]:
        """The builds unpacked here, newest version first (an unreadable one is left out)."""
        found = []
        for prefix in sorted(self.builds.glob("*")) if self.builds.is_dir() else []:
            if prefix.name.startswith(".") or not (prefix / MANIFEST).is_file():
                continue
            try:
                found.append(load_build(prefix))
            except QemuBuildError:
                continue
        return sorted(found, key=lambda b: version_key(b.debian_version), reverse=True)

    def get(self, text: str) -> QemuBuild:
        """The build ``text`` names, fetched and unpacked unless it is here already (and intact)."""
        chosen = resolve(text, self.offered())
        prefix = self.builds / build_key(chosen.debian_version)
        if (prefix / MANIFEST).is_file():
            build = load_build(prefix)
            build.check()
            os.utime(prefix)  # in use: pruning spares it
            logger.info("qemu: using %s", build.describe())
            return build
        return self._fetch(chosen, prefix)

    def _fetch(self, chosen: Offered, prefix: Path) -> QemuBuild:
        version = chosen.debian_version
        apt = self.apt
        depends = debian_apt.control_fields(apt, "qemu-system-x86", version).get("Depends", "")
        pins = {
            name: source_version(version) if name == "qemu-system-data" else version for name in QEMU_PACKAGES
        }
        pins.update(firmware_pins(depends, debian_apt.offers(apt, FIRMWARE_PACKAGES)))
        paths = debs.fetch_debs(pins, self.root / "debs", self.origin(version))
        self.builds.mkdir(parents=True, exist_ok=True)
        for directory in (self.root, self.builds):
            directory.chmod(0o755)
        problem = confine.reach_problem(self.builds, confine.account())
        if problem:
            raise InfraError(f"{problem}: keep the QEMU builds where it can read them")
        tmp = Path(tempfile.mkdtemp(dir=self.builds, prefix=f".{prefix.name}-"))
        try:
            for name in sorted(paths):
                debs.extract_deb(paths[name], tmp, error_cls=QemuFetchError)
            confine_tree(tmp)
            build = _manifest(tmp, version, pins)
            (tmp / MANIFEST).write_text(json.dumps(build.as_dict(), indent=2, sort_keys=True) + "\n")
            (tmp / MANIFEST).chmod(0o644)
            try:
                os.replace(tmp, prefix)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)  # another get of this version finished first
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        logger.info("qemu: unpacked %s", version)
        self.prune()
        return load_build(prefix)

    def prune(self, *, keep: int = KEEP_BUILDS, idle_s: float = BUILD_IDLE_S) -> list[Path]:
        """Remove builds beyond the ``keep`` most recently used that were unused for ``idle_s``."""
        builds = sorted(
            (p for p in self.builds.iterdir() if p.is_dir() and not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        now = time.time()
        removed = []
        for old in builds[keep:]:
            if now - old.stat().st_mtime >= idle_s:
                logger.info("qemu: removing the unused build %s", old)
                shutil.rmtree(old, ignore_errors=True)
                removed.append(old)
        return removed


def confine_tree(root: Path) -> None:
    """Make an unpacked tree safe to run from: every link stays inside it (a relative target that,
    resolved through the tree's other links, ends inside it), nothing but files, directories and
    links, no set-id or sticky bit, nothing writable but by root, all readable."""
    inside = os.path.realpath(root)
    for current, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(current) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
                # resolved, not read: ``up -> ../..`` then ``esc -> d/up/../..`` reads as inside
                resolved = os.path.realpath(path)
                if os.path.isabs(target) or os.path.commonpath([inside, resolved]) != inside:
                    raise QemuFetchError(
                        f"the packages hold a link out of the build: {path.relative_to(root)} -> {target}"
                    )
            elif stat.S_ISDIR(st.st_mode):
                path.chmod(0o755)
            elif stat.S_ISREG(st.st_mode):
                path.chmod(0o755 if st.st_mode & 0o111 else 0o644)
            else:
                raise QemuFetchError(f"the packages hold a special file: {path.relative_to(root)}")
    root.chmod(0o755)
    for rel in (*REQUIRED_FILES, *(f"usr/bin/{b}" for b in BINARIES)):
        path = root / rel
        if not path.is_file() or path.is_symlink():
            raise QemuFetchError(f"the packages hold no {rel}: not a QEMU build this project can run")


def _manifest(prefix: Path, debian_version: str, pins: dict[str, str]) -> QemuBuild:
    """The build's manifest: what ``--version`` says (it must name this Debian version), the
    packages, the digests of its binaries."""
    qemu = prefix / "usr" / "bin" / "qemu-system-x86_64"
    line = tool_version(str(qemu))
    if f"Debian {debian_version}" not in line:
        raise QemuFetchError(f"{qemu} --version says {line!r}, not Debian {debian_version}")
    return QemuBuild(
        prefix=prefix,
        debian_version=debian_version,
        version=short_version(line),
        packages=tuple(sorted(pins.items())),
        digests=tuple(sorted((b, file_digest(prefix / "usr" / "bin" / b)) for b in BINARIES)),
    )
