"""Real qemu-img: each format and preallocation allocates what it should."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.sample import images
from harness.spec import Cache, Format, make_cell
from harness.subject.binaries import QEMU_IMG

pytestmark = pytest.mark.integration
MIB = 1024**2
SIZE = 64 * MIB


def create(tmp_path: Path, fmt: str, prealloc: str, **kw: object) -> images.CreatedImage:
    spec = make_cell(format=fmt, preallocation=prealloc, size=SIZE, **kw).image  # type: ignore[arg-type]
    return images.create(tmp_path / f"{fmt}-{prealloc}.img", spec, qemu_img=QEMU_IMG)


@pytest.mark.parametrize(
    ("fmt", "prealloc", "low", "high"),
    [
        ("raw", "off", 0, 64 * 1024),
        ("raw", "falloc", SIZE, SIZE + MIB),
        ("raw", "full", SIZE, SIZE + MIB),
        ("qcow2", "off", 0, 1 * MIB),
        ("qcow2", "metadata", 0, 2 * MIB),
        ("qcow2", "falloc", SIZE, SIZE + 2 * MIB),
        ("qcow2", "full", SIZE, SIZE + 2 * MIB),
    ],
)
def test_allocation_after_create(tmp_path: Path, fmt: str, prealloc: str, low: int, high: int) -> None:
    img = create(tmp_path, fmt, prealloc)
    assert low <= img.allocated_bytes <= high
    assert img.create_s > 0
    info = images.info(img.path, qemu_img=QEMU_IMG)
    assert info["format"] == fmt
    assert info["virtual-size"] == SIZE


def test_metadata_preallocation_allocates_more_than_sparse_qcow2(tmp_path: Path) -> None:
    sparse = create(tmp_path, "qcow2", "off")
    meta = create(tmp_path, "qcow2", "metadata")
    assert meta.allocated_bytes > sparse.allocated_bytes
    mapped = images.mapped_bytes(meta.path, Format.QCOW2, qemu_img=QEMU_IMG)
    assert mapped["data_bytes"] + mapped["zero_bytes"] >= 0


def test_cluster_size_and_lazy_refcounts_reach_the_image(tmp_path: Path) -> None:
    img = create(tmp_path, "qcow2", "off", cluster_size="2M", lazy_refcounts=True)
    specific = images.info(img.path, qemu_img=QEMU_IMG)["format-specific"]["data"]
    assert images.info(img.path, qemu_img=QEMU_IMG)["cluster-size"] == 2 * MIB
    assert specific["lazy-refcounts"] is True


def test_check_verdicts(tmp_path: Path) -> None:
    qcow2 = create(tmp_path, "qcow2", "off")
    assert images.check(qcow2.path, Format.QCOW2, qemu_img=QEMU_IMG).verdict == "clean"
    raw = create(tmp_path, "raw", "off")
    result = images.check(raw.path, Format.RAW, qemu_img=QEMU_IMG)
    assert result.returncode == 63 and result.verdict == "not-applicable"
    assert not result.fails_sample


def test_check_finds_corruption(tmp_path: Path) -> None:
    img = create(tmp_path, "qcow2", "off")
    # point the L1 table far beyond the end of the file: qemu-img check calls that corrupt
    subprocess.run(["qemu-io", "-c", "write 0 64k", str(img.path)], check=True, capture_output=True)
    with open(img.path, "r+b") as fh:
        fh.seek(40)  # l1_table_offset in the qcow2 header
        l1 = int.from_bytes(fh.read(8), "big")
        fh.seek(l1)
        fh.write((1 << 40).to_bytes(8, "big"))
    result = images.check(img.path, Format.QCOW2, qemu_img=QEMU_IMG)
    assert result.returncode == 2 and result.fails_sample


def test_memory_filesystem_without_o_direct_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    mnt = tmp_path / "ramfs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "ramfs", "ramfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("mounting ramfs needs root")
    try:
        with pytest.raises(UsageError) as info:
            images.check_work_dir(mnt / "work", {Cache.NONE})
        assert "does not support O_DIRECT that cache=none needs" in str(info.value)
        with pytest.raises(UsageError, match="ramfs \\(memory, not a disk\\)"):
            images.check_work_dir(mnt / "work", {Cache.WRITEBACK})
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_disk_work_dir_is_accepted(tmp_path: Path) -> None:
    if images.filesystem_type(tmp_path) in images.MEMORY_FILESYSTEMS:
        pytest.skip("the test's temp dir is on a memory filesystem")
    fstype = images.check_work_dir(tmp_path / "work", {Cache.NONE})
    assert fstype not in images.MEMORY_FILESYSTEMS
    assert (tmp_path / "work").is_dir()


def test_written_raw_has_every_byte_allocated_and_no_holes(tmp_path: Path) -> None:
    img = create(tmp_path, "raw", "written")
    assert img.allocated_bytes >= SIZE
    mapped = images.mapped_bytes(img.path, Format.RAW, qemu_img=QEMU_IMG)
    assert mapped["data_bytes"] == SIZE
    # falloc leaves unwritten extents that read as zero; written has real data extents
    falloc = create(tmp_path, "raw", "falloc")
    assert images.allocated_bytes(falloc.path) >= SIZE


def test_huge_sparse_images_cost_nothing_to_create(tmp_path: Path) -> None:
    spec = make_cell(format="qcow2", size="100G").image
    img = images.create(tmp_path / "big.qcow2", spec, qemu_img=QEMU_IMG)
    assert img.allocated_bytes < 2 * MIB
    raw = images.create(tmp_path / "big.raw", make_cell(format="raw", size="100G").image, qemu_img=QEMU_IMG)
    assert raw.allocated_bytes < 64 * 1024 and raw.file_bytes == 100 * 1024**3


def test_page_cache_drop_empties_the_files_cache(tmp_path: Path) -> None:
    img = create(tmp_path, "raw", "written")
    resident = images.resident_bytes(img.path)
    if resident is None:
        pytest.skip("fincore is not installed")
    assert resident > SIZE // 2
    assert images.drop_page_cache(img.path).startswith("posix_fadvise")
    after = images.resident_bytes(img.path)
    assert after is not None and after < MIB
