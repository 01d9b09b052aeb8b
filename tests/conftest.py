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

TESTS = Path(__file__).resolve().parent
ARTIFACTS = TESTS / "artifacts"
# the fixtures a test asks for to boot a real guest, itself or through a command it runs
GUEST_FIXTURES = frozenset({"guest"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers (pyproject's markers): ``guest`` on every test that asks for the built guest,
    ``workflows`` and ``integration`` by directory.

    Spread over workers (``-n N --dist loadfile --no-loadscope-reorder``), a file is one unit of work,
    so that what its module's fixtures ran once (a preset's sweep, a history over four commits) is
    not run again on another worker, and the units go out in this order: the workflows, the other
    guest tests, the other integration tests, then the unit tests, so that the longest do not start
    last and the short ones fill the end."""
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts if item.path.is_relative_to(TESTS) else ()
        if parts[:1] == ("workflows",):
            item.add_marker(pytest.mark.workflows)
        if parts[:1] in (("integration",), ("faults",), ("workflows",)):
            item.add_marker(pytest.mark.integration)
        if GUEST_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.guest)
    items.sort(key=_order)


def _order(item: pytest.Item) -> int:
    """Where ``item`` runs among the tiers' tests (a stable sort: each file's order stays)."""
    for rank, marker in enumerate(("workflows", "guest", "integration")):
        if item.get_closest_marker(marker) is not None:
            return rank
    return 3


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
