"""Debian packages of the guest: fetching pinned versions into the shared cache, unpacking, repacking."""

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

from harness.errors import CommandError, GuestBuildError
from harness.guest.logs import Log, reported_to
from harness.guest.recipe import PIN_COMMAND, RecipeError
from harness.host.proc import run

logger = logging.getLogger(__name__)


def deb_filename(name: str, version: str, arch: str) -> str:
    """The file name ``apt-get download`` gives a package (epoch colon as ``%3a``)."""
    return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


#: The most bytes of packages (downloaded ``.deb`` files) one recipe may pin; over it is exit 2.
MAX_RECIPE_BYTES = 1 << 30
#: Each package cache (``debs/``, ``debs-uncompressed/``) is pruned to this size, oldest first.
PACKAGE_CACHE_BYTES = 2 << 30
#: A cached package used this recently is never pruned: another build may be about to read it.
PACKAGE_IDLE_S = 600.0
_ARCHES = ("amd64", "all")


def _cached_deb(debs: Path, name: str, version: str) -> Path | None:
    for arch in _ARCHES:
        path = debs / deb_filename(name, version, arch)
        if path.is_file():
            return path
    return None


@dataclass(frozen=True)
class AptFile:
    """One line of ``apt-get download --print-uris``: what apt would fetch."""

    uri: str
    filename: str
    size: int


