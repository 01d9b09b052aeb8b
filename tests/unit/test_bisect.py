"""diskbench bisect: the search, a step's outcome, the state and its resumption, bad input."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gitrepo import git, new_repo

from harness.bisect import (
    STATE_FILE,
    BisectState,
    CellVerdict,
    Outcome,
    Step,
    classify,
    load_state,
    next_commit,
    result,
    run_bisect,
    save_state,
    window,
)
from harness.cli import main
from harness.compare import Kind, Settings, Verdict
from harness.errors import UsageError
from harness.gate import GateAsked, GateOptions, parse_gate_spec
from harness.rounds.session import MachineOptions
from harness.subject.binaries import Binaries


def machine(work: Path) -> MachineOptions:
    return MachineOptions(binaries=Binaries.on_path(), work_dir=work, results_dir=work)


R, IMP, U, N = Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED, Verdict.INCONCLUSIVE


def commits_of(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(1, n + 1)]


def bisect(
    commits: list[str], oracle: Callable[[str], Outcome], outcomes: dict[str, Outcome] | None = None
) -> tuple[list[str], dict[str, Outcome]]:
    """The search to its end with ``oracle`` as the measurement: the commits measured, in order."""
    outcomes = dict(outcomes or {})
    measured = []
    while (commit := next_commit(commits, outcomes)) is not None:
        assert commit not in outcomes, "a commit is never measured twice"
        measured.append(commit)
        outcomes[commit] = oracle(commit)
    return measured, outcomes


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16, 17, 100])
def test_the_search_names_the_first_bad_commit_within_log2_n_steps(n: int) -> None:
    commits = commits_of(n)
    for first_bad in range(n):
        measured, outcomes = bisect(
            commits, lambda c, k=first_bad: Outcome.BAD if commits.index(c) >= k else Outcome.GOOD
        )
        found = result(commits, outcomes)
        assert found is not None and found.first_bad == commits[first_bad]
        assert len(measured) <= math.ceil(math.log2(n)), (first_bad, measured)
        assert len(measured) <= math.log2(n) + 2


def test_the_first_step_of_16_halves_the_range_and_the_bad_end_is_never_measured() -> None:
    commits = commits_of(16)
    assert next_commit(commits, {}) == "c08"  # c01..c08 or c09..c16: 8 either way
    measured, _ = bisect(commits, lambda _c: Outcome.GOOD)
    assert "c16" not in measured
    assert result(commits, dict.fromkeys(measured, Outcome.GOOD)) == result(
        commits, {c: Outcome.GOOD for c in commits[:-1]}
    )


def test_a_skipped_middle_gives_way_to_its_nearest_untested_neighbour() -> None:
    commits = commits_of(16)
    assert next_commit(commits, {"c08": Outcome.SKIP}) == "c07"
    assert next_commit(commits, {"c08": Outcome.SKIP, "c07": Outcome.SKIP}) == "c09"


def test_skipped_commits_cost_at_most_a_step_each_and_the_answer_stays() -> None:
    commits = commits_of(16)
    skipped = {"c08", "c12"}
    first_bad = 10  # c11

    def oracle(c: str) -> Outcome:
        if c in skipped:
            return Outcome.SKIP
        return Outcome.BAD if commits.index(c) >= first_bad else Outcome.GOOD

    measured, outcomes = bisect(commits, oracle)
    found = result(commits, outcomes)
    assert found is not None and found.first_bad == "c11"
    assert len(measured) <= math.ceil(math.log2(16)) + len(skipped)


def test_a_skipped_commit_just_before_the_first_bad_one_leaves_both_as_candidates() -> None:
    commits = commits_of(16)

    def oracle(c: str) -> Outcome:
        if c == "c10":
            return Outcome.SKIP
        return Outcome.BAD if commits.index(c) >= 10 else Outcome.GOOD

    _, outcomes = bisect(commits, oracle)
    found = result(commits, outcomes)
    assert found is not None and found.first_bad is None
    assert found.candidates == ("c10", "c11")


def test_every_commit_skipped_leaves_the_whole_range() -> None:
    commits = commits_of(4)
    measured, outcomes = bisect(commits, lambda _c: Outcome.SKIP)
    assert measured == ["c02", "c01", "c03"]
    found = result(commits, outcomes)
    assert found is not None and found.first_bad is None and found.candidates == tuple(commits)


def test_the_window_of_contradicting_outcomes_follows_the_oldest_bad() -> None:
    commits = commits_of(8)
    w = window(commits, {"c03": Outcome.BAD, "c05": Outcome.GOOD, "c01": Outcome.GOOD})
    assert (w.low, w.high) == (1, 2)
    assert w.candidates == ("c02", "c03") and w.untested == ("c02",)


# --- a step's outcome ---------------------------------------------------------------------


def cells(**verdicts: Verdict) -> dict[str, CellVerdict]:
    return {name: CellVerdict(v) for name, v in verdicts.items()}


@pytest.mark.parametrize(
    ("vs_good", "vs_bad", "outcome"),
    [
        (R, U, Outcome.BAD),  # moved from good as bad did, equivalent to bad
        (R, N, Outcome.BAD),  # moved from good, not distinguishable from bad
        (R, IMP, Outcome.BAD),  # between the ends: part of the change is here
        (U, IMP, Outcome.GOOD),  # equivalent to good, moved back from bad
        (N, IMP, Outcome.GOOD),  # not distinguishable from good, faster than bad
        (U, N, Outcome.GOOD),  # equivalent to good alone
        (N, U, Outcome.BAD),  # equivalent to bad alone
        (N, N, Outcome.SKIP),  # neither: unclear
        (U, U, Outcome.SKIP),  # equivalent to both: unclear
        (IMP, N, Outcome.SKIP),  # faster than good: not the ends' change
    ],
)
def test_a_step_is_classified_by_its_two_comparisons(
    vs_good: Verdict, vs_bad: Verdict, outcome: Outcome
) -> None:
    got = classify(cells(a=R), cells(a=vs_good), cells(a=vs_bad))
    assert got.outcome is outcome, got.reason
    assert got.unclear is (outcome is Outcome.SKIP)


def test_ends_separated_by_an_improvement_find_the_first_faster_commit() -> None:
    assert classify(cells(a=IMP), cells(a=IMP), cells(a=U)).outcome is Outcome.BAD
    assert classify(cells(a=IMP), cells(a=U), cells(a=R)).outcome is Outcome.GOOD


def test_only_separating_cells_decide_and_any_bad_one_makes_the_step_bad() -> None:
    ends = cells(a=R, b=U, c=R)
    assert classify(ends, cells(a=U, b=R, c=U), cells(a=IMP, b=N, c=IMP)).outcome is Outcome.GOOD
    got = classify(ends, cells(a=U, b=U, c=R), cells(a=IMP, b=U, c=U))
    assert got.outcome is Outcome.BAD and "c: regression against good" in got.reason


def test_a_step_whose_samples_failed_is_skipped_with_the_cell_named() -> None:
    failed = {"a": CellVerdict(Verdict.REGRESSION, Kind.FAILURE)}
    got = classify(cells(a=R), failed, cells(a=U))
    assert got.outcome is Outcome.SKIP and not got.unclear
    assert "a: failure against good" in got.reason


# --- the driver, its state and resumption ---------------------------------------------------


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository of 17 commits, tagged good (the first) and bad (the last); read only."""
    path = new_repo(tmp_path_factory.mktemp("bisect") / "repo")
    for i in range(17):
        (path / "n.txt").write_text(f"{i}\n")
        git(path, "add", "n.txt")
        git(path, "commit", "-q", "-m", f"commit {i}")
        if i == 0:
            git(path, "tag", "good")
    git(path, "tag", "bad")
    return path


