"""Processes of a test seen through /proc: a process's children, and whether one still runs.

Tests import it as ``procs`` (pytest puts ``tests/`` on the path through ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path


def children(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with their command names."""
    found: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            text = stat.read_text()
            # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'
            comm = text[text.index("(") + 1 : text.rindex(")")]
            ppid = int(text[text.rindex(")") + 2 :].split()[1])
            if ppid == pid:
                found[int(stat.parent.name)] = comm
    return found


def alive(pid: int, comm: str) -> bool:
    """Whether ``pid`` still runs ``comm`` (and is not a reused pid or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = text[text.rindex(")") + 2 :].split()[0]
    return text[text.index("(") + 1 : text.rindex(")")] == comm and state != "Z"
