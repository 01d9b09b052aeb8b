"""Where things live: the package's own data, the repository, the cache, the work dir, the results.

What the package reads at run time (the record schema, the presets, the gate spec) ships inside
it, in ``harness/data``, and is found through :func:`package_data`, so an installed ``diskbench``
needs no checkout.  The guest recipe (``images/``) and the storage policy are the checkout's:
relative to ``REPO_ROOT``, the directory above the package; the default work and results dirs are
the current directory's.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

from harness.errors import InfraError

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = REPO_ROOT / "images"


def package_data(*parts: str) -> Path:
    """A file or directory of ``harness/data``, e.g. ``package_data("presets")``."""
    root = importlib.resources.files("harness.data")
    if not isinstance(root, Path):
        # a zip import: the presets dir and the schema are read as files, so they must be files
        raise InfraError(
            f"the package data of harness is not on a file system ({root}): install diskbench unpacked"
        )
    return root.joinpath(*parts)


def cache_dir() -> Path:
    """Downloaded packages and built guests: ``$DISKBENCH_CACHE`` or ``~/.cache/diskbench``."""
    env = os.environ.get("DISKBENCH_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "diskbench"


#: Where root keeps fetched QEMU builds: QEMU's account runs them (harness.host.confine), and
#: root's own cache (``/root/.cache``) is closed to that account.
SYSTEM_QEMU_CACHE = Path("/var/cache/diskbench/qemu")


def qemu_cache_dir() -> Path:
    """Fetched QEMU builds (``diskbench qemu get``), their packages and their private apt state:
    :data:`SYSTEM_QEMU_CACHE` as root, else ``qemu/`` in :func:`cache_dir`."""
    return SYSTEM_QEMU_CACHE if os.geteuid() == 0 else cache_dir() / "qemu"


def default_work_dir() -> Path:
    """Scratch images: ``$DISKBENCH_WORK_DIR`` or ``./work``, in the current directory (on the
    runner's real disk).  Every default path is the current directory's, as git's and
    pytest-benchmark's are: a command run from elsewhere reads and writes there, never a
    checkout's."""
    env = os.environ.get("DISKBENCH_WORK_DIR")
    return Path(env) if env else Path.cwd() / "work"


def default_results_dir() -> Path:
    """Records and logs: ``$DISKBENCH_RESULTS_DIR`` or ``./results``, in the current directory."""
    env = os.environ.get("DISKBENCH_RESULTS_DIR")
    return Path(env) if env else Path.cwd() / "results"


def shown_path(path: Path) -> str:
    """A default path as help shows it: ``./work`` for one under the current directory, else as it is."""
    try:
        relative = path.relative_to(Path.cwd())
    except ValueError:
        return str(path)
    return f"./{relative}"
