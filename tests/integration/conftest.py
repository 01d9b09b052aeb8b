"""Fixtures of the integration suite: clones of this repository with a head of the test's own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from gitrepo import clone_project, git


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
    path = project_clone("gate-writethrough")
    git(path, "tag", "base")
    policy = path / "policy.toml"
    text = policy.read_text()
    assert 'cache = "none"' in text
    policy.write_text(text.replace('cache = "none"', 'cache = "writethrough"', 1))
    git(path, "commit", "-q", "-am", "policy: cache=writethrough")
    git(path, "tag", "writethrough")
    return path
