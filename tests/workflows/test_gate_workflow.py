"""gate.yml -> gate-reusable.yml -> gate-comment.yml, run by act with real event payloads.

The repository is this project with the small gate spec (tests/workflows/data/gate-small.toml)
as its default; its pull request ``slow-writes`` throttles writes in the storage policy. It is
#7 from a branch of the repository and #8 from the fork ``fork/diskbench`` (whose head GitHub
keeps as ``refs/pull/8/head``). The approval the bench job's ``if:`` carries: a same-repository
pull request runs, a fork's runs only when labeled ``safe-to-bench``, for the head of that
event. The labeled fork's gate runs for real (TCG), its comparison is the artifact that
gate-comment.yml, on the gate run's ``workflow_run`` event, downloads and posts as one comment
(updated, not duplicated, when it runs again), with a job summary, and the label is removed, at
the loopback FakeGitHub.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from actkit import FULL_NAME, HERE, World, fake_github, git, read_state

pytestmark = [pytest.mark.integration, pytest.mark.guest]

THROTTLE_BPS = 8 * 1024 * 1024
SAME_REPO_PR = 7
FORK_PR = 8
FORK = "fork/diskbench"
GATE_RUN = 8101


@dataclass
class GateWorld:
    world: World
    workdir: Path
    base: str
    head: str
    state: Path


@pytest.fixture(scope="module")
def gate_world(act: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GateWorld]:
    root = tmp_path_factory.mktemp("gate-workflow")
    world = World(root=root, act_bin=act)
    tree = root / "tree"
    world.create_repository(tree)
    base = world.commit_files(
        tree,
        {"harness/data/gate.toml": (HERE / "data" / "gate-small.toml").read_text()},
        "the workflow tests' gate spec",
    )
    world.push(tree, "main")
    git(tree, "checkout", "-q", "-b", "slow-writes")
    policy = (tree / "policy.toml").read_text()
    throttled = policy.replace(
        "[drive.options]\n", f'[drive.options]\n"throttling.bps-write" = {THROTTLE_BPS}\n', 1
    )
    assert throttled != policy
    head = world.commit_files(tree, {"policy.toml": throttled}, "policy: throttle writes")
    world.push(
        tree,
        "slow-writes",
        f"slow-writes:refs/pull/{SAME_REPO_PR}/head",
        f"slow-writes:refs/pull/{FORK_PR}/head",
    )
    world.remote(FORK).parent.mkdir(parents=True, exist_ok=True)
    git(tree, "init", "-q", "--bare", str(world.remote(FORK)))
    world.push(tree, "slow-writes", to=FORK)
    workdir = world.working_copy(root / "workdir", base)
    World.link_checkout(workdir, "diskbench")
    pulls = [
        {
            "number": n,
            "state": "open",
            "head": {"sha": head, "ref": "slow-writes", "label": f"{owner}:slow-writes"},
        }
        for n, owner in ((SAME_REPO_PR, "acme"), (FORK_PR, "fork"))
    ]
    seed = {
        "pulls": pulls,
        "labels": {str(FORK_PR): ["safe-to-bench", "storage"]},
        "artifacts": str(world.artifacts),
    }
    with fake_github(root, seed) as (url, state):
        world.api_url = url
        yield GateWorld(world, workdir, base, head, state)


def pr_event(
    gw: GateWorld, number: int, action: str, head_repo: str, label: str | None = None
) -> dict[str, Any]:
    repository = {
        "full_name": FULL_NAME,
        "name": "diskbench",
        "owner": {"login": "acme"},
        "default_branch": "main",
    }
    event: dict[str, Any] = {
        "action": action,
        "number": number,
        "pull_request": {
            "number": number,
            "head": {"sha": gw.head, "ref": "slow-writes", "repo": {"full_name": head_repo}},
            "base": {"sha": gw.base, "ref": "main", "repo": repository},
        },
        "repository": repository,
    }
    if label:
        event["label"] = {"name": label}
    return event


def run_name(gw: GateWorld, event: dict[str, Any], run_id: int) -> str:
    """gate.yml's ``run-name`` for ``event``, evaluated by act (act itself does not name runs)."""
    expression = yaml.safe_load((gw.workdir / ".github/workflows/gate.yml").read_text())["run-name"]
    probe = gw.world.root / f"run-name-{run_id}.yml"
    probe.write_text(
        "on: pull_request_target\njobs:\n  name:\n    runs-on: ubuntu-latest\n    steps:\n"
        f'      - env:\n          TITLE: {json.dumps(expression)}\n        run: echo "display_title=$TITLE"\n'
    )
    run = gw.world.act(gw.workdir, str(probe), "pull_request_target", event, run_id)
    assert run.rc == 0, run.tail()
    titles = [
        line.split("=", 1)[1] for line in run.output().splitlines() if line.startswith("display_title=")
    ]
    assert len(titles) == 1, run.output()
    return titles[0]


def workflow_run_event(gw: GateWorld, run_id: int, title: str, conclusion: str) -> dict[str, Any]:
    repository = {"full_name": FULL_NAME, "name": "diskbench", "owner": {"login": "acme"}}
    return {
        "action": "completed",
        "workflow_run": {
            "id": run_id,
            "name": "gate",
            "event": "pull_request_target",
            "path": ".github/workflows/gate.yml",
            "display_title": title,
            "conclusion": conclusion,
            "head_sha": gw.base,
            "head_branch": "main",
            "repository": repository,
            "head_repository": repository,
            "pull_requests": [],
        },
        "repository": repository,
    }