SPEC = parse_gate_spec('[[cells]]\nname = "a"\nworkload = "dd"\n', source="test.toml")


class Synthetic:
    """Measures nothing: the ends are a regression, a step is bad from commit ``first_bad`` on;
    stops (as Ctrl-C would) before step ``stop_at``."""

    def __init__(self, commits: list[str], first_bad: int, stop_at: int | None = None) -> None:
        self.commits, self.first_bad, self.stop_at = commits, first_bad, stop_at
        self.measured: list[str] = []
        self.ends_compared = 0

    def ends(self, good: str, bad: str) -> tuple[dict[str, CellVerdict], list[str]]:
        self.ends_compared += 1
        return cells(a=R), ["a: regression"]

    def step(self, number: int, commit: str, state: BisectState) -> Step:
        if self.stop_at is not None and number >= self.stop_at:
            raise KeyboardInterrupt
        self.measured.append(commit)
        bad = self.commits.index(commit) >= self.first_bad
        return Step(commit=commit, outcome=Outcome.BAD if bad else Outcome.GOOD, reason="synthetic")


def run(repo: Path, out: Path, measure: Synthetic) -> object:
    return run_bisect(
        repo=repo,
        ends=("good", "bad"),
        spec=SPEC,
        settings=Settings(),
        options=GateOptions.decide(SPEC, machine(out), GateAsked(seed=1)),
        out_dir=out,
        measure=measure,
    )


