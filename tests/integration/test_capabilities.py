"""Probing what this QEMU can do, with the real binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sample.capabilities import aio_problem, unsupported_reason
from harness.spec import Aio, Cache, make_cell
from harness.subject.binaries import QEMU_IMG, Binaries

pytestmark = pytest.mark.integration


def test_threads_is_never_probed(disk_dir: Path) -> None:
    assert unsupported_reason(make_cell(aio="threads"), disk_dir, Binaries.on_path()) is None


def test_native_aio_with_cache_none_opens_on_a_disk_filesystem(disk_dir: Path) -> None:
    disk_dir.mkdir(parents=True, exist_ok=True)
    assert aio_problem(Binaries.on_path().qemu, Aio.NATIVE, Cache.NONE, disk_dir) is None


def test_a_binary_that_cannot_open_the_drive_gives_its_reason(disk_dir: Path) -> None:
    disk_dir.mkdir(parents=True, exist_ok=True)
    # qemu-img is not a system emulator: its complaint is the reason, not a crash
    problem = aio_problem("qemu-img", Aio.IO_URING, Cache.NONE, disk_dir)
    assert problem is not None and problem != ""


def test_a_cell_is_probed_with_the_binaries_given(disk_dir: Path) -> None:
    disk_dir.mkdir(parents=True, exist_ok=True)
    cell = make_cell(aio="native", cache="none")
    assert unsupported_reason(cell, disk_dir, Binaries.on_path()) is None
    # the same cell, with a "QEMU" that cannot open the drive: the given binary is the one probed
    reason = unsupported_reason(cell, disk_dir, Binaries(qemu="qemu-img", qemu_img=QEMU_IMG))
    assert reason is not None and reason.startswith("aio=native with cache=none does not work here: ")
