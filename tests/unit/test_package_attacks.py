"""A pull request's package names reach ``apt-get download``: each must be exactly one package.

``apt-get download`` reads a name that is no package's exact name as a regular
expression: ``zlib1.+=VERSION`` fetched ``zlib1g`` and ``zlib1g-dev`` into the
shared package cache, and ``linux-.+`` resolves to 35 packages, 2.5 GB. These
tests put a stand-in ``apt-get`` on PATH that resolves names the way apt does
(an exact name first, else a pattern) over a small archive of real ``.deb``
files built here, and logs every call.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import guest
from harness.errors import ExitCode, GuestBuildError
from harness.guest import RecipeError
from harness.paths import IMAGES_DIR

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")

FAKE_APT = r"""#!{python}
import json, os, re, shutil, sys
archive = os.environ["FAKE_APT_ARCHIVE"]
with open(os.environ["FAKE_APT_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
index = json.load(open(os.path.join(archive, "index.json")))
args = sys.argv[1:]
assert args[0] == "download", args
uris = "--print-uris" in args
chosen = []
for arg in [a for a in args[1:] if not a.startswith("-")]:
    name, _, version = arg.partition("=")
    hits = [e for e in index if e["package"] == name]
    if not hits:  # apt: not a package name, so a pattern
        hits = [e for e in index if re.search(name, e["package"])]
    hits = [e for e in hits if e["version"] == version]
    if not hits:
        print(f"E: Version '{version}' for '{name}' was not found", file=sys.stderr)
        sys.exit(100)
    chosen += hits
for e in chosen:
    if uris:
        size = os.path.getsize(os.path.join(archive, e["serve"]))
        print(f"'http://mirror/{e['file']}' {e['file']} {size} SHA256:00")
    else:
        shutil.copy(os.path.join(archive, e["serve"]), e["file"])
"""


def build_deb(out: Path, package: str, version: str, payload: int = 0) -> Path:
    tree = out / f"tree-{package}-{version.replace(':', '_')}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: amd64\nMaintainer: x <x@x>\n"
        f"Description: test\n"
    )
    if payload:
        (tree / "data").write_bytes(os.urandom(payload))
    deb = out / f"{package}-{version.replace(':', '_')}.deb"
    subprocess.run(["dpkg-deb", "-Znone", "--nocheck", "-b", tree, deb], check=True, capture_output=True)
    shutil.rmtree(tree)
    return deb


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An archive with zlib1g and zlib1g-dev at one version, and a fake apt-get serving it."""
    arch = tmp_path / "archive"
    arch.mkdir()
    index = []
    for package in ("zlib1g", "zlib1g-dev"):
        deb = build_deb(arch, package, "1:1.2.13-1")
        index.append(
            {
                "package": package,
                "version": "1:1.2.13-1",
                "file": guest.deb_filename(package, "1:1.2.13-1", "amd64"),
                "serve": deb.name,
            }
        )
    (arch / "index.json").write_text(json.dumps(index))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apt-get"
    fake.write_text(FAKE_APT.replace("{python}", sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_APT_ARCHIVE", str(arch))
    monkeypatch.setenv("FAKE_APT_LOG", str(tmp_path / "apt.log"))
    return arch


def apt_calls(archive: Path) -> list[list[str]]:
    log = archive.parent / "apt.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def cached(debs: Path) -> list[str]:
    return sorted(p.name for p in debs.rglob("*.deb")) if debs.exists() else []


def test_a_pattern_name_fetches_nothing_into_the_cache(archive: Path, tmp_path: Path) -> None:
    debs = tmp_path / "cache" / "debs"
    with pytest.raises(RecipeError) as caught:
        guest.fetch_debs({"zlib1.+": "1:1.2.13-1"}, debs, lambda _line: None)
    assert caught.value.exit_code == ExitCode.USAGE
    message = caught.value.message
    assert "zlib1.+=1:1.2.13-1 is not exactly one package" in message
    assert "zlib1g-dev_1%3a1.2.13-1_amd64.deb" in message
    assert "\n" not in message
    assert cached(debs) == []
    # apt was only asked what it would fetch
    assert all("--print-uris" in call for call in apt_calls(archive))


def test_a_pattern_matching_one_other_package_is_refused(archive: Path, tmp_path: Path) -> None:
    debs = tmp_path / "debs"
    with pytest.raises(RecipeError, match=r"zlib1g-de\.=1:1\.2\.13-1 is not exactly one package"):
        guest.fetch_debs({"zlib1g-de.": "1:1.2.13-1"}, debs, lambda _line: None)
    assert cached(debs) == []


def test_an_exact_pin_is_fetched_checked_and_cached(archive: Path, tmp_path: Path) -> None:
    debs = tmp_path / "debs"
    paths = guest.fetch_debs({"zlib1g": "1:1.2.13-1"}, debs, lambda _line: None)
    assert paths == {"zlib1g": debs / "zlib1g_1%3a1.2.13-1_amd64.deb"}
    assert cached(debs) == ["zlib1g_1%3a1.2.13-1_amd64.deb"]
    assert [c[:2] for c in apt_calls(archive)] == [
        ["download", "--print-uris"],
        ["download", "zlib1g=1:1.2.13-1"],
    ]
    # a second fetch is served from the cache: apt is asked nothing
    guest.fetch_debs({"zlib1g": "1:1.2.13-1"}, debs, lambda _line: None)
    assert len(apt_calls(archive)) == 2


def test_the_download_says_how_far_it_is(archive: Path, tmp_path: Path) -> None:
    build_deb(archive, "zlib1g-dev", "1:1.2.13-1", payload=3 << 20)  # served in place of the small one
    debs = tmp_path / "debs"
    lines: list[str] = []
    guest.fetch_debs({"zlib1g": "1:1.2.13-1", "zlib1g-dev": "1:1.2.13-1"}, debs, lines.append)
    assert lines == [
        f"guest: downloading 2 packages into {debs}",
        "guest: downloaded 1/2 packages (0.0 MiB)",
        "guest: downloaded 2/2 packages (3.0 MiB)",
    ]


def test_a_download_that_is_not_the_package_asked_for_stays_out(archive: Path, tmp_path: Path) -> None:
    """The mirror serves another package under the asked-for file name: its own fields say so."""
    index = json.loads((archive / "index.json").read_text())
    index[0]["serve"] = index[1]["serve"]  # zlib1g's file holds zlib1g-dev
    (archive / "index.json").write_text(json.dumps(index))
    debs = tmp_path / "debs"
    with pytest.raises(GuestBuildError, match=re.escape("gave package 'zlib1g-dev' version '1:1.2.13-1'")):
        guest.fetch_debs({"zlib1g": "1:1.2.13-1"}, debs, lambda _line: None)
    assert cached(debs) == []


def test_a_recipe_over_the_byte_cap_is_refused_before_any_download(
    archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("harness.guest.packages.MAX_RECIPE_BYTES", 1000)
    debs = tmp_path / "debs"
    with pytest.raises(RecipeError) as caught:
        guest.fetch_debs({"zlib1g": "1:1.2.13-1", "zlib1g-dev": "1:1.2.13-1"}, debs, lambda _line: None)
    assert caught.value.exit_code == ExitCode.USAGE
    assert "its 2 packages take" in caught.value.message
    assert "over the cap of 0.00 GiB per recipe" in caught.value.message
    assert all("--print-uris" in call for call in apt_calls(archive))
    assert cached(debs) == []


def test_a_recipe_over_the_package_cap_is_refused_when_parsed() -> None:
    toml = (IMAGES_DIR / "recipe.toml").read_text()
    lock = (IMAGES_DIR / "payload.lock").read_text()
    guest.parse_recipe(toml, lock)  # the shipped recipe is under the cap
    extra = "".join(f"pkg{i} 1.0 base\n" for i in range(guest.MAX_RECIPE_PACKAGES))
    with pytest.raises(RecipeError) as caught:
        guest.parse_recipe(toml, lock + extra)
    assert caught.value.exit_code == ExitCode.USAGE
    assert f"over the cap of {guest.MAX_RECIPE_PACKAGES} per recipe: pin fewer packages" in (
        caught.value.message
    )


def test_the_package_cache_is_pruned_oldest_first_keeping_the_recipes(tmp_path: Path) -> None:
    debs = tmp_path / "debs"
    debs.mkdir()
    now = time.time()
    files = {}
    for i, name in enumerate(["a", "b", "c", "d", "e"]):
        path = debs / f"{name}_1_amd64.deb"
        path.write_bytes(b"x" * 1000)
        os.utime(path, (now - 86400 + i * 60, now - 86400 + i * 60))  # a oldest ... e newest
        files[name] = path
    (debs / ".dl-123").mkdir()  # a download in progress is not a package
    removed = guest.prune_package_cache(
        debs, keep=[files["a"]], log=lambda _line: None, max_bytes=2500, idle_s=600
    )
    # a is the recipe's (kept, and now the newest); b, c go first; d, e fit
    assert [p.name for p in removed] == ["b_1_amd64.deb", "c_1_amd64.deb", "d_1_amd64.deb"]
    assert sorted(p.name for p in debs.glob("*.deb")) == ["a_1_amd64.deb", "e_1_amd64.deb"]
    assert (debs / ".dl-123").is_dir()


def test_a_package_used_just_now_is_not_pruned(tmp_path: Path) -> None:
    debs = tmp_path / "debs"
    debs.mkdir()
    (debs / "busy_1_amd64.deb").write_bytes(b"x" * 5000)
    removed = guest.prune_package_cache(debs, keep=[], log=lambda _line: None, max_bytes=100, idle_s=600)
    assert removed == []


def test_fetch_prunes_the_cache(archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    debs = tmp_path / "debs"
    debs.mkdir()
    stale = debs / "linux-image-huge_1_amd64.deb"
    stale.write_bytes(b"x" * 100_000)
    os.utime(stale, (time.time() - 86400, time.time() - 86400))
    monkeypatch.setattr("harness.guest.packages.PACKAGE_CACHE_BYTES", 50_000)
    guest.fetch_debs({"zlib1g": "1:1.2.13-1"}, debs, lambda _line: None)
    assert cached(debs) == ["zlib1g_1%3a1.2.13-1_amd64.deb"]


def test_print_uris_lines_are_read() -> None:
    text = (
        "'http://deb.debian.org/debian/pool/main/z/zlib/zlib1g_1.2.13.dfsg-1_amd64.deb' "
        "zlib1g_1%3a1.2.13.dfsg-1_amd64.deb 86684 SHA256:d7dd\n"
        "W: something else\n"
    )
    assert guest.parse_print_uris(text) == [
        guest.AptFile(
            "http://deb.debian.org/debian/pool/main/z/zlib/zlib1g_1.2.13.dfsg-1_amd64.deb",
            "zlib1g_1%3a1.2.13.dfsg-1_amd64.deb",
            86684,
            "SHA256:d7dd",
        )
    ]
