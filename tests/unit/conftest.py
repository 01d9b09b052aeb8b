"""Fixtures of the unit tests that run programs as the accounts a side's code runs as."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every account can read and run from (pytest's own is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="diskbench-shared-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
