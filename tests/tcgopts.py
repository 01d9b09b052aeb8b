"""The options of a test's guest samples under TCG: the binaries on PATH, a run id of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.sample.guest_sampler import RunOptions
from harness.subject.binaries import Binaries


def run_dirs(tmp_path: Path) -> list[str]:
    """The flags that keep a command's results under ``tmp_path / "r"`` and its images under
    ``tmp_path / "w"``."""
    return ["--results-dir", str(tmp_path / "r"), "--work-dir", str(tmp_path / "w")]


def tcg_options(
    work_dir: Path, results_dir: Path, *, run_id: str = "t", accel_reason: str = "test", **changes: Any
) -> RunOptions:
    """RunOptions under TCG with the binaries on PATH, the work and results dirs given, and
    ``changes`` (``repeat=1``, ``extra_append=(...)``...) beside."""
    return RunOptions(
        binaries=Binaries.on_path(),
        accel="tcg",
        accel_reason=accel_reason,
        work_dir=work_dir,
        results_dir=results_dir,
        run_id=run_id,
        **changes,
    )
