"""Fixtures of the integration suite: clones of this repository with a head of the test's own,
and cells run on the built guest."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from gitrepo import clone_project, commit_policy

from harness.rounds.session import MachineOptions, SessionOptions, run_cells
from harness.spec import Cell
from harness.subject.binaries import Binaries

# runs cells on the built guest and gives their record files (the fixture guest_cells)
GuestCells = Callable[..., list[Path]]


@pytest.fixture
def guest_cells(guest: Any, tmp_path: Path, disk_dir: Path) -> GuestCells:
    """Runs cells on the built guest (or the ``guest`` given) under TCG, the binaries on PATH, the
    work dir ``disk_dir``, the results under ``tmp_path / "results"``: ``repeat`` samples of each,
    started as ``start`` says; gives the run's record files, sorted."""

    built = guest

    def run(cells: Sequence[Cell], *, start: str = "cold", repeat: int = 1, guest: Any = None) -> list[Path]:
        machine = MachineOptions(
            binaries=Binaries.on_path(),
            work_dir=disk_dir,
            results_dir=tmp_path / "results",
            accel="tcg",
            start=start,
        )
        result = run_cells(list(cells), SessionOptions(machine, repeat=repeat), guest=guest or built)
        return sorted(result.run_dir.glob("*.json"))

    return run


@pytest.fixture(scope="session")
def project_clone(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Makes a clone of this repository in a new temporary directory: ``project_clone("gate")``."""

    def clone(name: str) -> Path:
        return clone_project(tmp_path_factory.mktemp(name) / "repo")

    return clone


@pytest.fixture(scope="module")
def writethrough_repo(project_clone: Callable[[str], Path]) -> Path:
    """A clone with one more commit: the policy's cache mode is writethrough (tags ``base`` and
    ``writethrough``); a module's own."""
    return commit_policy(
        project_clone("gate-writethrough"),
        lambda text: text.replace('cache = "none"', 'cache = "writethrough"', 1),
        "policy: cache=writethrough",
        "writethrough",
    )
