"""Host-side qemu-img micro benchmarks (pytest-benchmark): create, convert, check.

    .venv/bin/pytest benchmarks/test_qemu_img.py                      # print the table
    scripts/qemu-img-bench.sh save                                    # save a baseline
    scripts/qemu-img-bench.sh compare                                 # fail on a median 10% slower

What the seeds time on the host, with the real ``qemu-img`` (``$DISKBENCH_QEMU_IMG``
or the one on PATH), through :mod:`harness.sample.images` and :mod:`harness.host.proc`:

- ``qemu-img create`` per format and preallocation (seed 001: metadata
  preallocation costs time at create and a little space), and per qcow2
  cluster_size with preallocation=metadata (seed 002: a 512-byte cluster makes
  creation far slower);
- ``qemu-img convert`` raw -> qcow2 of a raw image with data and holes (seed
  003's advice: install on raw, then convert);
- ``qemu-img check`` of a populated qcow2 image.

Every round works on a fresh image: the setup of ``benchmark.pedantic``
removes the previous one, outside the measured call.  Images live in a
directory under the work dir (``$DISKBENCH_WORK_DIR`` or ``./work``), on the
runner's disk: a memory filesystem is refused, since preallocation there
measures RAM.  ``extra_info`` of each benchmark holds the image's options and
the bytes the host filesystem allocated to it afterwards.

The size (``--qemu-img-size`` or ``$DISKBENCH_BENCH_SIZE``, default 128M) is
part of every benchmark's name; rounds: ``--qemu-img-rounds`` or
``$DISKBENCH_BENCH_ROUNDS`` (default 5).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ImageError, SpecError
from harness.host import proc
from harness.paths import default_work_dir
from harness.sample import images
from harness.spec import Format, ImageSpec, format_size, make_cell, parse_size

PREALLOCATION_CASES = [
    ("raw", "off"),
    ("raw", "falloc"),
    ("raw", "full"),
    ("qcow2", "off"),
    ("qcow2", "metadata"),
    ("qcow2", "falloc"),
    ("qcow2", "full"),
]
CLUSTER_SIZES = ["512", "1K", "64K", "2M"]

# the populated raw image: 1 MiB of data every 4 MiB, holes in between
DATA_CHUNK = 1024**2
DATA_STRIDE = 4 * 1024**2


def _size(config: pytest.Config) -> int:
    text = str(config.getoption("qemu_img_size"))
    try:
        size = parse_size(text, what="--qemu-img-size")
    except SpecError as exc:
        raise pytest.UsageError(exc.message) from None
    if size < 64 * 1024**2:
        raise pytest.UsageError(f"--qemu-img-size {text}: use at least 64M")
    return size


def _label(size: int) -> str:
    return format_size(size).upper()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # the size goes into the name, so --benchmark-compare never pairs two sizes
    if "size" in metafunc.fixturenames:
        size = _size(metafunc.config)
        metafunc.parametrize("size", [size], ids=[_label(size)])


@pytest.fixture(scope="session")
def rounds(pytestconfig: pytest.Config) -> int:
    value = int(pytestconfig.getoption("qemu_img_rounds"))
    if value < 1:
        raise pytest.UsageError(f"--qemu-img-rounds {value}: use 1 or more")
    return value


@pytest.fixture(scope="session")
def bench_dir() -> Iterator[Path]:
    """A private directory under the work dir, removed at the end."""
    work_dir = default_work_dir()
    # refuses tmpfs, with a message that names the directory
    images.check_work_dir(work_dir, set())
    directory = Path(tempfile.mkdtemp(prefix="qemu-img-bench-", dir=work_dir))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _fresh(*paths: Path) -> Callable[[], None]:
    """A pedantic setup: remove the previous round's image, outside the measured call.

    Unlinking a fully allocated image takes time of its own (freeing its
    extents), which is not what the round measures.
    """

    def setup() -> None:
        for path in paths:
            path.unlink(missing_ok=True)

    return setup


def _image_info(spec: ImageSpec, created: images.CreatedImage) -> dict[str, Any]:
    return {
        "format": spec.format.value,
        "preallocation": spec.preallocation,
        "cluster_size": spec.cluster_size,
        "size": spec.size,
        "allocated_bytes": created.allocated_bytes,
        "file_bytes": created.file_bytes,
    }


def _populate_raw(path: Path, size: int) -> int:
    """Write a raw image with data and holes (no qemu-io needed); return the data bytes."""
    chunk = bytes(range(1, 256)) * (DATA_CHUNK // 255) + b"\x5a" * (DATA_CHUNK % 255)
    written = 0
    with open(path, "wb") as fh:
        fh.truncate(size)
        for offset in range(0, size - DATA_CHUNK + 1, DATA_STRIDE):
            fh.seek(offset)
            written += fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    return written


@pytest.fixture(scope="session")
def populated_raw(bench_dir: Path, pytestconfig: pytest.Config) -> tuple[Path, int]:
    path = bench_dir / "populated.raw"
    return path, _populate_raw(path, _size(pytestconfig))


@pytest.fixture(scope="session")
def populated_qcow2(bench_dir: Path, populated_raw: tuple[Path, int], qemu_img: str) -> Path:
    path = bench_dir / "populated.qcow2"
    _convert(populated_raw[0], path, qemu_img)
    return path


def _convert(src: Path, dst: Path, qemu_img: str) -> proc.CommandResult:
    argv = [qemu_img, "convert", "-f", "raw", "-O", "qcow2", str(src), str(dst)]
    return proc.run(argv, timeout_s=3600, error_cls=ImageError)


@pytest.mark.parametrize(("fmt", "preallocation"), PREALLOCATION_CASES)
def test_create_preallocation(
    benchmark: Any, bench_dir: Path, rounds: int, size: int, fmt: str, preallocation: str, qemu_img: str
) -> None:
    spec = make_cell(format=fmt, preallocation=preallocation, size=size).image
    path = bench_dir / f"create.{fmt}"
    benchmark.group = f"qemu-img create: preallocation ({_label(size)})"
    created = benchmark.pedantic(
        images.create, args=(path, spec), kwargs={"qemu_img": qemu_img}, setup=_fresh(path), rounds=rounds
    )
    benchmark.extra_info.update(_image_info(spec, created))
    # falloc and full really reserve the whole disk; off and metadata leave it sparse
    if preallocation in ("falloc", "full"):
        assert created.allocated_bytes >= size
    else:
        assert created.allocated_bytes < size // 8


@pytest.mark.parametrize("cluster_size", CLUSTER_SIZES)
def test_create_cluster_size(
    benchmark: Any, bench_dir: Path, rounds: int, size: int, cluster_size: str, qemu_img: str
) -> None:
    spec = make_cell(format="qcow2", preallocation="metadata", cluster_size=cluster_size, size=size).image
    path = bench_dir / "create-cs.qcow2"
    benchmark.group = f"qemu-img create: qcow2 cluster_size, preallocation=metadata ({_label(size)})"
    created = benchmark.pedantic(
        images.create, args=(path, spec), kwargs={"qemu_img": qemu_img}, setup=_fresh(path), rounds=rounds
    )
    benchmark.extra_info.update(_image_info(spec, created))
    assert created.spec.cluster_size == parse_size(cluster_size)


def test_convert_raw_to_qcow2(
    benchmark: Any, bench_dir: Path, rounds: int, size: int, populated_raw: tuple[Path, int], qemu_img: str
) -> None:
    src, data_bytes = populated_raw
    dst = bench_dir / "converted.qcow2"
    benchmark.group = f"qemu-img convert and check ({_label(size)})"
    benchmark.pedantic(_convert, args=(src, dst, qemu_img), setup=_fresh(dst), rounds=rounds)
    mapped = images.mapped_bytes(dst, Format.QCOW2, qemu_img=qemu_img)
    benchmark.extra_info.update(
        {
            "format": "qcow2",
            "source_format": "raw",
            "preallocation": "off",
            "cluster_size": images.info(dst, qemu_img=qemu_img).get("cluster-size"),
            "size": size,
            "source_data_bytes": data_bytes,
            "source_allocated_bytes": images.allocated_bytes(src),
            "allocated_bytes": images.allocated_bytes(dst),
            "file_bytes": dst.stat().st_size,
            "data_bytes": mapped["data_bytes"],
        }
    )
    # holes stay holes: only the written chunks become data clusters
    assert mapped["data_bytes"] == data_bytes


def test_check_populated_qcow2(
    benchmark: Any,
    rounds: int,
    size: int,
    populated_qcow2: Path,
    populated_raw: tuple[Path, int],
    qemu_img: str,
) -> None:
    benchmark.group = f"qemu-img convert and check ({_label(size)})"
    result = benchmark.pedantic(
        images.check, args=(populated_qcow2, Format.QCOW2), kwargs={"qemu_img": qemu_img}, rounds=rounds
    )
    benchmark.extra_info.update(
        {
            "format": "qcow2",
            "preallocation": "off",
            "cluster_size": images.info(populated_qcow2, qemu_img=qemu_img).get("cluster-size"),
            "size": size,
            "data_bytes": populated_raw[1],
            "allocated_bytes": images.allocated_bytes(populated_qcow2),
            "check_verdict": result.verdict,
            "allocated_clusters": result.report.get("allocated-clusters"),
        }
    )
    assert result.verdict == "clean", result.report
