"""apt as the project asks it: the system's configuration, or a private one (its own sources list,
index lists and caches) that adds the suites the system lacks; versions offered, control fields.

A private :class:`Apt` never writes to ``/etc/apt`` or ``/var/lib/apt``: ``apt-get update``
fetches its indexes into its own directory, and apt checks their signatures as it always does
(each source's ``Signed-By`` keyring, else apt's trusted keys).
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CommandError, InfraError
from harness.host.proc import run

#: The keyring Debian's archives (backports among them) are signed with.
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
#: A private index older than this is fetched again before it is read.
LISTS_MAX_AGE_S = 86400.0
BACKPORTS_FILE = "diskbench-backports.sources"


@dataclass(frozen=True)
class Apt:
    """An apt configuration: the ``-o`` options that every ``apt-get``/``apt-cache`` call takes."""

    options: tuple[str, ...] = ()
    #: the private directory (sources, lists, caches), or None for the system's configuration
    root: Path | None = None

    def argv(self, tool: str, *args: str) -> list[str]:
        """``tool`` (``apt-get``, ``apt-cache``) with this configuration and ``args``."""
        return [tool, *(x for option in self.options for x in ("-o", option)), *args]


SYSTEM_APT = Apt()


def private_apt(root: Path) -> Apt:
    """The configuration whose sources list, index lists and caches live under ``root``."""
    return Apt(
        (
            f"Dir::Etc::SourceList={root / 'sources.list'}",
            f"Dir::Etc::SourceParts={root / 'sources.list.d'}",
            f"Dir::State::Lists={root / 'lists'}",
            f"Dir::Cache={root / 'cache'}",
            "Dir::Cache::pkgcache=",
            "Dir::Cache::srcpkgcache=",
            # only the package indexes: no AppStream metadata
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
        ),
        root,
    )


def os_codename(os_release: Path = Path("/etc/os-release")) -> str:
    """This system's release codename (``bookworm``), or "" when it says none."""
    try:
        text = os_release.read_text()
    except OSError:
        return ""
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.M)
    return m.group(1) if m else ""


def backports_stanza(targets: Sequence[tuple[str, str]], codename: str, keyring: Path | None) -> str | None:
    """The deb822 source that adds ``CODENAME-backports``, or None when it is configured already.

    ``targets`` are the configured (site, suite) pairs; backports come from the site that serves
    ``codename`` itself (pure)."""
    if not codename or any(suite == f"{codename}-backports" for _, suite in targets):
        return None
    sites = sorted({site for site, suite in targets if suite == codename})
    if not sites:
        return None
    signed = f"Signed-By: {keyring}\n" if keyring is not None else ""
    return (
        "# added by diskbench: the QEMU builds Debian backports\n"
        f"Types: deb\nURIs: {' '.join(sites)}\nSuites: {codename}-backports\nComponents: main\n{signed}"
    )


def prepare_sources(apt: Apt, etc: Path = Path("/etc/apt")) -> bool:
    """Copy the system's sources into ``apt.root`` and add backports where the system lacks them;
    True when the private sources changed."""
    assert apt.root is not None
    parts = apt.root / "sources.list.d"
    parts.mkdir(parents=True, exist_ok=True)
    before = _sources_text(apt.root)
    main = etc / "sources.list"
    (apt.root / "sources.list").write_text(main.read_text() if main.is_file() else "")
    for old in parts.iterdir():
        old.unlink()
    for path in sorted((etc / "sources.list.d").glob("*")):
        if path.suffix in (".list", ".sources") and path.is_file():
            shutil.copyfile(path, parts / path.name)
    stanza = backports_stanza(
        index_targets(apt), os_codename(), DEBIAN_KEYRING if DEBIAN_KEYRING.is_file() else None
    )
    if stanza is not None:
        (parts / BACKPORTS_FILE).write_text(stanza)
    return _sources_text(apt.root) != before


def _sources_text(root: Path) -> str:
    files = [root / "sources.list", *sorted((root / "sources.list.d").glob("*"))]
    return "".join(f"{p.name}\n{p.read_text()}" for p in files if p.is_file())


def index_targets(apt: Apt) -> list[tuple[str, str]]:
    """The (site, suite) pairs of the configured package indexes (fetched or not)."""
    result = run(
        apt.argv(
            "apt-get", "indextargets", "--no-release-info", "--format", "$(SITE) $(RELEASE) $(IDENTIFIER)"
        ),
        timeout_s=60,
    )
    pairs = []
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[2] == "Packages":
            pairs.append((fields[0], fields[1]))
    return sorted(set(pairs))


def refresh(apt: Apt, *, max_age_s: float = LISTS_MAX_AGE_S, force: bool = False) -> bool:
    """``apt-get update`` of a private configuration when its sources changed, its lists are
    older than ``max_age_s`` or ``force``; True when it ran."""
    assert apt.root is not None
    (apt.root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt.root / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    changed = prepare_sources(apt)
    stamp = apt.root / "updated"
    fresh = stamp.is_file() and time.time() - stamp.stat().st_mtime < max_age_s
    if fresh and not changed and not force:
        return False
    try:
        result = run(apt.argv("apt-get", "update", "-q"), timeout_s=900)
    except CommandError as exc:
        raise InfraError(
            f"apt-get update of the private sources in {apt.root} failed: {exc.message}"
        ) from exc
    # apt-get update exits 0 when a source could not be fetched or verified: it warns
    problems = [
        line
        for line in result.stderr.splitlines()
        if line.startswith(("W:", "E:"))
        and ("NO_PUBKEY" in line or "not signed" in line or "Failed to fetch" in line)
    ]
    if problems:
        raise InfraError(f"apt-get update of the private sources in {apt.root}: {problems[0]}")
    stamp.touch()
    return True


def has_lists(apt: Apt) -> bool:
    """A private configuration's indexes were fetched at least once."""
    assert apt.root is not None
    return (apt.root / "updated").is_file()


@dataclass(frozen=True)
class Offer:
    """One version of a package that a configured suite offers (a line of ``apt-cache madison``)."""

    package: str
    version: str
    site: str
    suite: str


def parse_madison(text: str) -> list[Offer]:
    """``apt-cache madison`` lines (``pkg | version | site suite/component arch Packages``), pure."""
    out = []
    for line in text.splitlines():
        cols = [c.strip() for c in line.split("|")]
        if len(cols) != 3:
            continue
        where = cols[2].split()
        if len(where) < 2 or where[-1] != "Packages":
            continue
        out.append(Offer(cols[0], cols[1], where[0], where[1].split("/", 1)[0]))
    return out


def offers(apt: Apt, packages: Sequence[str]) -> list[Offer]:
    """Every version of ``packages`` the configured suites offer, as apt lists them."""
    result = run(apt.argv("apt-cache", "madison", *packages), timeout_s=120, check=False)
    return parse_madison(result.stdout)


def control_fields(apt: Apt, package: str, version: str) -> dict[str, str]:
    """The index's control fields of ``package=version`` (``apt-cache show``); {} when unknown."""
    result = run(apt.argv("apt-cache", "show", f"{package}={version}"), timeout_s=120, check=False)
    fields: dict[str, str] = {}
    key = ""
    for line in result.stdout.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        if line[0].isspace() and key:
            fields[key] += "\n" + line.strip()
            continue
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields
