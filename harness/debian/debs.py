"""Debian packages fetched with apt at exact versions into a shared cache: located, downloaded,
checked, pruned, unpacked.

The guest's recipe (:mod:`harness.guest.packages`) and the QEMU builds
(:mod:`harness.debian.qemu`) fetch through here; an :class:`Origin` says who asks:
how its errors name its input and the fix, its caps, where its progress is logged and which
apt configuration answers (:class:`harness.debian.apt.Apt`).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.debian.apt import SYSTEM_APT, Apt
from harness.errors import CommandError, HarnessError
from harness.files import file_digest
from harness.host.proc import run

#: A cached package used this recently is never pruned: another build may be about to read it.
PACKAGE_IDLE_S = 600.0
ARCHES = ("amd64", "all")


def deb_filename(name: str, version: str, arch: str) -> str:
    """The file name ``apt-get download`` gives a package (epoch colon as ``%3a``)."""
    return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


@dataclass(frozen=True)
class Origin:
    """Who fetches: how its errors name its input and the fix, its caps, its log, its apt."""

    #: the input that names the packages, first in a bad-input message ("images/recipe.toml")
    input: str
    #: what a cap is counted per ("recipe")
    unit: str
    #: the fix when the mirror no longer has a pinned version ("re-pin with `...`")
    refetch: str
    #: the fix when the packages are over :attr:`max_bytes`
    cap_fix: str
    #: the error for bad input (exit 2) and for a failed fetch (exit 3)
    bad_input: type[HarnessError]
    failed: type[CommandError]
    #: the logger progress goes to, and the word its lines start with ("guest")
    logger: str
    prefix: str
    #: the most bytes of packages one fetch may take; the size the cache is pruned to
    max_bytes: int
    cache_bytes: int
    apt: Apt = SYSTEM_APT
    #: check cached packages against the archive's index (size and SHA256) before using them
    verify_cached: bool = False

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(self.logger)


@dataclass(frozen=True)
class AptFile:
    """One line of ``apt-get download --print-uris``: what apt would fetch."""

    uri: str
    filename: str
    size: int
    #: the archive index's hash, as apt prints it (``SHA256:hex``), or ""
    digest: str = ""


def parse_print_uris(text: str) -> list[AptFile]:
    """The files of ``apt-get download --print-uris`` (``'URI' FILENAME SIZE HASH`` lines)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^'([^']*)' (\S+) (\d+)(?: (\S+))?", line)
        if m:
            out.append(AptFile(m.group(1), m.group(2), int(m.group(3)), m.group(4) or ""))
    return out


def cached_deb(debs: Path, name: str, version: str) -> Path | None:
    """The cached file of ``name=version`` in ``debs``, or None."""
    for arch in ARCHES:
        path = debs / deb_filename(name, version, arch)
        if path.is_file():
            return path
    return None


def _moved_on(pins: Mapping[str, str], exc: CommandError, origin: Origin) -> CommandError:
    """The error of an apt call that could not fetch ``pins``: its last line and the fix."""
    last = exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else str(exc)
    return origin.failed(
        f"cannot fetch pinned package {' '.join(f'{n}={v}' for n, v in pins.items())} "
        f"({last}); the mirror has moved on: {origin.refetch}",
        argv=exc.argv,
        returncode=exc.returncode,
        stderr=exc.stderr,
    )


def _print_uris(pins: Mapping[str, str], cwd: Path, origin: Origin) -> list[AptFile]:
    argv = origin.apt.argv(
        "apt-get", "download", "--print-uris", *(f"{n}={v}" for n, v in sorted(pins.items()))
    )
    try:
        result = run(argv, timeout_s=300, cwd=cwd)
    except CommandError as exc:
        if len(pins) > 1:
            for name, version in sorted(pins.items()):
                _print_uris({name: version}, cwd, origin)  # names the pin that fails
        raise _moved_on(pins, exc, origin) from exc
    return parse_print_uris(result.stdout)


def locate_debs(pins: Mapping[str, str], cwd: Path, origin: Origin) -> dict[str, AptFile]:
    """What apt would fetch for each ``name=version``: exactly that package, or ``origin.bad_input``.

    ``apt-get download`` reads a name that is no package's exact name as a
    pattern (``zlib1.+`` is ``zlib1g`` and ``zlib1g-dev``), so apt is first
    asked what it would fetch, without fetching: every pin must give one file
    named for that exact package and version, and nothing else may come.
    ``cwd`` must be an empty directory: apt lists no file that is already there.
    """
    if not pins:
        return {}
    files = _print_uris(pins, cwd, origin)
    by_name = {f.filename: f for f in files}
    found: dict[str, AptFile] = {}
    wanted: set[str] = set()
    for name, version in pins.items():
        names = [deb_filename(name, version, arch) for arch in ARCHES]
        wanted.update(names)
        hit = next((by_name[n] for n in names if n in by_name), None)
        if hit is not None:
            found[name] = hit
    stray = sorted(f.filename for f in files if f.filename not in wanted)
    unmatched = sorted(f"{n}={v}" for n, v in pins.items() if n not in found)
    if stray or unmatched or len(files) != len(pins):
        raise origin.bad_input(
            f"{origin.input}: {', '.join(unmatched) or 'a package name'} is not exactly one "
            f"package: apt reads it as a pattern and would fetch "
            f"{', '.join(stray[:5]) or 'other files'}{' ...' if len(stray) > 5 else ''}; "
            "name each package exactly, as `apt-cache policy NAME` shows it"
        )
    return found


def fetch_debs(pins: Mapping[str, str], debs: Path, origin: Origin) -> dict[str, Path]:
    """Download each ``name=version`` into ``debs`` unless already there; name -> path.

    What apt would fetch is checked first (:func:`locate_debs`: exact packages
    only, at most ``origin.max_bytes`` in all); each download is checked
    again (its own Package, Version and size) before it enters the shared
    cache, which is then pruned (:func:`prune_package_cache`). With
    ``origin.verify_cached``, a package already cached must match the archive's
    index too (size and hash), or it is refused as tampered. A pin the mirror no
    longer has fails with the package named and ``origin.refetch``.
    """
    debs.mkdir(parents=True, exist_ok=True)
    log = origin.log
    found: dict[str, Path] = {}
    missing: dict[str, str] = {}
    for name, version in pins.items():
        path = cached_deb(debs, name, version)
        if path is None:
            missing[name] = version
        else:
            found[name] = path
    with tempfile.TemporaryDirectory(dir=debs, prefix=".dl-") as tmp:
        located = locate_debs(pins if origin.verify_cached else missing, Path(tmp), origin)
        if origin.verify_cached:
            for name, path in found.items():
                check_cached(path, located[name], origin)
        total = sum(p.stat().st_size for p in found.values()) + sum(located[n].size for n in missing)
        if total > origin.max_bytes:
            raise origin.bad_input(
                f"{origin.input}: its {len(pins)} packages take {total / 2**30:.2f} GiB, over the "
                f"cap of {origin.max_bytes / 2**30:.2f} GiB per {origin.unit}: {origin.cap_fix}"
            )
        if missing:
            log.info("%s: downloading %d packages into %s", origin.prefix, len(missing), debs)
        step = progress_step(len(missing))
        done_bytes = 0
        for done, (name, version) in enumerate(sorted(missing.items()), start=1):
            found[name] = _download(name, version, located[name], Path(tmp) / name, debs, origin)
            done_bytes += located[name].size
            if done % step == 0 or done == len(missing):
                log.info(
                    "%s: downloaded %d/%d packages (%.1f MiB)",
                    origin.prefix,
                    done,
                    len(missing),
                    done_bytes / 2**20,
                )
    prune_package_cache(
        debs, keep=found.values(), max_bytes=origin.cache_bytes, logger=log, prefix=origin.prefix
    )
    return found