def test_a_stopped_bisection_goes_on_from_its_state_and_measures_nothing_twice(
    repo: Path, tmp_path: Path
) -> None:
    commits = git(repo, "rev-list", "--reverse", "good..bad").split()
    out = tmp_path / "out"
    first = Synthetic(commits, first_bad=5, stop_at=3)
    with pytest.raises(KeyboardInterrupt):
        run(repo, out, first)
    state = load_state(out)
    assert state is not None and len(state.steps) == 2 and state.ends is not None
    second = Synthetic(commits, first_bad=5)
    done = run(repo, out, second)
    assert second.ends_compared == 0, "the ends are in the state"
    assert not set(first.measured) & set(second.measured)
    assert len(first.measured) + len(second.measured) <= 4
    assert done.found.first_bad == commits[5]  # type: ignore[attr-defined]
    assert done.exit_code == 0  # type: ignore[attr-defined]
    text = done.text  # type: ignore[attr-defined]
    assert text.startswith(f"first bad commit: {commits[5]} commit 6\n")
    assert "4 step(s): " in text
    saved = json.loads((out / STATE_FILE).read_text())
    assert saved["schema"] == "diskbench-bisect" and len(saved["steps"]) == 4


def test_ends_that_no_cell_separates_end_the_bisection_with_exit_4(repo: Path, tmp_path: Path) -> None:
    class Same(Synthetic):
        def ends(self, good: str, bad: str) -> tuple[dict[str, CellVerdict], list[str]]:
            return cells(a=U), ["a: unchanged"]

    measure = Same([], first_bad=0)
    done = run(repo, tmp_path / "out", measure)
    assert done.exit_code == 4 and measure.measured == []  # type: ignore[attr-defined]
    assert "no cell separates the ends" in done.text  # type: ignore[attr-defined]


