"""Options and machine info of the host-side qemu-img benchmarks (``benchmarks/test_qemu_img.py``).

Not collected by ``pytest`` without arguments (``testpaths = ["tests"]``): run
``pytest benchmarks/test_qemu_img.py``, or ``scripts/qemu-img-bench.sh``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from harness.errors import CommandError
from harness.host import proc
from harness.host.hostinfo import filesystem_type
from harness.paths import default_work_dir
from harness.subject.binaries import Binaries

# small enough that the whole file runs in about a minute on two cores; a KVM
# runner passes the seeds' sizes (300M for seed 001, 4G for seed 002)
DEFAULT_SIZE = "128M"
DEFAULT_ROUNDS = 5
# this pytest process is the command: it reads the environment here, once, and hands the value down
QEMU_IMG = os.environ.get("DISKBENCH_QEMU_IMG") or Binaries.on_path().qemu_img


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("diskbench qemu-img benchmarks")
    group.addoption(
        "--qemu-img-size",
        default=os.environ.get("DISKBENCH_BENCH_SIZE") or DEFAULT_SIZE,
        help="virtual size of every image (default $DISKBENCH_BENCH_SIZE, else %(default)s); "
        "at least 64M; part of each benchmark's name, so results of two sizes are never compared",
    )
    group.addoption(
        "--qemu-img-rounds",
        type=int,
        default=int(os.environ.get("DISKBENCH_BENCH_ROUNDS") or DEFAULT_ROUNDS),
        help="rounds per benchmark, each on a fresh image (default $DISKBENCH_BENCH_ROUNDS, else %(default)s)",
    )


@pytest.fixture(scope="session")
def qemu_img() -> str:
    """The qemu-img every benchmark runs (``$DISKBENCH_QEMU_IMG``, else the one on PATH)."""
    return QEMU_IMG


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """The qemu-img and the work dir's filesystem are part of the machine.

    pytest-benchmark warns when the machine info of a compared run differs:
    a new qemu-img or a work dir on another filesystem shows up there.
    """
    binary = QEMU_IMG
    try:
        result = proc.run([binary, "--version"], timeout_s=30, check=False)
        version = result.stdout.splitlines()[0] if result.ok and result.stdout else "unknown"
    except CommandError:
        version = "not found"
    machine_info["qemu_img"] = {"binary": binary, "version": version}
    machine_info["work_dir_filesystem"] = filesystem_type(default_work_dir())