def progress_step(count: int) -> int:
    """Downloads between two progress lines: every tenth of ``count``, at most every 10."""
    return max(1, min(10, -(-count // 10)))


def check_cached(path: Path, expected: AptFile, origin: Origin) -> None:
    """A cached package is the archive's (size and hash of the signed index), or bad input."""
    algorithm, _, want = expected.digest.partition(":")
    algorithm = algorithm.lower()
    size = path.stat().st_size
    got = file_digest(path, algorithm) if algorithm in ("sha256", "sha512") else ""
    if size != expected.size or not got or got != want.lower():
        raise origin.bad_input(
            f"{path}: a tampered package in the cache ({size} bytes, {algorithm or 'hash'} "
            f"{got[:16] or '?'}...; the archive's index says {expected.size} bytes, "
            f"{want[:16].lower() or '?'}...): remove it and fetch again"
        )


def _download(name: str, version: str, expected: AptFile, tmp: Path, debs: Path, origin: Origin) -> Path:
    """``apt-get download name=version`` into ``tmp``, checked, then moved into ``debs``."""
    tmp.mkdir()
    try:
        # One call per package so the error names the pin that failed.
        run(origin.apt.argv("apt-get", "download", f"{name}={version}"), cwd=tmp, timeout_s=600)
    except CommandError as exc:
        raise _moved_on({name: version}, exc, origin) from exc
    got = sorted(p.name for p in tmp.iterdir())
    deb = tmp / expected.filename
    if got != [expected.filename] or not deb.is_file() or deb.is_symlink():
        raise origin.failed(
            f"apt-get download {name}={version} gave {', '.join(got[:5]) or 'nothing'}, "
            f"not just {expected.filename}; nothing of it was cached"
        )
    fields = deb_fields(deb, error_cls=origin.failed)
    size = deb.stat().st_size
    if (fields.get("Package"), fields.get("Version"), size) != (name, version, expected.size) or fields.get(
        "Architecture"
    ) not in ARCHES:
        raise origin.failed(
            f"apt-get download {name}={version} gave package {fields.get('Package')!r} version "
            f"{fields.get('Version')!r} ({fields.get('Architecture')}, {size} bytes, the index said "
            f"{expected.size}); nothing of it was cached"
        )
    target = debs / deb_filename(name, version, fields["Architecture"])
    os.replace(deb, target)
    return target


def prune_package_cache(
    directory: Path,
    *,
    keep: Iterable[Path],
    max_bytes: int,
    idle_s: float = PACKAGE_IDLE_S,
    logger: logging.Logger,
    prefix: str,
) -> list[Path]:
    """Remove the least recently used packages of ``directory`` until it holds ``max_bytes``.

    ``keep`` (what the current fetch uses) is marked used now and never
    removed, nor is a package used within ``idle_s``. Returns what was removed (and logs it).
    """
    now = time.time()
    kept = set()
    for path in keep:
        os.utime(path, (now, now))
        kept.add(path.name)
    entries = []
    for path in directory.glob("*.deb"):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if not path.name.startswith(".") and stat.S_ISREG(st.st_mode):
            entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    removed = []
    for mtime, size, path in sorted(entries, key=lambda e: (e[0], e[2].name)):
        if total <= max_bytes:
            break
        if path.name in kept or now - mtime < idle_s:
            continue
        path.unlink(missing_ok=True)
        total -= size
        removed.append(path)
    if removed:
        logger.info(
            "%s: pruned %d packages from %s (now %.0f MiB)", prefix, len(removed), directory, total / 2**20
        )
    return removed


def extract_deb(deb: Path, dest: Path, *, error_cls: type[CommandError] = CommandError) -> None:
    """Unpack a package's files (not its scripts) into ``dest``."""
    run(["dpkg-deb", "-x", deb, dest], timeout_s=600, error_cls=error_cls)


def deb_fields(deb: Path, *, error_cls: type[CommandError] = CommandError) -> dict[str, str]:
    """The control fields of ``deb`` that the builds and the pinning read."""
    result = run(
        [
            "dpkg-deb",
            "-f",
            deb,
            "Package",
            "Version",
            "Architecture",
            "Priority",
            "Essential",
            "Depends",
            "Pre-Depends",
        ],
        timeout_s=60,
        error_cls=error_cls,
    )
    fields = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields
