from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.images import MEMORY_FILESYSTEMS, filesystem_type

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
