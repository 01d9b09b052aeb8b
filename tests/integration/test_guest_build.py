"""The guest build really works: real packages, a real initramfs, a real TCG boot.

The build is cached under the diskbench cache, so only the first run pays for
downloads (~100 packages) and repacking.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import guest
from harness.errors import GuestBuildError
from harness.paths import IMAGES_DIR, cache_dir

pytestmark = pytest.mark.integration

needs_host_tools = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("apt-get", "dpkg-deb", "mke2fs")),
    reason="the guest build needs apt-get, dpkg-deb and mke2fs",
)


@pytest.fixture(scope="module")
def artifacts() -> guest.GuestArtifacts:
    if not all(shutil.which(t) for t in ("apt-get", "dpkg-deb", "mke2fs")):
        pytest.skip("the guest build needs apt-get, dpkg-deb and mke2fs")
    return guest.build_guest(log=lambda _line: None)


def test_artifacts_exist_and_are_what_they_claim(artifacts: guest.GuestArtifacts) -> None:
    assert artifacts.kernel.read_bytes()[:4] == b"\x7fELF"
    assert artifacts.kernel_version.endswith("-amd64")
    assert artifacts.recipe_hash == guest.recipe_hash(IMAGES_DIR)
    assert artifacts.build_dir == cache_dir() / "guest" / artifacts.recipe_hash
    assert set(artifacts.payloads) >= {"small", "full"}
    for img in artifacts.payloads.values():
        assert img.stat().st_size > 1 << 20
    recipe = guest.load_recipe(IMAGES_DIR)
    assert artifacts.packages[recipe.kernel_package] == recipe.kernel_version
    assert artifacts.payload_packages["full"] == len(recipe.payload)


def test_initramfs_holds_init_tools_libraries_and_modules(
    artifacts: guest.GuestArtifacts,
) -> None:
    entries = {e.name: e for e in guest.read_cpio(artifacts.initrd.read_bytes())}
    for name in (
        "init", "bin/busybox", "bin/sh", "sbin/mke2fs", "sbin/e2fsck", "sbin/sfdisk",
        "usr/bin/dpkg-deb", "bin/tar", "usr/sbin/bonnie++", "lib64/ld-linux-x86-64.so.2",
        "lib/x86_64-linux-gnu/libc.so.6", "dev/console", "etc/diskbench/modules",
        "usr/share/diskbench/install.sh", "usr/share/diskbench/dd.sh",
    ):  # fmt: skip
        assert name in entries, name
    order = entries["etc/diskbench/modules"].data.decode().split()
    assert [Path(p).stem for p in order] == list(artifacts.modules)
    for path in order:
        assert entries[path.lstrip("/")].data[:4] == b"\x7fELF"
    for wanted in ("virtio_pci", "virtio_blk", "virtio_scsi", "virtio_console", "sd_mod",
                   "ata_piix", "ahci", "nvme", "ext4"):  # fmt: skip
        assert wanted in artifacts.modules
    assert artifacts.modules.index("jbd2") < artifacts.modules.index("ext4")
    assert len(artifacts.modules) < 40


def test_tools_drive_holds_fio_its_libraries_and_a_launcher(artifacts: guest.GuestArtifacts) -> None:
    assert artifacts.tools is not None

    def debugfs(request: str) -> str:
        out = subprocess.run(
            ["debugfs", "-R", request, str(artifacts.tools)], capture_output=True, text=True, timeout=60
        )
        return out.stdout

    # librados needs libceph-common through its RUNPATH (.../ceph), not a standard directory
    assert "libceph-common.so.2" in debugfs("ls -l /usr/lib/x86_64-linux-gnu/ceph")
    for lib in ("libaio.so.1", "librados.so.2", "librbd.so.1", "libnbd.so.0"):
        assert lib in debugfs("ls -l /usr/lib/x86_64-linux-gnu"), lib
    # absolute symlinks became relative: none leads out of the drive
    stat = debugfs("stat /lib64/ld-linux-x86-64.so.2")
    assert 'link dest: "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"' in stat
    launcher = debugfs("cat /bin/fio")
    assert launcher.startswith("#!/bin/sh\nexec /tools/lib64/ld-linux-x86-64.so.2 --library-path ")
    assert "/tools/usr/lib/x86_64-linux-gnu/ceph" in launcher and launcher.rstrip().endswith(
        '/tools/usr/bin/fio "$@"'
    )
    # the initramfs stays lean: fio and Ceph are not in it, the job file is
    names = {e.name for e in guest.read_cpio(artifacts.initrd.read_bytes())}
    assert "usr/bin/fio" not in names and not any("librados" in n for n in names)
    assert "usr/share/diskbench/fio.fio" in names and "usr/share/diskbench/fio.sh" in names


def test_second_build_is_instant_and_loads_the_manifest(
    artifacts: guest.GuestArtifacts,
) -> None:
    start = time.monotonic()
    again = guest.build_guest(log=lambda _line: None)
    assert time.monotonic() - start < 2.0
    assert again == artifacts
    assert guest.GuestArtifacts.load(artifacts.build_dir) == artifacts


@needs_host_tools
def test_unfetchable_pin_names_the_package_and_the_fix(tmp_path: Path) -> None:
    images = tmp_path / "images"
    shutil.copytree(IMAGES_DIR, images)
    toml = images / "recipe.toml"
    toml.write_text(toml.read_text().replace('libmd0 = "', 'libmd0 = "0.0.0-nonexistent+'))
    cache = tmp_path / "cache"
    cache.mkdir()
    # Reuse the real download cache so only the bad pin is asked of the mirror.
    real_debs = cache_dir() / "debs"
    real_debs.mkdir(parents=True, exist_ok=True)
    (cache / "debs").symlink_to(real_debs)
    with pytest.raises(GuestBuildError) as info:
        guest.build_guest(recipe_dir=images, cache=cache, log=lambda _line: None)
    assert "libmd0=0.0.0-nonexistent+" in str(info.value)
    assert "diskbench guest pin" in str(info.value)


@pytest.fixture
def qemu_work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 is not installed")
    work = Path(tmp_path_factory.mktemp("guest-boot", numbered=True))
    yield work


def boot(
    artifacts: guest.GuestArtifacts, work: Path, append: str, timeout_s: float
) -> list[dict[str, object]]:
    """Boot the guest the way the host harness does (TCG) and return its JSON lines."""
    disk = work / "t.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "1G"], check=True)
    argv = [
        "qemu-system-x86_64", "-nodefaults", "-nic", "none", "-display", "none",
        "-sandbox", "on", "-no-reboot", "-machine", "pc", "-accel", "tcg", "-m", "256",
        "-smp", "1", "-kernel", str(artifacts.kernel), "-initrd", str(artifacts.initrd),
        "-append", f"console=ttyS0 panic=-1 loglevel=4 {append}",
        "-serial", f"file:{work / 'console.log'}",
        "-device", "virtio-serial-pci,id=vser0",
        "-chardev", f"file,id=report,path={work / 'report.jsonl'}",
        "-device", "virtserialport,bus=vser0.0,chardev=report,name=org.diskbench.report",
        "-drive", f"if=none,id=payload,file={artifacts.payloads['small']},format=raw,readonly=on",
        "-device", "virtio-blk-pci,drive=payload,serial=diskbench-payload",
        "-drive", f"if=none,id=disk0,file={disk},format=qcow2,cache=writeback,aio=threads",
        "-device", "virtio-blk-pci,drive=disk0,serial=diskbench-disk",
    ]  # fmt: skip
    subprocess.run(argv, check=True, timeout=timeout_s)
    lines = (work / "report.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.mark.guest  # boots the built guest itself (no `guest` fixture)
def test_probe_boots_to_ready(artifacts: guest.GuestArtifacts, qemu_work: Path) -> None:
    events = boot(artifacts, qemu_work, "diskbench.workload=probe", timeout_s=120)
    # without a control port the guest takes its workload from the command line and says it starts
    assert [e["event"] for e in events] == ["ready", "start"]
    assert events[0]["kernel"] == artifacts.kernel_version
    assert events[0]["clock"] in ("timer_list", "uptime")
    console = (qemu_work / "console.log").read_text()
    assert "DISKBENCH-READY" in console


@pytest.mark.guest  # boots the built guest itself (no `guest` fixture)
def test_dd_reports_phases_and_rate(artifacts: guest.GuestArtifacts, qemu_work: Path) -> None:
    events = boot(artifacts, qemu_work, "diskbench.workload=dd diskbench.dd_mib=32", timeout_s=180)
    assert [e["event"] for e in events] == ["ready", "start", "report"]
    report = events[2]
    assert report["status"] == "ok", report
    phases = report["phases"]
    assert isinstance(phases, dict)
    assert list(phases) == ["mkfs", "mount", "write", "umount", "fsck"]
    assert all(p["rc"] == 0 for p in phases.values())
    metrics = report["metrics"]
    assert isinstance(metrics, dict)
    assert metrics["bytes"] == 32 << 20
    assert float(metrics["mib_per_s"]) > 0
    assert report["fsck_rc"] == 0
    assert report["error"] is None
    total = sum(p["s"] for k, p in phases.items() if k != "fsck")
    assert abs(float(str(report["total_s"])) - total) < 0.01


def zlib1g_version() -> str:
    """The version of zlib1g the host's apt sources offer; skips the test where they have none."""
    policy = subprocess.run(["apt-cache", "policy", "zlib1g"], capture_output=True, text=True, check=True)
    version = guest.parse_apt_policy(policy.stdout).get("zlib1g")
    if not version:
        pytest.skip("the apt sources have no zlib1g")
    return version


@needs_host_tools
def test_the_real_apt_never_reads_a_package_name_as_a_pattern(tmp_path: Path) -> None:
    """``apt-get download 'zlib1.+=V'`` fetches zlib1g and zlib1g-dev; the build fetches nothing."""
    version = zlib1g_version()
    debs = tmp_path / "debs"
    with pytest.raises(guest.RecipeError, match=r"zlib1\.\+=\S+ is not exactly one package"):
        guest.fetch_debs({"zlib1.+": version}, debs, lambda _line: None)
    assert list(debs.rglob("*.deb")) == []


@needs_host_tools
def test_the_real_apt_locates_an_exact_pin_without_fetching(tmp_path: Path) -> None:
    version = zlib1g_version()
    located = guest.locate_debs({"zlib1g": version}, tmp_path)
    assert located["zlib1g"].filename == guest.deb_filename("zlib1g", version, "amd64")
    assert located["zlib1g"].size > 10_000
    assert list(tmp_path.iterdir()) == []