def test_a_fork_without_the_label_runs_no_job(gate_world: GateWorld) -> None:
    event = pr_event(gate_world, FORK_PR, "synchronize", FORK)
    run = gate_world.world.act(gate_world.workdir, "gate.yml", "pull_request_target", event, 8001)
    assert run.rc == 0, run.tail()
    assert run.job_results() == {"bench": ["skipped"]}, run.tail()
    assert not gate_world.world.artifact(8001, "gate-comparison").exists()


def test_a_fork_labeled_with_another_label_runs_no_job(gate_world: GateWorld) -> None:
    event = pr_event(gate_world, FORK_PR, "labeled", FORK, label="storage")
    run = gate_world.world.act(gate_world.workdir, "gate.yml", "pull_request_target", event, 8002)
    assert run.rc == 0, run.tail()
    assert run.job_results() == {"bench": ["skipped"]}, run.tail()


def test_a_same_repository_pull_request_runs_the_bench_job_at_its_head(gate_world: GateWorld) -> None:
    # the job runs and checks the pull request's head out; the run ends there (the labeled fork's
    # below goes on to the gate, its artifact and the comment)
    event = pr_event(gate_world, SAME_REPO_PR, "opened", FULL_NAME)
    run = gate_world.world.act(
        gate_world.workdir,
        "gate.yml",
        "pull_request_target",
        event,
        8003,
        stop_at=f"checked out {FULL_NAME} at {gate_world.head}",
    )
    assert run.rc == -1, run.tail()
    checkouts = [line for line in run.output("gate").splitlines() if line.startswith("checked out ")]
    assert [line.split()[4] for line in checkouts] == [gate_world.base, gate_world.head], checkouts


def test_a_labeled_fork_is_gated_at_its_head_and_the_verdict_is_posted_once(gate_world: GateWorld) -> None:
    gw = gate_world
    event = pr_event(gw, FORK_PR, "labeled", FORK, label="safe-to-bench")
    gate = gw.world.act(gw.workdir, "gate.yml", "pull_request_target", event, GATE_RUN)

    # the gate ran for the event's head, wrote its comparison, and it is the run's artifact
    checkouts = [line for line in gate.output("gate").splitlines() if line.startswith("checked out ")]
    assert [line.split()[4] for line in checkouts] == [gw.base, gw.head], checkouts
    assert gate.job_results() == {"gate": ["success" if gate.rc == 0 else "failure"]}, gate.tail()
    artifact = gw.world.artifact(GATE_RUN, "gate-comparison")
    assert sorted(p.name for p in artifact.iterdir()) == ["comparison.json", "summary.md"], gate.tail()
    comparison = json.loads((artifact / "comparison.json").read_text())
    assert gw.head in (artifact / "comparison.json").read_text()
    verdict = comparison["verdict"]
    assert verdict in ("regression", "inconclusive", "improvement", "unchanged"), verdict
    assert gate.rc == (1 if verdict == "regression" else 0), gate.tail()
    # the reusable workflow's outputs, as a caller's `needs.<job>.outputs` gets them
    assert gate.evaluated("jobs.gate.outputs.verdict") == [verdict], gate.tail()
    regressions = sum(1 for cell in comparison["cells"] if cell.get("verdict") == "regression")
    assert gate.evaluated("jobs.gate.outputs.regressions") == [str(regressions)], gate.tail()

    title = run_name(gw, event, GATE_RUN + 1)
    assert title == f"gate: pull request #{FORK_PR} at {gw.head}"
    conclusion = "success" if gate.rc == 0 else "failure"
    comment_event = workflow_run_event(gw, GATE_RUN, title, conclusion)

    first = gw.world.act(gw.workdir, "gate-comment.yml", "workflow_run", comment_event, GATE_RUN + 2)
    assert first.rc == 0, first.tail()
    assert first.job_results() == {"comment": ["success"], "unlabel": ["success"]}, first.tail()
    state = read_state(gw.state)
    comments = [c for c in state["comments"] if c["issue"] == FORK_PR]
    assert len(comments) == 1, state["comments"]
    assert comments[0]["user"]["login"] == "github-actions[bot]"
    assert "policy-dd" in comments[0]["body"], comments[0]["body"]
    assert state["labels"][str(FORK_PR)] == ["storage"]
    assert f"removed safe-to-bench from #{FORK_PR}" in first.output("unlabel")
    summaries = gw.world.summaries_of(GATE_RUN + 2)
    assert len(summaries) == 1 and "policy-dd" in summaries[0], summaries
    posted = [r for r in state["requests"] if r["method"] in ("POST", "PATCH", "DELETE")]
    # the two jobs run in either order
    assert sorted((r["method"], r["url"].split("/repos/acme/diskbench")[-1]) for r in posted) == [
        ("DELETE", f"/issues/{FORK_PR}/labels/safe-to-bench"),
        ("POST", f"/issues/{FORK_PR}/comments"),
    ], posted

    # the same run's comment again (a re-run): the comment is updated, not duplicated
    again = gw.world.act(gw.workdir, "gate-comment.yml", "workflow_run", comment_event, GATE_RUN + 3)
    assert again.rc == 0, again.tail()
    state = read_state(gw.state)
    assert [c["id"] for c in state["comments"] if c["issue"] == FORK_PR] == [comments[0]["id"]]
    assert [r["method"] for r in state["requests"] if r["method"] in ("POST", "PATCH")] == ["POST", "PATCH"]