def test_the_state_of_another_bisection_is_refused(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    commits = git(repo, "rev-list", "--reverse", "good..bad").split()
    save_state(out, BisectState(good="0" * 40, bad=commits[-1], commits=tuple(commits), spec=SPEC.source))
    with pytest.raises(UsageError, match="another good end"):
        run(repo, out, Synthetic(commits, first_bad=3))
    good = git(repo, "rev-parse", "good")
    save_state(
        out, BisectState(good=good, bad=commits[-1], commits=tuple(commits), spec="test.toml [total_s]")
    )
    with pytest.raises(UsageError, match="another spec"):
        run(repo, out, Synthetic(commits, first_bad=3))
    (out / STATE_FILE).write_text('{"schema": "diskbench-bisect"')
    with pytest.raises(UsageError, match="not a diskbench bisect state"):
        run(repo, out, Synthetic(commits, first_bad=3))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--good", "nope", "--bad", "bad"], "--good 'nope' is not a commit"),
        (["--good", "bad", "--bad", "good"], "is not on the first-parent line of --bad"),
        (["--good", "bad", "--bad", "bad"], "are the same commit"),
        (["--good", "good", "--bad", "bad", "--cell", "x"], "--cell 'x'"),
        (["--good", "good", "--bad", "bad", "--rounds", "0"], "--rounds 0"),
        (["--good", "good", "--bad", "bad", "--metric", "nope"], "--metric 'nope'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    results = tmp_path / "results"
    rc = main(
        [
            "bisect",
            "--repo",
            str(repo),
            *flags,
            "--work-dir",
            str(tmp_path / "w"),
            "--results-dir",
            str(results),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not results.exists()


def test_only_skipped_commits_left_is_exit_1_and_names_them(repo: Path, tmp_path: Path) -> None:
    commits = git(repo, "rev-list", "--reverse", "good..bad").split()

    class SkipsOne(Synthetic):
        def step(self, number: int, commit: str, state: BisectState) -> Step:
            if commit == commits[4]:
                self.measured.append(commit)
                return Step(commit=commit, outcome=Outcome.SKIP, reason="it cannot be measured: no build")
            return super().step(number, commit, state)

    measure = SkipsOne(commits, first_bad=5)
    done = run(repo, tmp_path / "out", measure)
    assert done.exit_code == 4  # type: ignore[attr-defined]
    text = done.text  # type: ignore[attr-defined]
    assert text.startswith("only skipped commits are left: the first bad commit is one of\n")
    assert f"  {commits[4]} commit 5\n  {commits[5]} commit 6\n" in text
    assert f"5     {commits[4][:12]}" in text and "skip" in text


def test_a_step_whose_build_fails_is_skipped_and_one_the_host_fails_stops(tmp_path: Path) -> None:
    from harness.bisect.run import GateMeasure
    from harness.errors import BuildError, WorkDirFull

    class Failing(GateMeasure):
        error: Exception = BuildError("the build command failed for head (c05): make: *** [all] Error 2")

        def compare(self, where: str, base: str, head: str) -> Any:
            raise self.error

    measure = Failing(
        tmp_path,
        SPEC,
        Settings(),
        GateOptions.decide(SPEC, machine(tmp_path), GateAsked(seed=1)),
        tmp_path,
        print,
    )
    state = BisectState(good="g", bad="b", commits=("c05", "b"), spec="s", ends=cells(a=R))
    step = measure.step(1, "c05", state)
    assert step.outcome is Outcome.SKIP
    assert (
        step.reason
        == "it cannot be measured: the build command failed for head (c05): make: *** [all] Error 2"
    )
    measure.error = WorkDirFull("the work dir is full")
    with pytest.raises(WorkDirFull):
        measure.step(1, "c05", state)


def test_with_a_build_command_each_commit_is_built_once_and_a_failed_build_is_a_build_error() -> None:
    import shutil
    import tempfile

    from harness.bisect.builds import Builds
    from harness.errors import BuildError
    from harness.paths import REPO_ROOT

    shared = Path(tempfile.mkdtemp(prefix="diskbench-bisect-test-"))
    shared.chmod(0o755)
    try:
        repo = new_repo(shared / "repo")
        (repo / "policy.toml").write_text((REPO_ROOT / "policy.toml").read_text())
        for name in ("a", "broken"):
            (repo / name).write_text(name)
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", name)
        good, broken = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
        build = (
            "sh -c 'test ! -e broken && mkdir build && cp /bin/true build/qemu-system-x86_64 "
            "&& cp /bin/true build/qemu-img'"
        )
        builds = Builds(repo, build_command=build, default_policy=REPO_ROOT / "policy.toml")
        first = builds.source("base", good)
        again = builds.source("head", good)
        assert first.qemu and first.qemu == again.qemu and again.label == "head"
        assert Path(first.qemu).is_file() and len(builds.checkouts) == 1
        with pytest.raises(BuildError, match="the build command failed"):
            builds.source("head", broken)
        root = builds.root
        builds.close()
        assert not root.exists()
        assert (
            Builds(repo, build_command=None, default_policy=REPO_ROOT / "policy.toml")
            .source("base", good)
            .qemu
            is None
        )
    finally:
        shutil.rmtree(shared, ignore_errors=True)
