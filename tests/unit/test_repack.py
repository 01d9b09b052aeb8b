"""Repacking a package uncompressed: two builds at once repack the same package into one cache."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from harness.errors import GuestBuildError
from harness.guest.packages import deb_fields, repack_uncompressed


def _deb(root: Path) -> Path:
    tree = root / "pkg"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        "Package: tiny\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@diskbench.invalid>\n"
        "Description: a test package\n"
    )
    (tree / "usr" / "share" / "tiny").mkdir(parents=True)
    (tree / "usr" / "share" / "tiny" / "data").write_bytes(b"x" * 100_000)
    deb = root / "tiny_1.0_all.deb"
    subprocess.run(["dpkg-deb", "-Zxz", "-b", str(tree), str(deb)], check=True, capture_output=True)
    return deb


def test_two_builds_repacking_one_package_at_once_both_succeed(tmp_path: Path) -> None:
    deb = _deb(tmp_path)
    cache = tmp_path / "debs-uncompressed"
    cache.mkdir()
    out = cache / deb.name
    errors: list[BaseException] = []

    def build(n: int) -> None:
        tmp = tmp_path / f"build{n}"
        tmp.mkdir()
        try:
            for _ in range(5):
                repack_uncompressed(deb, out, tmp)
        except (OSError, GuestBuildError) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert deb_fields(out)["Package"] == "tiny"
    assert [p.name for p in cache.iterdir()] == [deb.name]
