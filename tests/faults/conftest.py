"""Fixtures of the fault suite: a small real disk for the work dir."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 160 MiB ext4 filesystem, loop-mounted for this test and removed after it (needs root)."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        pytest.skip("a loop-mounted work dir needs root and mkfs.ext4")
    with tempfile.TemporaryDirectory(prefix="diskbench-fault-", dir="/var/tmp") as tmp:
        image, mount = Path(tmp) / "fs.img", Path(tmp) / "mnt"
        mount.mkdir()
        with image.open("wb") as fh:
            fh.truncate(160 * 1024**2)
        subprocess.run(["mkfs.ext4", "-q", "-m", "0", str(image)], check=True, timeout=60)
        mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=False, timeout=60)
        if mounted.returncode != 0:
            pytest.skip("cannot loop-mount here")
        try:
            yield mount
        finally:
            subprocess.run(["umount", "-l", str(mount)], check=False, timeout=60)
