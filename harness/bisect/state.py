"""A bisection's state, ``OUT/bisect.json``: the range, the ends' comparison and every step so far.

Written atomically after the ends are compared and after every step, so that
a bisection stopped at any point (Ctrl-C, a runner gone) goes on from the last
step done when it is run again with the same ``--out``; the step in flight is
measured again.  A state of other ends, another range or another spec is
refused: it would mix two bisections.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.bisect.classify import CellVerdict
from harness.bisect.search import Outcome
from harness.compare import ComparedCell, Kind, Verdict
from harness.errors import UsageError
from harness.files import write_json_atomic

SCHEMA = "diskbench-bisect"
VERSION = 1
STATE_FILE = "bisect.json"


@dataclass(frozen=True)
class Step:
    """One measured commit: its outcome, why, and its two comparisons' cell verdicts by gate name."""

    commit: str
    outcome: Outcome
    reason: str
    vs_good: Mapping[str, CellVerdict] = field(default_factory=dict)
    vs_bad: Mapping[str, CellVerdict] = field(default_factory=dict)
    # the step's evidence, one line per cell and comparison, as it was printed
    evidence: tuple[str, ...] = ()
    elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "outcome": self.outcome.value,
            "reason": self.reason,
            "vs_good": _verdicts_dict(self.vs_good),
            "vs_bad": _verdicts_dict(self.vs_bad),
            "evidence": list(self.evidence),
            "elapsed_s": round(self.elapsed_s, 1),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        return cls(
            commit=str(data["commit"]),
            outcome=Outcome(data["outcome"]),
            reason=str(data.get("reason", "")),
            vs_good=_verdicts(data.get("vs_good") or {}),
            vs_bad=_verdicts(data.get("vs_bad") or {}),
            evidence=tuple(str(line) for line in data.get("evidence") or ()),
            elapsed_s=float(data.get("elapsed_s", 0.0)),
        )


@dataclass(frozen=True)
class BisectState:
    """What a bisection knows: its ends, the commits between (oldest first, the bad end last),
    the spec it measures, the ends' comparison (None until done) and the steps."""

    good: str
    bad: str
    commits: tuple[str, ...]
    spec: str
    ends: Mapping[str, CellVerdict] | None = None
    ends_evidence: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()

    @property
    def outcomes(self) -> dict[str, Outcome]:
        return {s.commit: s.outcome for s in self.steps}

    def with_step(self, step: Step) -> BisectState:
        return replace(self, steps=(*self.steps, step))

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "version": VERSION,
            "good": self.good,
            "bad": self.bad,
            "commits": list(self.commits),
            "spec": self.spec,
            "ends": None if self.ends is None else _verdicts_dict(self.ends),
            "ends_evidence": list(self.ends_evidence),
            "steps": [s.as_dict() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BisectState:
        ends = data.get("ends")
        return cls(
            good=str(data["good"]),
            bad=str(data["bad"]),
            commits=tuple(str(c) for c in data["commits"]),
            spec=str(data["spec"]),
            ends=None if ends is None else _verdicts(ends),
            ends_evidence=tuple(str(line) for line in data.get("ends_evidence") or ()),
            steps=tuple(Step.from_dict(s) for s in data.get("steps") or ()),
        )


def save_state(out_dir: Path, state: BisectState) -> Path:
    path = out_dir / STATE_FILE
    write_json_atomic(path, state.as_dict())
    return path


def load_state(out_dir: Path) -> BisectState | None:
    """The state in ``out_dir``, None when there is none; bad input when it cannot be read."""
    path = out_dir / STATE_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror}): pass another --out") from None
    try:
        data = json.loads(text)
        if data.get("schema") != SCHEMA or data.get("version") != VERSION:
            raise ValueError("not a bisect state of this version")
        return BisectState.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(
            f"{path}: not a diskbench bisect state ({exc}): remove it to start over, or pass another --out"
        ) from None


def resume(found: BisectState | None, fresh: BisectState, out_dir: Path) -> BisectState:
    """``found`` (the state in ``out_dir``) where it is a bisection of the same ends, range and spec;
    ``fresh`` when there is none; bad input when it is another bisection's."""
    if found is None:
        return fresh
    for what, ours, theirs in (
        ("good end", fresh.good, found.good),
        ("bad end", fresh.bad, found.bad),
        ("range", fresh.commits, found.commits),
        ("spec", fresh.spec, found.spec),
    ):
        if ours != theirs:
            raise UsageError(
                f"{out_dir / STATE_FILE} is a bisection with another {what}: pass the same --good, --bad "
                "and spec to go on with it, or another --out"
            )
    return found


def cell_verdicts(cells: Sequence[ComparedCell]) -> dict[str, CellVerdict]:
    """Gate name -> verdict of the :class:`~harness.compare.ComparedCell` of a gate run."""
    return {(c.cell.gate_name or c.cell_id): CellVerdict(verdict=c.verdict, kind=c.kind) for c in cells}


def _verdicts_dict(verdicts: Mapping[str, CellVerdict]) -> dict[str, dict[str, str]]:
    return {name: {"verdict": v.verdict.value, "kind": v.kind.value} for name, v in verdicts.items()}


def _verdicts(data: Mapping[str, Any]) -> dict[str, CellVerdict]:
    return {
        str(name): CellVerdict(verdict=Verdict(v["verdict"]), kind=Kind(v.get("kind", "metric")))
        for name, v in data.items()
    }
