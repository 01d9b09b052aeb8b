"""Figures of a set of samples, each computed once.  Pure: no I/O."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Stats:
    """Median and spread of one metric over a cell's samples."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        return cls(tuple(float(v) for v in values))

    @property
    def n(self) -> int:
        return len(self.values)

    @cached_property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @cached_property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else float("nan")

    @cached_property
    def stdev(self) -> float:
        return statistics.stdev(self.values) if self.n >= 2 else 0.0

    @property
    def min(self) -> float:
        return min(self.values) if self.values else float("nan")

    @property
    def max(self) -> float:
        return max(self.values) if self.values else float("nan")

    @cached_property
    def cv_pct(self) -> float:
        """Coefficient of variation, in percent of the mean (0 with fewer than 2 samples)."""
        if self.n < 2 or self.mean == 0:
            return 0.0
        return 100.0 * self.stdev / abs(self.mean)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "median": self.median,
            "mean": self.mean,
            "stdev": self.stdev,
            "min": self.min,
            "max": self.max,
            "cv_pct": self.cv_pct,
        }

    def format(self, unit: str = "s", digits: int = 2) -> str:
        """``"12.30 s ± 2.1%"``: never a bare mean; ``n=1`` says it has no spread."""
        if not self.values:
            return "-"
        head = f"{self.median:.{digits}f} {unit}".rstrip()
        if self.n < 2:
            return f"{head} (n=1)"
        return f"{head} ± {self.cv_pct:.1f}%"
