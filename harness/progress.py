"""Progress of a sweep: a bar with ETA on a terminal, plain lines elsewhere.

A sweep runs for hours; the one figure its user waits for is when it will
end.  The ETA starts from priors (:func:`harness.sweep.estimate_sample_s`) and
moves to what this sweep measured as soon as a sample of the same workload
has run, since priors can be off by a factor of several between machines.

:class:`EtaModel` is pure; :class:`Progress` only draws.  On a terminal the
bar is redrawn in place on stderr and the runner's notes scroll above it;
when stderr is not a TTY, or ``CI`` is set (logs of CI jobs keep every
carriage return), it prints plain lines, one per sample.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO


@dataclass
class EtaModel:
    """Remaining time from measured samples per workload kind, priors otherwise."""

    measured: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, seconds: float) -> None:
        self.measured.setdefault(kind, []).append(seconds)

    def sample_s(self, kind: str, prior_s: float) -> float:
        """The mean of this sweep's samples of ``kind``, else the prior."""
        values = self.measured.get(kind)
        return sum(values) / len(values) if values else prior_s

    def remaining_s(self, pending: list[tuple[str, float]]) -> float:
        """``pending``: (kind, prior seconds) of every sample still to run."""
        return sum(self.sample_s(kind, prior) for kind, prior in pending)


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def use_bar(stream: TextIO) -> bool:
    """A bar only for a person at a terminal: not in CI logs, not in a pipe."""
    if os.environ.get("CI"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """Counts samples, estimates the rest, and shows both.

    The sweep loop calls :meth:`start`, then :meth:`begin` and :meth:`end`
    around every sample, :meth:`note` for the runner's messages, and
    :meth:`finish`.  ``pending`` priors are handed in by :meth:`plan`.
    """

    def __init__(self, stream: TextIO | None = None, *, bar: bool | None = None, width: int = 24) -> None:
        self.stream = stream or sys.stderr
        self.bar = use_bar(self.stream) if bar is None else bar
        self.width = width
        self.total = 0
        self.done = 0
        self.failed = 0
        self.model = EtaModel()
        self.pending: list[tuple[str, float]] = []
        self.current = ""
        self.started_at = time.monotonic()
        self._drawn = False

    def plan(self, pending: list[tuple[str, float]]) -> None:
        """The (kind, prior seconds) of the samples this run will take, in order."""
        self.pending = list(pending)

    def start(self, *, total: int, done: int = 0) -> None:
        self.total = total
        self.done = done
        self.started_at = time.monotonic()
        self._draw()

    def begin(self, cell_id: str) -> None:
        self.current = cell_id
        self._draw()

    def end(self, cell_id: str, seconds: float, *, ok: bool, kind: str) -> None:
        self.done += 1
        if not ok:
            self.failed += 1
        self.model.add(kind, seconds)
        for i, (pending_kind, _prior) in enumerate(self.pending):
            if pending_kind == kind:
                del self.pending[i]
                break
        self.current = ""
        if self.bar:
            self._draw()
        else:
            self._line(self.status())

    def eta_s(self) -> float | None:
        if not self.pending and self.done < self.total:
            return None
        return self.model.remaining_s(self.pending)

    def status(self) -> str:
        pct = 100 * self.done // self.total if self.total else 100
        elapsed = format_eta(time.monotonic() - self.started_at)
        failed = f", {self.failed} failed" if self.failed else ""
        return f"{self.done}/{self.total} samples ({pct}%){failed}, elapsed {elapsed}, ETA {format_eta(self.eta_s())}"

    def note(self, message: str) -> None:
        """A message from the runner: above the bar, or a plain line."""
        if self.bar and self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False
        self._line(message)
        self._draw()

    def finish(self) -> None:
        if self.bar and self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False
        self._line(f"sweep: {self.status()}")

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def _draw(self) -> None:
        if not self.bar or not self.total:
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        doing = f"  {self.current}" if self.current else ""
        self.stream.write(f"\r\x1b[K[{bar}] {self.status()}{doing}")
        self.stream.flush()
        self._drawn = True
