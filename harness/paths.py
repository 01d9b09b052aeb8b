"""Where things live: the repository, the cache, the work dir, the results."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = REPO_ROOT / "images"


def cache_dir() -> Path:
    """Downloaded packages and built guests: ``$DISKBENCH_CACHE`` or ``~/.cache/diskbench``."""
    env = os.environ.get("DISKBENCH_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "diskbench"


def default_work_dir() -> Path:
    """Scratch images: ``$DISKBENCH_WORK_DIR`` or ``REPO/work`` (on the runner's real disk)."""
    env = os.environ.get("DISKBENCH_WORK_DIR")
    return Path(env) if env else REPO_ROOT / "work"


def default_results_dir() -> Path:
    env = os.environ.get("DISKBENCH_RESULTS_DIR")
    return Path(env) if env else REPO_ROOT / "results"
