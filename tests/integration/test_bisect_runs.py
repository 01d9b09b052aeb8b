"""A real bisection on a throwaway clone: 4 commits on top, the third throttles the policy's writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from gatekit import tcg_gate_options
from gitrepo import git

from harness.bisect import STATE_FILE, Outcome, run_bisect
from harness.compare import Settings
from harness.gate import parse_gate_spec, settings_for

# timed: each comparison's verdict is read from the replays' times; one at a time, never beside another test
pytestmark = [pytest.mark.integration, pytest.mark.guest, pytest.mark.timed]

# the policy's cell replayed, its wall time alone: 2 rounds of 3 pairs a comparison, 6 + 6 samples;
# complete separation has the exact rank p 0.0022 < 0.01
SPEC = """
name = "test-bisect"
rounds = 2
max_rounds = 2
budget_min = 5
metrics = ["replay.wall_s"]
min_effect = "5%"
replay_samples = 3
replay_passes = 1

[[cells]]
name = "policy-replay"
workload = "dd"
dd_mib = 32
# not the default 2 GiB, whose 64 MiB journal made the throttled replay 3 s of the test's 30 such
size = "256M"
measure = "replay"
"""


@pytest.fixture(scope="module")
def repo(project_clone: Callable[[str], Path]) -> Path:
    """A clone of this repository and 4 commits on top; the third writes at 32 MiB/s at most
    (the stream writes about 44 MiB: the 32 MiB of dd and the journal mkfs writes on a 256 MiB
    disk; its replay takes about 0.1 s unthrottled, about 1.2 s throttled)."""
    path = project_clone("bisect")
    git(path, "tag", "good")
    for number in range(1, 5):
        (path / "NOTES.txt").write_text(f"note {number}\n")
        message = f"notes: {number}"
        if number == 3:
            policy = path / "policy.toml"
            text = policy.read_text()
            assert "\n[drive.options]\n" in text
            policy.write_text(
                text.replace(
                    "\n[drive.options]\n", '\n[drive.options]\n"throttling.bps-write" = 33554432\n', 1
                )
            )
            message = "policy: throttle writes to 32 MiB/s"
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", message)
    git(path, "tag", "bad")
    return path


def test_bisect_names_the_commit_that_throttles_the_policy(
    repo: Path, tmp_path: Path, disk_dir: Path, guest: object
) -> None:
    spec = parse_gate_spec(SPEC, source="test-bisect.toml")
    out = tmp_path / "out"
    lines: list[str] = []
    result = run_bisect(
        repo=repo,
        ends=("good", "bad"),
        spec=spec,
        settings=settings_for(spec, Settings()),
        options=tcg_gate_options(spec, disk_dir, out, seed=3),
        out_dir=out,
        progress=lines.append,
    )
    print("\n".join(lines))
    print(result.text)
    injected = git(repo, "rev-parse", "bad~1")
    assert result.found is not None and result.found.first_bad == injected, result.text
    assert result.exit_code == 0
    # 4 commits: 2 steps, neither skipped, each with its evidence against both ends
    assert [s.outcome for s in result.state.steps] in (
        [Outcome.GOOD, Outcome.BAD],
        [Outcome.BAD, Outcome.GOOD],
    ), result.text
    assert result.text.startswith(f"first bad commit: {injected} policy: throttle writes to 32 MiB/s\n")
    assert any(line.startswith("bisect: step 1: against good: policy-replay: ") for line in lines)
    assert "2 step(s): 1 good, 1 bad, 0 skipped" in result.text
    state = json.loads((out / STATE_FILE).read_text())
    assert state["ends"]["policy-replay"]["verdict"] == "regression"
    for step in state["steps"]:
        for side in ("vs-good", "vs-bad"):
            (comparison,) = out.glob(f"steps/*-{step['commit'][:12]}/{side}/comparison.json")
            assert json.loads(comparison.read_text())["cells"][0]["metrics"][0]["n_head"] == 6
    # the streams are recorded once per end for the whole bisection: good's and bad's
    assert len(list((out / "streams").glob("*.key.json"))) == 2
