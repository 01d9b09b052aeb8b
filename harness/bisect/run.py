"""A bisection run: the ends compared once, then one step a commit until the first bad one is known.

Every comparison is a gate run (:func:`harness.gate.run_gate`) in a
directory of its own under ``OUT``: ``ends`` (base good, head bad), and per
step ``steps/NN-COMMIT/vs-good`` (base good, head the step) and ``vs-bad``
(base bad, head the step), each with the gate's interleaved, adaptive rounds,
its statistics, its outputs.  Replay cells record a stream once per end: the
gate runs share ``OUT/streams``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from harness.bisect.builds import Builds
from harness.bisect.classify import CellVerdict, Classified, classify, separating
from harness.bisect.report import evidence_lines, render_end, render_table
from harness.bisect.search import Found, Outcome, next_commit, result, window
from harness.bisect.state import BisectState, Step, cell_verdicts, load_state, resume, save_state
from harness.compare import Settings
from harness.errors import (
    BuildError,
    ExitCode,
    GuestBuildError,
    ProtocolError,
    UsageError,
    VMError,
    WorkDirFull,
)
from harness.gate import (
    GateOptions,
    GateResult,
    GateSpec,
    git,
    repo_toplevel,
    resolve_rev,
    run_gate,
)

#: what a step's own commit can make go wrong: it is skipped, not the bisection stopped
STEP_FAILURES: tuple[type[Exception], ...] = (BuildError, GuestBuildError, UsageError, VMError, ProtocolError)


@dataclass(frozen=True)
class BisectResult:
    """The end of a bisection: its state, the answer (None: the ends are not separated) and the text."""

    state: BisectState
    found: Found | None
    text: str
    out_dir: Path

    @property
    def exit_code(self) -> int:
        if self.found is not None and self.found.first_bad is not None:
            return ExitCode.OK
        return ExitCode.NOT_FOUND


def commit_range(repo: Path, good: str, bad: str) -> tuple[str, str, tuple[str, ...]]:
    """The good and bad commits and the commits after good up to bad, oldest first (first parents);
    bad input when good is not an ancestor of bad."""
    good_commit = resolve_rev(repo, good, "--good")
    bad_commit = resolve_rev(repo, bad, "--bad")
    if good_commit == bad_commit:
        raise UsageError(f"--good {good} and --bad {bad} are the same commit: pass two commits apart")
    ancestors = git(repo, "rev-list", "--first-parent", bad_commit).split()
    if good_commit not in ancestors:
        raise UsageError(
            f"--good {good} is not on the first-parent line of --bad {bad}: pass an older commit of "
            "that line as --good"
        )
    commits = git(repo, "rev-list", "--first-parent", "--reverse", f"{good_commit}..{bad_commit}").split()
    return good_commit, bad_commit, tuple(commits)


def run_bisect(
    *,
    repo: Path,
    ends: tuple[str, str],
    spec: GateSpec,
    settings: Settings,
    options: GateOptions,
    out_dir: Path,
    progress: Callable[[str], None] = lambda _m: None,
    measure: Measure | None = None,
) -> BisectResult:
    """Find the first commit after the good end that is measured like the bad one (``ends``: good,
    bad, as given); resumes the state in ``out_dir``.  ``measure`` compares the ends and measures a
    step (default: gate runs with ``options``)."""
    repo = repo_toplevel(repo)
    good_commit, bad_commit, commits = commit_range(repo, *ends)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "streams").mkdir(exist_ok=True)
    # what a resumed run must measure as this one did: the spec's cells and the gated metrics
    what = f"{spec.source} [{', '.join(settings.metrics)}; min effect {settings.min_effect:g}]"
    fresh = BisectState(good=good_commit, bad=bad_commit, commits=commits, spec=what)
    state = resume(load_state(out_dir), fresh, out_dir)
    if state.steps:
        progress(f"bisect: resuming from {out_dir}: {len(state.steps)} step(s) done")
    if measure is not None:
        return _search(repo, state, measure, out_dir=out_dir, progress=progress)
    gate = GateMeasure(repo, spec, settings, options, out_dir, progress)
    try:
        return _search(repo, state, gate, out_dir=out_dir, progress=progress)
    finally:
        gate.close()


def _search(
    repo: Path, state: BisectState, gate: Measure, *, out_dir: Path, progress: Callable[[str], None]
) -> BisectResult:
    """The ends (unless the state has them), then steps until the search is over."""
    good_commit, bad_commit, commits = state.good, state.bad, state.commits
    subjects = _Subjects(repo)
    if state.ends is None:
        progress(f"bisect: {len(commits)} commit(s) after {good_commit[:12]} up to {bad_commit[:12]}")
        progress(f"bisect: the ends: base {good_commit[:12]} (good), head {bad_commit[:12]} (bad)")
        ends, evidence = gate.ends(good_commit, bad_commit)
        state = replace(state, ends=ends, ends_evidence=tuple(evidence))
        save_state(out_dir, state)
    for line in state.ends_evidence:
        progress(f"bisect: ends: {line}")
    assert state.ends is not None
    if not separating(state.ends):
        text = (
            "no cell separates the ends: the bad end is not measured as worse (or changed) than the "
            "good end, so there is no commit to find\n"
        )
        return BisectResult(state=state, found=None, text=text, out_dir=out_dir)
    while (commit := next_commit(commits, state.outcomes)) is not None:
        number = len(state.steps) + 1
        w = window(commits, state.outcomes)
        progress(
            f"bisect: step {number}: {commit[:12]} {subjects.title(commit)} "
            f"({len(w.candidates)} commit(s) left, about {_steps_left(len(w.candidates))} step(s))"
        )
        step = gate.step(number, commit, state)
        for line in step.evidence:
            progress(f"bisect: step {number}: {line}")
        progress(f"bisect: step {number}: {commit[:12]} is {step.outcome}: {step.reason}")
        state = state.with_step(step)
        save_state(out_dir, state)
    found = result(commits, state.outcomes)
    text = render_end(found, state, title=subjects.title) + render_table(state, title=subjects.title)
    return BisectResult(state=state, found=found, text=text, out_dir=out_dir)


def _steps_left(candidates: int) -> int:
    return max(0, (candidates - 1).bit_length())


class _Subjects:
    """The one-line titles of the range's commits, read once each."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.titles: dict[str, str] = {}

    def title(self, commit: str) -> str:
        if commit not in self.titles:
            self.titles[commit] = git(self.repo, "log", "-1", "--format=%s", commit)[:72]
        return self.titles[commit]


