"""``diskbench history changes``: the change points of every history series, with their causes.

Reads asv's results (:mod:`harness.history.changes.series`), finds each series' change points
(:mod:`harness.history.changes.method`) and tells, for each, what else changed at its commit from the
records the history suite kept (``RESULTS/history/MACHINE/COMMIT/sweeps/history/``:
:mod:`harness.history.changes.attribution`).  The minimum step of a series is the asv config's
``regressions_thresholds`` for its benchmark (the largest that matches, as asv takes it;
asv's 5 % when none does), unless ``min_effect`` is given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.history.changes import method
from harness.history.changes.attribution import cause, commit_identity, identity_changes
from harness.history.changes.series import Series, load_series

ASV_DEFAULT_THRESHOLD = 0.05


@dataclass(frozen=True)
class Settings:
    alpha: float = method.ALPHA
    min_segment: int = method.MIN_SEGMENT
    min_effect: float | None = None  # None: the config's regressions_thresholds
    permutations: int = method.PERMUTATIONS

    def check(self) -> None:
        method.check_settings(
            alpha=self.alpha,
            min_segment=self.min_segment,
            permutations=self.permutations,
            min_effect=self.min_effect or 0.0,
        )


@dataclass(frozen=True)
class Change:
    """One change point of one series, and what it lines up with."""

    series: Series
    commit: str
    previous: str
    before: float
    after: float
    p: float
    cause: str
    changed: tuple[str, ...]

    @property
    def confidence(self) -> float:
        return 1.0 - self.p

    def as_dict(self) -> dict[str, Any]:
        return {
            "machine": self.series.machine,
            "cell": self.series.cell,
            "benchmark": self.series.benchmark,
            "params": list(self.series.params),
            "metric": self.series.metric,
            "unit": self.series.unit,
            "commit": self.commit,
            "previous": self.previous,
            "before": self.before,
            "after": self.after,
            "p": self.p,
            "confidence": self.confidence,
            "cause": self.cause,
            "changed": list(self.changed),
        }


def threshold_for(benchmark: str, thresholds: Mapping[str, Any]) -> float:
    """The largest ``regressions_thresholds`` value whose pattern matches the benchmark."""
    found = [float(value) for pattern, value in thresholds.items() if re.match(pattern, benchmark)]
    return max(found) if found else ASV_DEFAULT_THRESHOLD


Identities = Callable[[str, str], Mapping[str, str] | None]


def series_changes(
    series: Series, settings: Settings, *, threshold: float, identity: Identities
) -> list[Change]:
    """The change points of one series; ``identity(machine, commit)`` is a commit's identity, None
    when it has no records."""
    effect = settings.min_effect if settings.min_effect is not None else threshold
    points = method.change_points(
        series.values,
        alpha=settings.alpha,
        min_segment=settings.min_segment,
        min_effect=effect,
        permutations=settings.permutations,
    )
    measured = [i for i, v in enumerate(series.values) if v == v]  # not NaN
    out = []
    for point in points:
        previous = series.commits[measured[measured.index(point.index) - 1]]
        commit = series.commits[point.index]
        before_id, after_id = identity(series.machine, previous), identity(series.machine, commit)
        known = before_id is not None and after_id is not None
        changes = identity_changes(before_id or {}, after_id or {}) if known else []
        out.append(
            Change(
                series=series,
                commit=commit,
                previous=previous,
                before=point.before,
                after=point.after,
                p=point.p,
                cause=cause(changes, known=known),
                changed=tuple(str(c) for c in changes),
            )
        )
    return out


def find_changes(
    series: Sequence[Series],
    settings: Settings,
    *,
    thresholds: Mapping[str, Any],
    identity: Identities,
) -> list[Change]:
    """Every series' change points, by machine, commit order of each series, cell and metric."""
    settings.check()
    found = []
    for one in series:
        found += series_changes(
            one, settings, threshold=threshold_for(one.benchmark, thresholds), identity=identity
        )
    return found


def records_identity(records_root: Path) -> Identities:
    """A commit's identity from the history suite's records under ``records_root`` (read once each)."""
    from harness.sweep import scan_records, sweep_dir

    cache: dict[tuple[str, str], Mapping[str, str] | None] = {}

    def identity(machine: str, commit: str) -> Mapping[str, str] | None:
        key = (machine, commit)
        if key not in cache:
            directory = sweep_dir(records_root / machine / commit, "history")
            found = scan_records(directory) if directory.is_dir() else {}
            cache[key] = commit_identity(found.values()) if found else None
        return cache[key]

    return identity


@dataclass(frozen=True)
class Found:
    changes: tuple[Change, ...]
    series: int
    #: every (machine, commit) measured, in the graphs' order
    points: tuple[tuple[str, str], ...] = ()


def history_changes(
    *,
    results_dir: Path,
    records_root: Path,
    thresholds: Mapping[str, Any],
    settings: Settings,
    order: Sequence[str] = (),
    machine: str | None = None,
) -> Found:
    """The change points of the asv results in ``results_dir``, attributed from the records."""
    settings.check()
    series = load_series(results_dir, order=order, machine=machine)
    changes = find_changes(series, settings, thresholds=thresholds, identity=records_identity(records_root))
    points = dict.fromkeys((one.machine, commit) for one in series for commit in one.commits)
    return Found(changes=tuple(changes), series=len(series), points=tuple(points))


def branch_order(repo: Path | None, branch: str) -> list[str]:
    """The branch's commits, oldest first (first parent), as asv orders its graphs; empty when the
    repository cannot be read here (the results' dates order them then)."""
    from harness.errors import CommandError
    from harness.host import proc

    if repo is None:
        return []
    try:
        result = proc.run(["git", "-C", str(repo), "rev-list", "--first-parent", branch], timeout_s=60)
    except CommandError:
        return []
    return list(reversed(result.stdout.split()))
