"""ci.yml run by act on a push: its jobs' steps as written, on this host.

The ``python`` job installs, lints, type-checks and runs the unit tests: the unit-test step
runs a short subset here (``-k``: the test command runs them all), its other steps as they are.
The ``action`` job runs on the node this host has (its matrix leg of that major version: the
other is named in docs/github.md), and the ``workflows`` job runs the pinned actionlint.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from actkit import World, git

pytestmark = [pytest.mark.integration]

RUN_ID = 9501
UNIT_SUBSET = "tests/unit/test_exit_codes.py"


def host_node_major() -> str:
    return subprocess.run(
        ["node", "-p", "process.versions.node.split('.')[0]"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_ci_jobs_run_their_steps_as_written(act: Path, tmp_path: Path) -> None:
    world = World(root=tmp_path, act_bin=act, api_url="http://127.0.0.1:9")
    tree = tmp_path / "tree"
    world.create_repository(tree)
    # the one change: the unit-test step runs a short subset (the test command runs all of them)
    workflow = tree / ".github" / "workflows" / "ci.yml"
    text = workflow.read_text()
    step = "run: .venv/bin/pytest tests/unit -m 'not integration and not guest'"
    assert text.count(step) == 1, "ci.yml's unit-test step changed: update this test"
    sha = world.commit_files(
        tree,
        {
            workflow.relative_to(tree).as_posix(): text.replace(
                step, f"run: .venv/bin/pytest {UNIT_SUBSET} -m 'not integration and not guest'"
            )
        },
        "ci: a short unit subset",
    )
    world.push(tree, "main")
    workdir = world.working_copy(tmp_path / "workdir", sha)
    event = {
        "ref": "refs/heads/main",
        "before": git(tree, "rev-parse", "HEAD~1"),
        "after": sha,
        "repository": {"full_name": "acme/diskbench", "default_branch": "main"},
    }
    node = host_node_major()

    run = world.act(workdir, "ci.yml", "push", event, RUN_ID, extra_args=("--matrix", f"node:{node}"))

    assert run.rc == 0, run.tail()
    assert run.job_results() == {"python": ["success"], "action": ["success"], "workflows": ["success"]}, (
        run.tail()
    )
    python = run.output("python")
    assert "All checks passed!" in python  # ruff
    assert "Success: no issues found" in python  # mypy
    assert " passed" in python and " failed" not in python
    assert "Test Files" in run.output("action") and "passed" in run.output("action")  # vitest
