"""The host canary: O_DIRECT writes on the work dir before and after the rounds.

When the host's own disk moved during the gate, time verdicts could be the
host's doing: :func:`judge_canary` turns them inconclusive (the rule itself
lives in :func:`harness.compare.apply_canary`).
"""

from __future__ import annotations

import mmap
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from harness.compare import ComparedCell, Settings, apply_canary
from harness.compare.model import Canary
from harness.errors import InfraError

CANARY_MIB = 256
CANARY_CHUNK = 2 * 1024 * 1024


def canary_once(work_dir: Path, *, mib: int = CANARY_MIB) -> float:
    """MiB/s of ``mib`` MiB written with O_DIRECT in 2 MiB chunks, fsync included."""
    path = work_dir / f".canary-{os.getpid()}"
    buf = mmap.mmap(-1, CANARY_CHUNK)  # page-aligned, as O_DIRECT wants
    buf.write(os.urandom(4096) * (CANARY_CHUNK // 4096))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
    try:
        start = time.monotonic()
        for _ in range(mib * 1024 * 1024 // CANARY_CHUNK):
            os.write(fd, buf)
        os.fsync(fd)
        elapsed = time.monotonic() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
        buf.close()
    return mib / elapsed


def host_canary(work_dir: Path, *, repeats: int = 5, mib: int = CANARY_MIB) -> list[float]:
    """Several canary writes; the gate keeps them all (their spread is the canary's own noise)."""
    try:
        return [canary_once(work_dir, mib=mib) for _ in range(repeats)]
    except OSError as exc:
        raise InfraError(f"the host canary could not write in {work_dir}: {exc.strerror or exc}") from exc


def judge_canary(
    results: Sequence[ComparedCell], before: Sequence[float], after: Sequence[float], settings: Settings
) -> tuple[list[ComparedCell], Canary]:
    """The host moved only if the medians differ by more than the minimum effect *and* the
    ranges of the canary's own repeats do not overlap: its own noise is not a move of the host."""
    before_s, after_s = statistics.median(before), statistics.median(after)
    overlap = max(min(before), min(after)) <= min(max(before), max(after))
    if overlap:
        # judged with an effect no change can reach: the document still carries the figures
        results, canary = apply_canary(
            results, before_mib_s=before_s, after_mib_s=after_s, settings=replace(settings, min_effect=9.99)
        )
    else:
        results, canary = apply_canary(results, before_mib_s=before_s, after_mib_s=after_s, settings=settings)
    return results, replace(canary, before_runs=tuple(before), after_runs=tuple(after))
