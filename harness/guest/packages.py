"""Debian packages of the guest: fetching pinned versions into the shared cache, unpacking, repacking.

The fetching itself is :mod:`harness.debian.debs`; this module says how the guest asks (its
recipe named in errors, its caps, its log).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.debian import debs as _debs
from harness.debian.debs import AptFile, deb_filename, parse_print_uris
from harness.errors import GuestBuildError
from harness.guest.logs import Log, reported_to
from harness.guest.recipe import PIN_COMMAND, RecipeError
from harness.host.proc import run

__all__ = [
    "MAX_RECIPE_BYTES",
    "PACKAGE_CACHE_BYTES",
    "PACKAGE_IDLE_S",
    "AptFile",
    "deb_fields",
    "deb_filename",
    "extract_deb",
    "fetch_debs",
    "locate_debs",
    "parse_print_uris",
    "prune_package_cache",
    "repack_uncompressed",
]

#: The most bytes of packages (downloaded ``.deb`` files) one recipe may pin; over it is exit 2.
MAX_RECIPE_BYTES = 1 << 30
#: Each package cache (``debs/``, ``debs-uncompressed/``) is pruned to this size, oldest first.
PACKAGE_CACHE_BYTES = 2 << 30
#: A cached package used this recently is never pruned: another build may be about to read it.
PACKAGE_IDLE_S = _debs.PACKAGE_IDLE_S


def _origin() -> _debs.Origin:
    """How the guest's recipe asks for packages (read at each call: tests lower the caps)."""
    return _debs.Origin(
        input="images/recipe.toml",
        unit="recipe",
        refetch=f"re-pin with `{PIN_COMMAND}`",
        cap_fix="pin fewer or smaller packages",
        bad_input=RecipeError,
        failed=GuestBuildError,
        logger=__name__,
        prefix="guest",
        max_bytes=MAX_RECIPE_BYTES,
        cache_bytes=PACKAGE_CACHE_BYTES,
    )


def locate_debs(pins: Mapping[str, str], cwd: Path) -> dict[str, AptFile]:
    """What apt would fetch for each ``name=version``: exactly that package, or a RecipeError
    (:func:`harness.debian.debs.locate_debs`)."""
    return _debs.locate_debs(pins, cwd, _origin())


def fetch_debs(pins: Mapping[str, str], debs: Path, log: Log | None = None) -> dict[str, Path]:
    """Download each ``name=version`` into ``debs`` unless already there; name -> path.

    What apt would fetch is checked first (exact packages only, at most
    :data:`MAX_RECIPE_BYTES` in all); each download is checked again (its own
    Package, Version and size) before it enters the shared cache, which is then
    pruned (:func:`harness.debian.debs.fetch_debs`). A pin the mirror no longer
    has fails with the package named and the re-pin command. Progress is logged
    (INFO); ``log`` takes it instead (:func:`~harness.guest.logs.reported_to`).
    """
    with reported_to(log):
        return _debs.fetch_debs(pins, debs, _origin())


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
        return _debs.prune_package_cache(
            directory,
            keep=keep,
            max_bytes=PACKAGE_CACHE_BYTES if max_bytes is None else max_bytes,
            idle_s=idle_s,
            logger=_origin().log,
            prefix="guest",
        )


def extract_deb(deb: Path, dest: Path) -> None:
    """Unpack a package's files (not its scripts) into ``dest``."""
    _debs.extract_deb(deb, dest, error_cls=GuestBuildError)


def deb_fields(deb: Path) -> dict[str, str]:
    """The control fields of ``deb`` that the build and the pinning read."""
    return _debs.deb_fields(deb, error_cls=GuestBuildError)


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
