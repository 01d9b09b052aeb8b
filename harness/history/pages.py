"""The published history pages work offline: asv's CDN scripts and styles become local files.

``asv publish`` writes an ``index.html`` that loads jQuery, flot, bootstrap
and three small plugins from CDNs.  Pages opened where those cannot be
reached (a runner without internet, an archived copy, a test's headless
browser) would show nothing.  :func:`localize` copies each of them into the
pages' ``vendor/`` folder and points ``index.html`` there.

The files come from the npm registry (``npm pack`` of a pinned version,
checked against the registry's sha512 integrity), unpacked once into
``CACHE/asv-pages/``.  :func:`rewrite` is pure.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CommandError, InfraError
from harness.host import proc
from harness.paths import cache_dir

Log = Callable[[str], None]
VENDOR_DIR = "vendor"
_TAG = re.compile(r"<(?:script|link)\b[^>]*>")
_LOAD_URL = re.compile(r"""\b(src|href)=["']([^"']+)["']""")
_INTEGRITY = re.compile(r"""(\bintegrity=["'])[^"']*["']""")


@dataclass(frozen=True)
class Package:
    """An npm package at a pinned version, with the registry's integrity of its tarball."""

    name: str
    version: str
    integrity: str

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"


@dataclass(frozen=True)
class Asset:
    """A file asv's pages load from ``url``: ``member`` of ``package`` (plus files it refers to)."""

    url: str
    package: Package
    member: str
    extra: tuple[str, ...] = ()

    @property
    def local(self) -> str:
        """Where the pages load it from instead."""
        return f"{VENDOR_DIR}/{self.package.spec}/{self.member}"


JQUERY = Package(
    "jquery",
    "3.3.1",
    "sha512-Ubldcmxp5np52/ENotGxlLe6aGMvmF4R8S6tZjsP6Knsaxd/xp3Zrh50cG93lR6nPXyUFwzN3ZSOQI0wRJNdGg==",
)
FLOT = Package(
    "flot",
    "0.8.3",
    "sha512-xg2otcTJDvS+ERK+my4wxG/ASq90QURXtoM4LhacCq0jQW2jbyjdttbRNqU2cPykrpMvJ6b2uSp6SAgYAzj9tQ==",
)
ORDERBARS = Package(
    "flot-orderbars",
    "1.0.0",
    "sha512-Jv51fvzevUjNXEeozpwEKfPjhiZhfiJddv0WHjduUTCmSF+7T5K7C9c9Y1wIVmUhDBv5fLMjgbwKecT0GIKPZA==",
)
# cdnjs's stupidtable 1.0.1 is not on npm; 1.1.3 has the same $.fn.stupidtable
STUPIDTABLE = Package(
    "stupid-table-plugin",
    "1.1.3",
    "sha512-2Vk7XouQPxUQPRe9w0Fu7ZZ8kHLK7rDoLMsCgtKxRNJ7f4dSOGvW9CkHsq5wD6QsaEnWoyLBYH3xOEsrK3yWBg==",
)
MD5 = Package(
    "blueimp-md5",
    "2.19.0",
    "sha512-DRQrD6gJyy8FbiE4s+bDoXS9hiW3Vbx5uCdwvcCf3zLHL+Iv7LtGHLpr+GZV8rHG8tK766FGYBwRbu8pELTt+w==",
)
BOOTSTRAP = Package(
    "bootstrap",
    "3.1.1",
    "sha512-TAzqS8E/ISpVHP29gYhy+1NSV+FJwApDVQhDfgLYsIuUDJiqJzH2DfORN5tiu+Ie2iBLrzEG34t4Rf465cigqg==",
)
_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
_GLYPHICONS = tuple(f"dist/fonts/glyphicons-halflings-regular.{ext}" for ext in ("eot", "svg", "ttf", "woff"))
# The URLs asv 0.6's index.html names, and what stands in for each (flot's
# minified files are not in its npm package: the plain ones are the same code).
ASSETS: tuple[Asset, ...] = (
    Asset("https://code.jquery.com/jquery-3.3.1.min.js", JQUERY, "dist/jquery.min.js"),
    *(
        Asset(f"{_CDNJS}/flot/0.8.3/{name}.min.js", FLOT, f"{name}.js")
        for name in ("jquery.flot", "jquery.flot.time", "jquery.flot.selection", "jquery.flot.categories")
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js",
        ORDERBARS,
        "js/jquery.flot.orderBars.js",
    ),
    Asset(f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js", STUPIDTABLE, "stupidtable.min.js"),
    Asset(f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js", MD5, "js/md5.min.js"),
    Asset(
        "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js",
        BOOTSTRAP,
        "dist/js/bootstrap.min.js",
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css",
        BOOTSTRAP,
        "dist/css/bootstrap.min.css",
        extra=_GLYPHICONS,
    ),
)


def rewrite(html: str, assets: Iterable[Asset], integrity: Mapping[str, str]) -> tuple[str, list[str]]:
    """Point every ``<script>``/``<link>`` that loads an asset's URL at its local copy.

    asv's tags carry subresource integrity for the CDN's file; a local copy
    that is not byte for byte that file (flot's plain files stand in for
    cdnjs's minified ones) would be refused by the browser, so the tag gets
    ``integrity[asset.local]``, the digest of the copy it now loads.
    Returns the new text and the external URLs it still loads (a plain
    ``<a>`` to another site is not a load).
    """
    by_url = {a.url: a for a in assets}

    def swap(match: re.Match[str]) -> str:
        tag = match.group(0)
        url = _LOAD_URL.search(tag)
        asset = by_url.get(url.group(2)) if url else None
        if asset is None:
            return tag
        tag = tag.replace(asset.url, asset.local)
        digest = integrity.get(asset.local)
        if digest:
            tag = _INTEGRITY.sub(lambda m: f"{m.group(1)}{digest}{m.group(1)[-1]}", tag)
        return tag

    html = _TAG.sub(swap, html)
    left = [m.group(2) for tag in _TAG.finditer(html) if (m := _LOAD_URL.search(tag.group(0)))]
    return html, [u for u in left if u.startswith(("http://", "https://", "//"))]


def digest_of(data: bytes) -> str:
    """Subresource integrity of a file: ``sha384-...``, as browsers check it."""
    return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()


def localize(html_dir: Path, *, log: Log, assets: tuple[Asset, ...] = ASSETS) -> list[str]:
    """Copy the assets into ``html_dir/vendor/`` and rewrite ``index.html``; return what stays remote."""
    index = html_dir / "index.html"
    integrity: dict[str, str] = {}
    for asset in assets:
        root = unpacked(asset.package, log=log)
        for member in (asset.member, *asset.extra):
            dest = html_dir / VENDOR_DIR / asset.package.spec / member
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / member, dest)
        integrity[asset.local] = digest_of((root / asset.member).read_bytes())
    text, left = rewrite(index.read_text(encoding="utf-8"), assets, integrity)
    index.write_text(text, encoding="utf-8")
    for url in left:
        log(f"pages: WARNING: index.html still loads {url} from the network")
    return left


def unpacked(package: Package, *, log: Log, cache: Path | None = None) -> Path:
    """The package's files, from the cache or ``npm pack`` (integrity checked)."""
    root = (cache or cache_dir()) / "asv-pages" / package.spec
    if (root / "package.json").is_file():
        return root
    log(f"pages: fetching {package.spec} from the npm registry (npm pack)")
    with tempfile.TemporaryDirectory(prefix="diskbench-npm-") as tmp:
        try:
            result = proc.run(
                ["npm", "pack", "--json", "--pack-destination", tmp, package.spec], timeout_s=300, cwd=tmp
            )
        except CommandError as exc:
            raise InfraError(
                f"npm pack {package.spec} failed ({exc.message}): the history pages need it once "
                "(scripts/setup.sh installs npm)"
            ) from exc
        tarball = Path(tmp) / _packed_name(result.stdout, package)
        check_integrity(tarball.read_bytes(), package)
        root.parent.mkdir(parents=True, exist_ok=True)
        # unpacked beside its place and renamed, so a cache entry is whole or absent
        staging = Path(tempfile.mkdtemp(prefix=f".{package.spec}-", dir=root.parent))
        try:
            with tarfile.open(tarball) as tar:
                tar.extractall(staging, filter="data")
            shutil.rmtree(root, ignore_errors=True)
            (staging / "package").rename(root)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return root


def _packed_name(stdout: str, package: Package) -> str:
    try:
        entries = json.loads(stdout[stdout.find("[") :])
        return str(entries[0]["filename"])
    except (ValueError, LookupError, TypeError):
        raise InfraError(f"npm pack {package.spec} printed no tarball name: {stdout[:200]!r}") from None


def check_integrity(data: bytes, package: Package) -> None:
    """The tarball must be the one the registry published under this version."""
    digest = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if digest != package.integrity:
        raise InfraError(
            f"npm pack {package.spec}: integrity {digest[:24]}... is not the pinned "
            f"{package.integrity[:24]}...: refusing it"
        )
