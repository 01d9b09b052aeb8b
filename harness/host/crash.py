"""An unexpected error: one line for the user, the traceback in a log file.

A traceback on a CI console reads like a verdict; exit 1 would read as a
regression.  What the harness did not foresee is an infrastructure failure
(exit 3) whose evidence is kept where the line says.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import traceback
from pathlib import Path

from harness.errors import ExitCode
from harness.paths import cache_dir


def crash_log_dir() -> Path:
    return cache_dir() / "crash"


def report_crash(exc: BaseException, argv: list[str]) -> int:
    """Write the traceback to a log file, print one line naming it, return exit code 3."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    text = f"diskbench {' '.join(argv)}\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    where = "nowhere (the log could not be written either)"
    for directory in (crash_log_dir(), Path("/tmp")):
        path = directory / f"diskbench-crash-{stamp}-{os.getpid()}.log"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError:
            continue
        where = str(path)
        break
    first = " ".join(str(exc).split())[:200] or type(exc).__name__
    print(
        f"diskbench: internal error: {type(exc).__name__}: {first}; the traceback is in {where}",
        file=sys.stderr,
        flush=True,
    )
    return ExitCode.INFRA