def parse_print_uris(text: str) -> list[AptFile]:
    """The files of ``apt-get download --print-uris`` (``'URI' FILENAME SIZE HASH`` lines)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^'([^']*)' (\S+) (\d+)(?: |$)", line)
        if m:
            out.append(AptFile(m.group(1), m.group(2), int(m.group(3))))
    return out


def _print_uris(pins: Mapping[str, str], cwd: Path) -> list[AptFile]:
    argv = ["apt-get", "download", "--print-uris", *(f"{n}={v}" for n, v in sorted(pins.items()))]
    try:
        result = run(argv, timeout_s=300, cwd=cwd)
    except CommandError as exc:
        if len(pins) > 1:
            for name, version in sorted(pins.items()):
                _print_uris({name: version}, cwd)  # names the pin that fails
        raise GuestBuildError(
            f"cannot fetch pinned package {' '.join(f'{n}={v}' for n, v in pins.items())} "
            f"({exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else exc}); "
            f"the mirror has moved on: re-pin with `{PIN_COMMAND}`",
            argv=exc.argv,
            returncode=exc.returncode,
            stderr=exc.stderr,
        ) from exc
    return parse_print_uris(result.stdout)


def locate_debs(pins: Mapping[str, str], cwd: Path) -> dict[str, AptFile]:
    """What apt would fetch for each ``name=version``: exactly that package, or a RecipeError.

    ``apt-get download`` reads a name that is no package's exact name as a
    pattern (``zlib1.+`` is ``zlib1g`` and ``zlib1g-dev``), so apt is first
    asked what it would fetch, without fetching: every pin must give one file
    named for that exact package and version, and nothing else may come.
    ``cwd`` must be an empty directory: apt lists no file that is already there.
    """
    if not pins:
        return {}
    files = _print_uris(pins, cwd)
    by_name = {f.filename: f for f in files}
    found: dict[str, AptFile] = {}
    wanted: set[str] = set()
    for name, version in pins.items():
        names = [deb_filename(name, version, arch) for arch in _ARCHES]
        wanted.update(names)
        hit = next((by_name[n] for n in names if n in by_name), None)
        if hit is not None:
            found[name] = hit
    stray = sorted(f.filename for f in files if f.filename not in wanted)
    unmatched = sorted(f"{n}={v}" for n, v in pins.items() if n not in found)
    if stray or unmatched or len(files) != len(pins):
        raise RecipeError(
            f"images/recipe.toml: {', '.join(unmatched) or 'a package name'} is not exactly one "
            f"package: apt reads it as a pattern and would fetch "
            f"{', '.join(stray[:5]) or 'other files'}{' ...' if len(stray) > 5 else ''}; "
            "name each package exactly, as `apt-cache policy NAME` shows it"
        )
    return found


def fetch_debs(pins: Mapping[str, str], debs: Path, log: Log | None = None) -> dict[str, Path]:
    """Download each ``name=version`` into ``debs`` unless already there; name -> path.

    What apt would fetch is checked first (:func:`locate_debs`: exact packages
    only, at most :data:`MAX_RECIPE_BYTES` in all); each download is checked
    again (its own Package, Version and size) before it enters the shared
    cache, which is then pruned (:func:`prune_package_cache`). A pin the mirror
    no longer has fails with the package named and the re-pin command. Progress is logged
    (INFO); ``log`` takes it instead (:func:`~harness.guest.logs.reported_to`).
    """
    with reported_to(log):
        return _fetch_debs(pins, debs)


def _fetch_debs(pins: Mapping[str, str], debs: Path) -> dict[str, Path]:
    debs.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    missing: dict[str, str] = {}
    for name, version in pins.items():
        path = _cached_deb(debs, name, version)
        if path is None:
            missing[name] = version
        else:
            found[name] = path
    with tempfile.TemporaryDirectory(dir=debs, prefix=".dl-") as tmp:
        located = locate_debs(missing, Path(tmp))
        total = sum(p.stat().st_size for p in found.values()) + sum(f.size for f in located.values())
        if total > MAX_RECIPE_BYTES:
            raise RecipeError(
                f"images/recipe.toml: its {len(pins)} packages take {total / 2**30:.2f} GiB, over the "
                f"cap of {MAX_RECIPE_BYTES / 2**30:.2f} GiB per recipe: pin fewer or smaller packages"
            )
        if missing:
            logger.info("guest: downloading %d packages into %s", len(missing), debs)
        step = _progress_step(len(missing))
        done_bytes = 0
        for done, (name, version) in enumerate(sorted(missing.items()), start=1):
            found[name] = _download(name, version, located[name], Path(tmp) / name, debs)
            done_bytes += located[name].size
            if done % step == 0 or done == len(missing):
                logger.info(
                    "guest: downloaded %d/%d packages (%.1f MiB)", done, len(missing), done_bytes / 2**20
                )
    prune_package_cache(debs, keep=found.values())
    return found


def _progress_step(count: int) -> int:
    """Downloads between two progress lines: every tenth of ``count``, at most every 10."""
    return max(1, min(10, -(-count // 10)))


def _download(name: str, version: str, expected: AptFile, tmp: Path, debs: Path) -> Path:
    """``apt-get download name=version`` into ``tmp``, checked, then moved into ``debs``."""
    tmp.mkdir()
    try:
        # One call per package so the error names the pin that failed.
        run(["apt-get", "download", f"{name}={version}"], cwd=tmp, timeout_s=600)
    except CommandError as exc:
        raise GuestBuildError(
            f"cannot fetch pinned package {name}={version} "
            f"({exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else exc}); "
            f"the mirror has moved on: re-pin with `{PIN_COMMAND}`",
            argv=exc.argv,
            returncode=exc.returncode,
            stderr=exc.stderr,
        ) from exc
    got = sorted(p.name for p in tmp.iterdir())
    deb = tmp / expected.filename
    if got != [expected.filename] or not deb.is_file() or deb.is_symlink():
        raise GuestBuildError(
            f"apt-get download {name}={version} gave {', '.join(got[:5]) or 'nothing'}, "
            f"not just {expected.filename}; nothing of it was cached"
        )
    fields = deb_fields(deb)
    size = deb.stat().st_size
    if (fields.get("Package"), fields.get("Version"), size) != (name, version, expected.size) or fields.get(
        "Architecture"
    ) not in _ARCHES:
        raise GuestBuildError(
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
    log: Log | None = None,
    max_bytes: int | None = None,
    idle_s: float = PACKAGE_IDLE_S,
) -> list[Path]:
    """Remove the least recently used packages of ``directory`` until it holds ``max_bytes``
    (default :data:`PACKAGE_CACHE_BYTES`).

    ``keep`` (what the current recipe uses) is marked used now and never
    removed, nor is a package used within ``idle_s``. Returns what was removed (and logs it;
    ``log`` takes that line instead, :func:`~harness.guest.logs.reported_to`).
    """
    with reported_to(log):
        return _prune_package_cache(directory, keep=keep, max_bytes=max_bytes, idle_s=idle_s)


def _prune_package_cache(
    directory: Path, *, keep: Iterable[Path], max_bytes: int | None, idle_s: float
) -> list[Path]:
    max_bytes = PACKAGE_CACHE_BYTES if max_bytes is None else max_bytes
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
            "guest: pruned %d packages from %s (now %.0f MiB)", len(removed), directory, total / 2**20
        )
    return removed


def extract_deb(deb: Path, dest: Path) -> None:
    """Unpack a package's files (not its scripts) into ``dest``."""
    run(["dpkg-deb", "-x", deb, dest], timeout_s=600, error_cls=GuestBuildError)


def repack_uncompressed(deb: Path, out: Path, tmp_root: Path) -> None:
    """Rebuild ``deb`` at ``out`` with uncompressed members (``dpkg-deb -Znone``).

    The guest's unpack then costs IO, not XZ decompression under emulation.
    """
    with tempfile.TemporaryDirectory(dir=tmp_root, prefix="repack-") as tmp:
        tree = Path(tmp) / "tree"
        run(["dpkg-deb", "-R", deb, tree], timeout_s=600, error_cls=GuestBuildError)
        # a name of this build's own: another build of another recipe may repack the same package now
        part = out.with_name(f"{out.name}.{os.getpid()}.{Path(tmp).name}.part")
        run(
            ["dpkg-deb", "-Znone", "--nocheck", "-b", tree, part],
            timeout_s=600,
            error_cls=GuestBuildError,
        )
        os.replace(part, out)


def deb_fields(deb: Path) -> dict[str, str]:
    """The control fields of ``deb`` that the build and the pinning read."""
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
        error_cls=GuestBuildError,
    )
    fields = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields
