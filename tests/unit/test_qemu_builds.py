"""QEMU builds from Debian's packages: versions offered and resolved, firmware chosen, cached
packages checked against the archive's index, unpacked trees confined, builds found and checked."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.debian import debs
from harness.debian.apt import Offer, backports_stanza, parse_madison
from harness.debian.qemu import (
    Offered,
    QemuCache,
    QemuFetchError,
    confine_tree,
    firmware_pins,
    offered_versions,
    resolve,
)
from harness.debian.version import compare_versions, depends_on, satisfies
from harness.errors import ExitCode
from harness.files import file_digest
from harness.subject.qemu_build import (
    MANIFEST,
    QemuBuild,
    QemuBuildError,
    build_of,
    load_build,
    upstream_version,
)

V10 = "1:10.0.2+ds-2+deb13u1~bpo12+1"
V72 = "1:7.2+dfsg-7+deb12u18+b3"
V72S = "1:7.2+dfsg-7+deb12u15"
SITE = "http://deb.debian.org/debian"

MADISON = f"""\
qemu-system-data | {V10} | {SITE} bookworm-backports/main amd64 Packages
qemu-system-data | 1:7.2+dfsg-7+deb12u18 | {SITE} bookworm/main amd64 Packages
qemu-system-data | {V72S} | {SITE}-security bookworm-security/main amd64 Packages
""" + "".join(
    f"{name} | {version} | {site} {suite}/main amd64 Packages\n"
    for name in ("qemu-system-common", "qemu-block-extra", "qemu-utils", "qemu-system-x86")
    for version, site, suite in (
        (V10, SITE, "bookworm-backports"),
        (V72, SITE, "bookworm"),
        (V72S, f"{SITE}-security", "bookworm-security"),
    )
)
FIRMWARE = [
    Offer("seabios", "1.16.3-2~bpo12+1", SITE, "bookworm-backports"),
    Offer("seabios", "1.16.2-1", SITE, "bookworm"),
    Offer("ipxe-qemu", "1.0.0+git-20190125.36a4c85-5.1", SITE, "bookworm"),
]


def offered() -> list[Offered]:
    return offered_versions(parse_madison(MADISON))


def test_debian_versions_compare_as_dpkg_does() -> None:
    assert compare_versions("1.16.3-2~bpo12+1", "1.16.3-1~") > 0
    assert compare_versions("1.16.2-1", "1.16.3-1~") < 0
    assert compare_versions("1.0~rc1", "1.0") < 0
    assert compare_versions("1:7.2", "10.0") > 0  # the epoch first
    assert compare_versions(V10, V72) > 0
    assert compare_versions(V72, V72S) > 0
    assert compare_versions("1.0a", "1.0+") < 0  # letters before other characters


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg")
def test_the_order_is_dpkgs_own() -> None:
    versions = [V10, V72, V72S, "1.16.3-2~bpo12+1", "1.16.3-1~", "1.0~rc1", "1.0", "1.0a", "1.0+", "2", "0:2"]
    for a in versions:
        for b in versions:
            older = subprocess.run(["dpkg", "--compare-versions", a, "lt", b], check=False).returncode == 0
            assert (compare_versions(a, b) < 0) == older, (a, b)


def test_the_builds_offered_whole_newest_first() -> None:
    got = offered()
    assert [o.debian_version for o in got] == [V10, V72, V72S]
    # a binNMU's arch-all qemu-system-data keeps the source's version (no +b3)
    assert got[1].suites == ("bookworm",)
    assert [o.upstream for o in got] == ["10.0.2", "7.2", "7.2"]


def test_a_build_missing_one_package_is_not_offered() -> None:
    text = "\n".join(line for line in MADISON.splitlines() if not line.startswith(f"qemu-utils | {V10}"))
    assert [o.debian_version for o in offered_versions(parse_madison(text))] == [V72, V72S]


def test_a_short_form_resolves_to_the_one_build_it_names() -> None:
    assert resolve("10.0", offered()).debian_version == V10
    assert resolve("10", offered()).debian_version == V10
    assert resolve("10.0.2", offered()).debian_version == V10
    assert resolve(V72S, offered()).debian_version == V72S
    assert resolve(V10.split(":", 1)[1], offered()).debian_version == V10  # without the epoch


def test_a_short_form_names_the_newest_build_it_matches() -> None:
    """bookworm offers 7.2 twice: the point release's ``+deb12u18+b3`` and bookworm-security's older
    ``+deb12u15``.  ``7.2`` is the newest (Debian's order), whatever order the suites list them in;
    the older is named only whole."""
    for order in (offered(), list(reversed(offered()))):
        assert resolve("7.2", order).debian_version == V72
        assert resolve("7", order).debian_version == V72
        assert resolve(V72S, order).debian_version == V72S
    newer_security = [*offered(), Offered("1:7.2+dfsg-7+deb12u19", ("bookworm-security",))]
    assert resolve("7.2", newer_security).debian_version == "1:7.2+dfsg-7+deb12u19"


@pytest.mark.parametrize("text", ["9.1", "10.0.3", "1:10.0.2", "7.", "/usr/bin/qemu", "10.0\n::error::x"])
def test_an_unknown_version_is_one_line_with_what_is_offered(text: str) -> None:
    with pytest.raises(QemuBuildError) as caught:
        resolve(text, offered())
    message = caught.value.message
    assert caught.value.exit_code == ExitCode.USAGE
    assert "not a version the configured suites offer" in message
    assert f"{V10} (bookworm-backports)" in message
    assert "\n" not in message


def test_firmware_is_the_lowest_version_that_satisfies_the_build() -> None:
    depends_10 = "libc6 (>= 2.34), qemu-system-data (>> 1:10.0.2+ds~), seabios (>> 1.16.3-1~), ipxe-qemu"
    assert firmware_pins(depends_10, FIRMWARE) == {
        "seabios": "1.16.3-2~bpo12+1",
        "ipxe-qemu": "1.0.0+git-20190125.36a4c85-5.1",
    }
    assert firmware_pins("libc6 (>= 2.34), seabios, ipxe-qemu", FIRMWARE)["seabios"] == "1.16.2-1"
    with pytest.raises(QemuFetchError, match=r"no seabios \(>> 1.17\)"):
        firmware_pins("seabios (>> 1.17), ipxe-qemu", FIRMWARE)


def test_depends_constraints_are_read() -> None:
    assert depends_on("a (>= 1), seabios (>> 1.16.3-1~) | b", "seabios") == [(">>", "1.16.3-1~")]
    assert depends_on("seabios:any, ipxe-qemu", "seabios") == []
    assert depends_on("seabios-extra", "seabios") is None
    assert satisfies("1.16.3-2~bpo12+1", [(">>", "1.16.3-1~")])
    assert not satisfies("1.16.2-1", [(">>", "1.16.3-1~")])


def test_backports_are_added_only_where_the_system_lacks_them() -> None:
    keyring = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
    targets = [(SITE, "bookworm"), (SITE, "bookworm-updates"), (f"{SITE}-security", "bookworm-security")]
    stanza = backports_stanza(targets, "bookworm", keyring)
    assert stanza is not None
    assert f"URIs: {SITE}\nSuites: bookworm-backports\n" in stanza
    assert f"Signed-By: {keyring}\n" in stanza
    assert backports_stanza([*targets, (SITE, "bookworm-backports")], "bookworm", keyring) is None
    assert backports_stanza(targets, "", keyring) is None


def test_madison_lines_are_read() -> None:
    assert parse_madison(f"   seabios |   1.16.2-1 | {SITE} bookworm/main amd64 Packages\nW: x\n") == [
        Offer("seabios", "1.16.2-1", SITE, "bookworm")
    ]


def test_upstream_version_of_a_debian_version() -> None:
    assert upstream_version(V10) == "10.0.2"
    assert upstream_version(V72) == "7.2"
    assert upstream_version("8.0~rc1+dfsg-1") == "8.0"


def _origin() -> debs.Origin:
    return QemuCache(Path("/nonexistent")).origin("10.0")


def test_a_cached_package_that_is_not_the_archives_is_refused(tmp_path: Path) -> None:
    deb = tmp_path / "seabios_1.16.3-2~bpo12+1_all.deb"
    deb.write_bytes(b"the archive's bytes")
    digest = hashlib.sha256(b"the archive's bytes").hexdigest()
    expected = debs.AptFile("http://x/seabios.deb", deb.name, deb.stat().st_size, f"SHA256:{digest}")
    debs.check_cached(deb, expected, _origin())  # the same bytes pass
    deb.write_bytes(b"the archive's bytez")  # same size, other bytes
    with pytest.raises(QemuBuildError) as caught:
        debs.check_cached(deb, expected, _origin())
    assert caught.value.exit_code == ExitCode.USAGE
    assert caught.value.message.startswith(f"{deb}: a tampered package in the cache")
    assert "remove it and fetch again" in caught.value.message
    with pytest.raises(QemuBuildError):
        debs.check_cached(deb, debs.AptFile("u", deb.name, 19, ""), _origin())  # no hash: no trust


def _tree(root: Path) -> Path:
    for rel in (
        "usr/share/qemu/pvh.bin",
        "usr/share/qemu/linuxboot_dma.bin",
        "usr/share/seabios/bios-256k.bin",
        "usr/bin/qemu-system-x86_64",
        "usr/bin/qemu-img",
        "usr/bin/qemu-io",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(rel.encode())
    return root


def test_an_unpacked_tree_is_confined(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    tool = root / "usr" / "bin" / "qemu-img"
    tool.chmod(0o4777)
    (root / "usr" / "bin" / "kvm").symlink_to("qemu-system-x86_64")
    confine_tree(root)
    assert tool.stat().st_mode & 0o7777 == 0o755
    assert (root / "usr" / "share" / "qemu" / "pvh.bin").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("usr/share/qemu/bios.bin", "/usr/share/seabios/bios.bin"),
        ("usr/share/qemu/x", "../../../../etc/shadow"),
    ],
)
def test_a_link_out_of_the_tree_is_refused(tmp_path: Path, link: str, target: str) -> None:
    root = _tree(tmp_path / "t")
    (root / link).symlink_to(target)
    with pytest.raises(QemuFetchError, match="a link out of the build"):
        confine_tree(root)


def test_a_link_that_leaves_the_tree_through_another_link_is_refused(tmp_path: Path) -> None:
    """``d1/d2/up -> ../..`` stays inside (it is the tree's root); ``esc -> d1/d2/up/../..`` reads
    as inside but resolves above the tree."""
    root = _tree(tmp_path / "t")
    (root / "d1" / "d2").mkdir(parents=True)
    (root / "d1" / "d2" / "up").symlink_to("../..")
    confine_tree(root)  # the first alone stays inside
    (root / "esc").symlink_to("d1/d2/up/../..")
    assert not (root / "esc").resolve().is_relative_to(root), "the link leads out of the tree"
    with pytest.raises(QemuFetchError, match=re.escape("a link out of the build: esc -> d1/d2/up/../..")):
        confine_tree(root)


def test_a_tree_without_the_bios_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    (root / "usr/share/seabios/bios-256k.bin").unlink()
    with pytest.raises(QemuFetchError, match=re.escape("no usr/share/seabios/bios-256k.bin")):
        confine_tree(root)


def _build(prefix: Path, version: str = V10) -> QemuBuild:
    _tree(prefix)
    build = QemuBuild(
        prefix=prefix,
        debian_version=version,
        version=upstream_version(version),
        packages=(("qemu-system-x86", version),),
        digests=tuple(
            (b, file_digest(prefix / "usr" / "bin" / b)) for b in ("qemu-img", "qemu-system-x86_64")
        ),
    )
    (prefix / MANIFEST).write_text(json.dumps(build.as_dict()))
    return build


def test_a_builds_binary_finds_its_build_and_its_own_directories(tmp_path: Path) -> None:
    build = _build(tmp_path / "b")
    found = build_of(str(tmp_path / "b" / "usr" / "bin" / "qemu-system-x86_64"))
    assert found == build
    assert found.qemu_args() == [
        "-L",
        str(tmp_path / "b/usr/share/qemu"),
        "-L",
        str(tmp_path / "b/usr/share/seabios"),
    ]
    assert found.environ() == {"QEMU_MODULE_DIR": str(tmp_path / "b/usr/lib/x86_64-linux-gnu/qemu")}
    assert build_of("qemu-system-x86_64") is None
    assert build_of("/usr/bin/qemu-system-x86_64") is None


def test_a_tampered_binary_is_refused(tmp_path: Path) -> None:
    build = _build(tmp_path / "b")
    build.check()
    (tmp_path / "b/usr/bin/qemu-img").write_bytes(b"something else")
    with pytest.raises(QemuBuildError) as caught:
        load_build(tmp_path / "b").check()
    assert caught.value.exit_code == ExitCode.USAGE
    assert "the build is tampered" in caught.value.message


def test_a_directory_without_a_manifest_is_no_build(tmp_path: Path) -> None:
    with pytest.raises(QemuBuildError, match="no QEMU build of diskbench"):
        load_build(tmp_path)


def test_builds_beyond_the_newest_unused_ones_are_pruned(tmp_path: Path) -> None:
    cache = QemuCache(tmp_path)
    old = time.time() - 3 * 86400
    for i, version in enumerate(["1:1.0-1", "1:2.0-1", "1:3.0-1"]):
        prefix = cache.builds / version.replace(":", "%3a")
        _build(prefix, version)
        os.utime(prefix, (old + i, old + i))
    removed = cache.prune(keep=2)
    assert [p.name for p in removed] == ["1%3a1.0-1"]
    assert [b.debian_version for b in cache.fetched()] == ["1:3.0-1", "1:2.0-1"]


# -- a fetched build runs as itself -----------------------------------------------------------


def test_a_builds_prefix_given_as_qemu_runs_the_build_whole(tmp_path: Path, qemu_reachable_dir: Path) -> None:
    from harness.cli.common import resolve_binaries

    prefix = qemu_reachable_dir / "b"
    _build(prefix)
    for given in (str(prefix), str(prefix / "usr/bin/qemu-system-x86_64")):
        binaries = resolve_binaries(qemu=given, qemu_img=None, environ={"DISKBENCH_QEMU_IMG": "/x/qemu-img"})
        assert binaries.qemu == str(prefix / "usr/bin/qemu-system-x86_64")
        assert binaries.qemu_img == str(prefix / "usr/bin/qemu-img")  # the build's, not the environment's
        assert binaries.qemu_io == str(prefix / "usr/bin/qemu-io")
    other = tmp_path / "qemu-img"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    assert resolve_binaries(qemu=str(prefix), qemu_img=str(other), environ={}).qemu_img == str(other)


def _main_exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from harness.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_a_directory_that_is_no_build_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _main_exit(["--qemu", str(tmp_path), "show", str(tmp_path)], capsys)
    assert code == ExitCode.USAGE
    assert f"{tmp_path}: no QEMU build of diskbench" in err
    assert len(err.strip().splitlines()) == 1


def test_a_build_out_of_qemus_reach_is_refused(tmp_path: Path) -> None:
    from harness.cli.common import resolve_binaries
    from harness.errors import InfraError

    _build(tmp_path / "b")
    if os.geteuid() != 0:
        pytest.skip("QEMU runs as this user: everything of ours is in its reach")
    with pytest.raises(InfraError, match="cannot be searched by diskbench, which runs QEMU"):
        resolve_binaries(qemu=str(tmp_path / "b"), qemu_img=None, environ={})


def test_a_tampered_build_given_as_qemu_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _build(tmp_path / "b")
    (tmp_path / "b/usr/bin/qemu-system-x86_64").write_bytes(b"patched")
    code, err = _main_exit(["run", "--qemu", str(tmp_path / "b"), "--workload", "dd"], capsys)
    assert code == ExitCode.USAGE
    assert "the build is tampered" in err
    assert len(err.strip().splitlines()) == 1


def test_a_builds_guest_gets_its_own_firmware_before_anything_else(tmp_path: Path) -> None:
    from harness.sample.vm.config import VMConfig

    _build(tmp_path / "b")
    qemu = str(tmp_path / "b/usr/bin/qemu-system-x86_64")
    config = VMConfig(kernel=Path("k"), initrd=Path("i"), append=(), drives=(), qemu=qemu)
    argv = config.argv(qmp_path=Path("q"), console=Path("c"), report=Path("r"))
    assert argv[:5] == [
        qemu,
        "-L",
        str(tmp_path / "b/usr/share/qemu"),
        "-L",
        str(tmp_path / "b/usr/share/seabios"),
    ]
    system = VMConfig(kernel=Path("k"), initrd=Path("i"), append=(), drives=(), qemu="qemu-system-x86_64")
    assert "-L" not in system.argv(qmp_path=Path("q"), console=Path("c"), report=Path("r"))


def test_the_debian_version_is_read_from_the_version_line() -> None:
    from harness.host.hostinfo import debian_version

    assert debian_version(f"QEMU emulator version 10.0.2 (Debian {V10})") == V10
    assert debian_version("QEMU emulator version 9.2.0") == ""


def test_two_builds_of_one_version_are_two_machines() -> None:
    from harness.record import new_record
    from harness.record.identity import identity_warnings, merge_identity, series_identity

    def record(sha: str) -> Any:
        machine = {"qemu_version": "7.2.22", "qemu_debian_version": V72, "qemu_sha256": sha}
        return new_record(cell={"id": "c"}, machine=machine, subject={}, vm={}, run_id="r")

    a, b = record("aa"), record("bb")
    assert merge_identity(a) != merge_identity(b)
    assert series_identity(a) != series_identity(b)
    (warning,) = identity_warnings([a], [b])
    assert "qemu_sha256: aa vs bb" in warning


FAKE_APT = """#!/bin/sh
# apt-get and apt-cache of a private configuration whose mirror cannot be reached
for arg in "$@"; do
  case "$arg" in
    update) echo "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease" >&2; exit 100;;
    indextargets) exit 0;;
    madison) cat "$FAKE_MADISON"; exit 0;;
  esac
done
exit 1
"""


@pytest.fixture
def unreachable_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("apt-get", "apt-cache"):
        (bin_dir / tool).write_text(FAKE_APT)
        (bin_dir / tool).chmod(0o755)
    (tmp_path / "madison.txt").write_text(MADISON)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MADISON", str(tmp_path / "madison.txt"))


@pytest.mark.usefixtures("unreachable_mirror")
def test_an_unreachable_mirror_falls_back_to_the_indexes_fetched_before(tmp_path: Path) -> None:
    from harness.errors import InfraError

    cache = QemuCache(tmp_path / "qemu")
    with pytest.raises(InfraError, match="apt-get update of the private sources"):
        cache.offered()  # never fetched: nothing to fall back to
    (tmp_path / "qemu" / "apt" / "updated").touch()
    os.utime(tmp_path / "qemu" / "apt" / "updated", (0, 0))  # stale: apt-get update is tried
    assert [o.debian_version for o in cache.offered()] == [V10, V72, V72S]
    assert resolve("10.0", cache.offered()).debian_version == V10
