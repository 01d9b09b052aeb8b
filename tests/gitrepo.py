"""Git for the tests: one helper that runs git as the tests' committer, new repositories, and
clones of this one for gates, bisections and history to check out.

Tests import it as ``gitrepo``: pytest puts tests/ on ``sys.path`` when it loads
tests/conftest.py (its default "prepend" import mode, tests/ being no package).  The clone
fixtures are in tests/integration/conftest.py.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness.paths import REPO_ROOT

# every commit a test makes is by this committer: a new repository or a clone has none of its own
IDENTITY = ("-c", "user.name=diskbench test", "-c", "user.email=test@diskbench.invalid")
TIMEOUT_S = 300


def git(repo: Path, *args: str, timeout_s: float = TIMEOUT_S) -> str:
    """``git -C repo ARGS`` as the tests' committer: its output, stripped.  Raises
    :class:`subprocess.CalledProcessError` (with git's stderr) when git fails."""
    return subprocess.run(
        ["git", "-C", str(repo), *IDENTITY, *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    ).stdout.strip()


def new_repo(path: Path, *, branch: str = "main") -> Path:
    """An empty repository at ``path`` (made if missing) on ``branch``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    return path


def copy_worktree(dest: Path) -> Path:
    """This working tree's files (tracked, and new ones git does not ignore) copied under ``dest``,
    uncommitted changes included, without ``.git``; gives ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        src = REPO_ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def clone_project(path: Path) -> Path:
    """A clone of this repository (its committed HEAD) at ``path``, whose parent exists."""
    git(path.parent, "clone", "-q", str(REPO_ROOT), str(path))
    return path


def commit_policy(path: Path, edit: Callable[[str], str], message: str, tag: str) -> Path:
    """The checkout ``path`` with its HEAD tagged ``base`` and one more commit, ``message``, tagged
    ``tag``: its policy.toml's text turned into ``edit(text)``, which must change it."""
    git(path, "tag", "base")
    policy = path / "policy.toml"
    text = policy.read_text()
    edited = edit(text)
    assert edited != text, f"{message}: policy.toml unchanged"
    policy.write_text(edited)
    git(path, "commit", "-q", "-am", message)
    git(path, "tag", tag)
    return path
