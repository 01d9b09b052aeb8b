from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.host.hostinfo import filesystem_type
from harness.sample.images import MEMORY_FILESYSTEMS

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.fixture(scope="session")
def guest() -> Any:
    """The guest built from the pinned recipe (cached by its hash: instant after setup)."""
    from harness.guest import build_guest

    return build_guest(log=lambda _msg: None)


@pytest.fixture
def disk_dir(tmp_path: Path) -> Iterator[Path]:
    """A work dir on a disk filesystem (never tmpfs): the test's temp dir or /var/tmp."""
    if filesystem_type(tmp_path) not in MEMORY_FILESYSTEMS:
        yield tmp_path / "work"
        return
    with tempfile.TemporaryDirectory(prefix="diskbench-test-", dir="/var/tmp") as tmp:
        yield Path(tmp)


@pytest.fixture
def qemu_reachable_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for a QEMU binary of a test's own, that QEMU's account can run.

    Run as root the harness starts QEMU as the unprivileged ``diskbench``
    (harness.host.confine), which cannot enter pytest's temp dirs (mode 0700).
    """
    if os.geteuid() != 0:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="diskbench-test-qemu-", dir="/var/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
