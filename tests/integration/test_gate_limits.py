"""A head that stalls its disk ends the gate within its budget, as "head timed out" (real guests)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from gitrepo import git, new_repo

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]

SPEC = """\
name = "stall"
rounds = 2
max_rounds = 2
budget_min = 4
metrics = ["total_s"]
[params]
dd_mib = 8
size = "256M"
[[cells]]
name = "policy-dd"
workload = "dd"
"""


def test_a_head_throttled_to_one_byte_a_second_ends_the_gate_within_its_budget_as_head_timed_out(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    policy = (REPO / "policy.toml").read_text()
    (repo / "policy.toml").write_text(policy)
    git(repo, "add", "policy.toml")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    (repo / "policy.toml").write_text(
        policy.replace("[drive.options]\n", '[drive.options]\n"throttling.bps-total" = 1\n', 1)
    )
    git(repo, "commit", "-q", "-am", "policy: one byte a second")
    spec = tmp_path / "stall.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable, "-m", "harness", "gate", "--repo", str(repo), "--base", "base", "--head", "main",
            "--spec", str(spec), "--out", str(out), "--accel", "tcg", "--no-canary", "--seed", "1",
            "--work-dir", str(disk_dir), "--results-dir", str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )  # fmt: skip
    took = time.monotonic() - t0
    print(f"gate of a stalled head: exit {proc.returncode} in {took:.0f} s")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("## diskbench: REGRESSION (head timed out: "), proc.stdout
    document = json.loads((out / "comparison.json").read_text())
    (cell,) = document["cells"]
    assert (cell["verdict"], cell["kind"]) == ("regression", "head-timed-out")
    assert document["budget"]["stopped"].startswith("head timed out on policy-dd")
    # within the budget of 4 minutes, plus the checkout and the guest's start
    assert took < 4 * 60 + 90, took