class Measure(Protocol):
    """What a bisection measures with: the ends' comparison, and one step."""

    def ends(self, good: str, bad: str) -> tuple[dict[str, CellVerdict], list[str]]:
        """The ends' cell verdicts by gate name (base good, head bad), and their evidence."""
        ...

    def step(self, number: int, commit: str, state: BisectState) -> Step:
        """Step ``number``: ``commit`` measured and classified."""
        ...


@dataclass
class GateMeasure:
    """Measures by gate runs, each in its own directory of ``out_dir``."""

    repo: Path
    spec: GateSpec
    settings: Settings
    options: GateOptions
    out_dir: Path
    progress: Callable[[str], None]
    builds: Builds | None = None

    def __post_init__(self) -> None:
        if self.builds is None:
            self.builds = Builds(
                self.repo,
                build_command=self.options.build_command,
                default_policy=self.options.default_policy,
                log=self.progress,
            )

    def close(self) -> None:
        """Remove the checkouts of the commits built."""
        if self.builds is not None:
            self.builds.close()

    def ends(self, good: str, bad: str) -> tuple[dict[str, CellVerdict], list[str]]:
        ends = self.compare("ends", good, bad)
        return cell_verdicts(ends.cells), evidence_lines(ends.cells)

    def compare(self, where: str, base: str, head: str) -> GateResult:
        """The gate of ``base`` against ``head`` in ``OUT/where`` (started over if a stop left one)."""
        gate_out = self.out_dir / where
        if gate_out.exists():
            shutil.rmtree(gate_out)
        gate_out.mkdir(parents=True)
        # the streams of replay cells are recorded once per end for the whole bisection
        (gate_out / "streams").symlink_to(self.out_dir / "streams", target_is_directory=True)
        # every gate run draws its own order, all from the bisection's seed
        seed = self.options.seed + sum(ord(ch) for ch in where)
        assert self.builds is not None
        sources = (self.builds.source("base", base), self.builds.source("head", head))
        return run_gate(
            repo=self.repo,
            sources=sources,
            spec=self.spec,
            settings=self.settings,
            options=replace(self.options, seed=seed),
            out_dir=gate_out,
            progress=self.progress,
        )

    def step(self, number: int, commit: str, state: BisectState) -> Step:
        """Measure ``commit`` against both ends and classify it; a failure of its own is a skip."""
        assert state.ends is not None
        started = time.monotonic()
        where = f"steps/{number:02d}-{commit[:12]}"
        try:
            vs_good = self.compare(f"{where}/vs-good", state.good, commit)
            vs_bad = self.compare(f"{where}/vs-bad", state.bad, commit)
        except WorkDirFull:
            raise
        except STEP_FAILURES as exc:
            return Step(
                commit=commit,
                outcome=Outcome.SKIP,
                reason=f"it cannot be measured: {exc}",
                elapsed_s=time.monotonic() - started,
            )
        verdict: Classified = classify(state.ends, cell_verdicts(vs_good.cells), cell_verdicts(vs_bad.cells))
        evidence = [f"against good: {line}" for line in evidence_lines(vs_good.cells)]
        evidence += [f"against bad: {line}" for line in evidence_lines(vs_bad.cells)]
        return Step(
            commit=commit,
            outcome=verdict.outcome,
            reason=("unclear, skipped: " if verdict.unclear else "") + verdict.reason,
            vs_good=cell_verdicts(vs_good.cells),
            vs_bad=cell_verdicts(vs_bad.cells),
            evidence=tuple(evidence),
            elapsed_s=time.monotonic() - started,
        )
