"""Progress of `diskbench history`: asv's lines (as its log has them) in, counts and an ETA out."""

from __future__ import annotations

import time
from pathlib import Path

from harness.history.history_progress import QUIET_S, HistoryProgress, LogFollower

# lines of a real history log (8 commits of the small matrix, 58 benchmarks each)
TOTALS = "· Running 464 total benchmarks (8 commits * 1 environments * 58 benchmarks)"
COMMIT_1 = "[ 0.00%] · For diskbench commit 5cbf3cbe <main~7>:"
SETUP = "[ 0.22%] ··· Setting up run:88                                               ok"
BENCH = "[ 0.43%] ··· matrix.Dd.track_total_s                                      3.64s"
COMMIT_2 = "[12.50%] · For diskbench commit 274ca10a <main~6>:"


def test_counts_per_commit_and_benchmark_and_an_eta_from_the_commits_done() -> None:
    p = HistoryProgress()
    assert p.line("· Creating environments", -20.0) == [], "the first commit's build starts the clock"
    (line,) = p.line(TOTALS, 0.0)
    assert "8 commit(s) x 58 benchmarks (464 in all)" in line
    (line,) = p.line(COMMIT_1, 0.0)
    assert line == (
        "history: commit 1/8 5cbf3cbe <main~7>: building, installing and measuring its cells; "
        "ETA after the first commit"
    )
    assert p.line("[ 0.00%] ·· Benchmarking virtualenv-py3.11-setuptools-wheel", 5.0) == []
    (line,) = p.line(SETUP, 50.0)
    assert "commit 1/8 5cbf3cbe: cells measured (ok) after 1m10s; recording 58 benchmarks" in line
    for i in range(57):
        assert p.line(BENCH, 55.0 + i * 0.05) == []
    (done,) = p.line(BENCH, 60.0)
    assert done == "history: commit 1/8 5cbf3cbe done in 1m20s: 58/58 benchmarks; 58/464 overall; ETA 9m20s"
    (line,) = p.line(COMMIT_2, 60.0)
    assert line.startswith("history: commit 2/8 274ca10a <main~6>:") and line.endswith("ETA 9m20s")
    assert p.eta_s(90.0) == 80.0 * 7 - 30.0


def test_a_failed_benchmark_is_said_at_once_and_a_quiet_asv_gets_a_heartbeat() -> None:
    p = HistoryProgress()
    p.line(TOTALS, 0.0)
    p.line(COMMIT_1, 0.0)
    assert p.tick(QUIET_S - 1) == []
    (beat,) = p.tick(QUIET_S + 1)
    assert beat.startswith(
        "history: commit 1/8 5cbf3cbe: building, installing and measuring its cells for 2m01s"
    )
    (failed,) = p.line("[ 0.43%] ··· policy.Dd.track_total_s                                failed", 200.0)
    assert failed == "history: commit 1/8 5cbf3cbe: benchmark 1/58 policy.Dd.track_total_s failed"


def test_the_follower_reads_what_asv_appends_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "history.log"
    log.write_text("$ asv machine ...\n")  # an earlier command's output is not progress
    seen: list[str] = []
    with LogFollower(log, seen.append, poll_s=0.05), log.open("a") as fh:
        fh.write(TOTALS + "\n" + COMMIT_1 + "\n")
        fh.flush()
        time.sleep(0.3)
        fh.write(SETUP + "\n" + "[ 0.43%] ··· matrix.Dd.track_total_s")  # a line not yet whole
    assert len(seen) == 3, seen
    assert "commit 1/8 5cbf3cbe" in seen[1] and "cells measured" in seen[2]


def test_spec_and_repeat_reach_the_suite_and_bad_ones_stop_before_asv(tmp_path: Path) -> None:
    import pytest

    from harness.errors import SpecError, UsageError
    from harness.history.asvrun import matrix_environ

    small = Path(__file__).resolve().parents[2] / "sweeps" / "history-small.toml"
    assert matrix_environ(small, 1) == {"DISKBENCH_HISTORY_SPEC": str(small), "DISKBENCH_HISTORY_REPEAT": "1"}
    assert matrix_environ(None, None) == {}
    with pytest.raises(UsageError, match="--repeat 0"):
        matrix_environ(None, 0)
    bad = tmp_path / "bad.toml"
    bad.write_text('[axes]\nformat = ["vmdk9"]\n')
    with pytest.raises(SpecError):
        matrix_environ(bad, None)
