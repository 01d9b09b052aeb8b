"""Progress of ``diskbench history`` while asv runs: counts and an ETA, per commit and benchmark.

asv's output goes to the history log; :class:`LogFollower` reads the lines as they are
written and :class:`HistoryProgress` (pure: lines and times in, progress lines out) turns the
ones that matter into a line on stderr:

- ``Running 464 total benchmarks (8 commits * 1 environments * 58 benchmarks)``: the counts;
- ``[ 12.50%] · For diskbench commit 274ca10a <main~6>:``: a commit begins (build, install,
  then the suite's ``setup_cache`` runs every cell, which is nearly all of a commit's time);
- ``[ 13.00%] ··· Setting up run:88   ok``: the cells ran; the benchmarks are recorded next;
- ``[ 13.21%] ··· matrix.Dd.track_total_s   3.64s``: one benchmark recorded (a ``failed`` one
  is said at once).

The ETA is the mean time of the commits done so far times the commits left, less the time the
current one has run; before a commit has finished there is none.  While nothing is written
for :data:`QUIET_S`, a line says what is running and for how long.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.progress import format_eta

Log = Callable[[str], None]
QUIET_S = 120.0
_PERCENT = r"^\[\s*[\d.]+%\]\s*"
_TOTALS = re.compile(
    r"Running (\d+) total benchmarks \((\d+) commits \* (\d+) environments \* (\d+) benchmarks\)"
)
_COMMIT = re.compile(_PERCENT + r"·\s+For \S+ commit (\S+)(?: <([^>]*)>)?")
_SETUP = re.compile(_PERCENT + r"·+\s+Setting up \S+\s*(\S*)")
_BENCH = re.compile(_PERCENT + r"···\s+([A-Za-z_][\w.]*\.track_\w+)\s+(.*)$")


@dataclass
class HistoryProgress:
    """The state of one ``asv run``, from its lines; every method returns the lines to print."""

    commits: int = 0
    benchmarks: int = 0
    index: int = 0
    commit: str = ""
    started: float | None = None
    recorded: int = 0
    total_recorded: int = 0
    phase: str = "starting"
    last_output: float = 0.0
    done_s: list[float] = field(default_factory=list)
    # asv builds and installs the first commit before it says "For ... commit": that commit's
    # time starts with asv's first line
    run_started: float | None = None

    def eta_s(self, now: float) -> float | None:
        if not self.done_s or not self.commits:
            return None
        mean = sum(self.done_s) / len(self.done_s)
        running = now - self.started if self.started is not None and self.index > len(self.done_s) else 0.0
        left = self.commits - len(self.done_s)
        return max(0.0, mean * left - min(running, mean))

    def eta_text(self, now: float) -> str:
        eta = self.eta_s(now)
        return "ETA after the first commit" if eta is None else f"ETA {format_eta(eta)}"

    def _finish_commit(self, now: float) -> list[str]:
        if self.started is None or not self.commit:
            return []
        took = now - self.started
        self.done_s.append(took)
        self.started = None
        overall = (
            f"{self.total_recorded}/{self.commits * self.benchmarks}"
            if self.benchmarks
            else str(self.total_recorded)
        )
        return [
            f"history: commit {self.index}/{self.commits} {self.commit} done in {format_eta(took)}: "
            f"{self.recorded}/{self.benchmarks or '?'} benchmarks; {overall} overall; {self.eta_text(now)}"
        ]

    def line(self, text: str, now: float) -> list[str]:
        self.last_output = now
        if self.run_started is None:
            self.run_started = now
        out: list[str] = []
        if match := _TOTALS.search(text):
            self.commits, self.benchmarks = int(match.group(2)), int(match.group(4))
            return [
                f"history: {self.commits} commit(s) x {self.benchmarks} benchmarks "
                f"({match.group(1)} in all); a commit's cells run before its benchmarks are recorded"
            ]
        if match := _COMMIT.search(text):
            out += self._finish_commit(now)
            self.index += 1
            first = self.index == 1 and self.run_started is not None
            self.commit, self.recorded = match.group(1)[:8], 0
            self.started = self.run_started if first else now
            self.phase = "building, installing and measuring its cells"
            ref = f" <{match.group(2)}>" if match.group(2) else ""
            out.append(
                f"history: commit {self.index}/{self.commits or '?'} {self.commit}{ref}: {self.phase}; "
                f"{self.eta_text(now)}"
            )
            return out
        if match := _SETUP.search(text):
            took = format_eta(now - self.started) if self.started is not None else "?"
            word = match.group(1) or "done"
            self.phase = "recording its benchmarks"
            return [
                f"history: commit {self.index}/{self.commits or '?'} {self.commit}: cells measured ({word}) "
                f"after {took}; recording {self.benchmarks or '?'} benchmarks"
            ]
        if match := _BENCH.search(text):
            self.recorded += 1
            self.total_recorded += 1
            if "failed" in match.group(2):
                out.append(
                    f"history: commit {self.index}/{self.commits or '?'} {self.commit}: benchmark "
                    f"{self.recorded}/{self.benchmarks or '?'} {match.group(1)} failed"
                )
            if self.benchmarks and self.recorded == self.benchmarks:
                out += self._finish_commit(now)
            return out
        return out

    def tick(self, now: float) -> list[str]:
        """A line when asv has been quiet for :data:`QUIET_S` (a commit's cells take minutes)."""
        if self.started is None or now - self.last_output < QUIET_S:
            return []
        self.last_output = now
        return [
            f"history: commit {self.index}/{self.commits or '?'} {self.commit}: {self.phase} for "
            f"{format_eta(now - self.started)}; {self.eta_text(now)}"
        ]

    def end(self, now: float) -> list[str]:
        return self._finish_commit(now) if self.recorded else []


class LogFollower:
    """Reads a growing log in a thread and hands each new line to :class:`HistoryProgress`."""

    def __init__(
        self, path: Path, log: Log, *, poll_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ):
        self.path = path
        self.log = log
        self.poll_s = poll_s
        self.clock = clock
        self.progress = HistoryProgress(last_output=clock())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="history-progress", daemon=True)
        self._offset = 0
        self._partial = b""

    def __enter__(self) -> LogFollower:
        if self.path.exists():
            self._offset = self.path.stat().st_size  # only what this run writes
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._read()
        for line in self.progress.end(self.clock()):
            self.log(line)

    def _read(self) -> None:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for raw in lines:
            for line in self.progress.line(raw.decode("utf-8", "replace"), self.clock()):
                self.log(line)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._read()
            for line in self.progress.tick(self.clock()):
                self.log(line)
