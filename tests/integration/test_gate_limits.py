"""A head that stalls its disk ends the gate within its budget, as "head timed out" (real guests)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from gitrepo import clone_project, git, new_repo

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


LOOP_SPEC = """\
name = "loop"
rounds = 2
max_rounds = 2
budget_min = 4
replay_samples = 2
changed_fails = true
metrics = ["replay.wall_s"]
[params]
size = "256M"
fio_size_mib = 16
fio_ios = 200
fio_fsync_ios = 20
[[cells]]
name = "policy-replay"
workload = "fio"
measure = "replay"
"""

#: head's fio workload: the disk rewritten in a loop, never a report
LOOP = """
fio_raw() {
    while :; do
        "$FIO" --name=rewrite --filename="$DISK" --rw=write --bs=1M --direct=1 --size=100% \\
            --output=/dev/null >/dev/null 2>&1
    done
}
"""


def _bytes(path: Path) -> int:
    total = 0
    for entry in path.rglob("*") if path.exists() else ():
        try:
            if entry.is_file() and not entry.is_symlink():
                total += entry.stat().st_blocks * 512
        except OSError:
            continue
    return total


def test_a_head_recipe_whose_fio_rewrites_its_disk_in_a_loop_is_stopped_at_its_recording_cap(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    import re
    import threading

    repo = tmp_path / "repo"
    clone_project(repo)
    git(repo, "tag", "base")
    fio = repo / "images" / "workloads" / "fio.sh"
    fio.write_text(fio.read_text() + LOOP)
    git(repo, "commit", "-q", "-am", "images: fio rewrites the disk, forever")
    spec = tmp_path / "loop.toml"
    spec.write_text(LOOP_SPEC)
    out = tmp_path / "out"
    most = {"work": 0, "log": 0}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            most["work"] = max(most["work"], _bytes(disk_dir))
            for log in disk_dir.glob("*.record.writelog") if disk_dir.exists() else ():
                try:
                    most["log"] = max(most["log"], log.stat().st_size)
                except OSError:
                    pass
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [
                sys.executable, "-m", "harness", "gate", "--repo", str(repo), "--base", "base",
                "--head", "HEAD", "--spec", str(spec), "--out", str(out), "--accel", "tcg",
                "--no-canary", "--seed", "1", "--work-dir", str(disk_dir),
                "--results-dir", str(tmp_path / "results"),
            ],
            capture_output=True,
            text=True,
            timeout=4 * 60 + 60,
            cwd=REPO,
        )  # fmt: skip
    finally:
        done.set()
        watcher.join()
    took = time.monotonic() - t0
    print(f"gate of a looping head: exit {proc.returncode} in {took:.0f} s, work dir at most {most}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    document = json.loads((out / "comparison.json").read_text())
    (cell,) = document["cells"]
    assert cell["verdict"] == "changed", cell
    assert "head's recording stopped: the recording's write log grew to" in cell["reason"]
    cap = re.search(r"past its cap of (\d+) MiB \(4 x base's", cell["reason"])
    assert cap is not None, cell["reason"]
    cap_bytes = int(cap.group(1)) * 2**20
    # checked every 20 ms while the guest runs: a few MiB past the cap at most
    assert most["log"] <= cap_bytes + 16 * 2**20, (most, cap_bytes)
    # the work dir: the recording's image (the 256 MiB disk, qcow2), its log and trace
    assert most["work"] <= 256 * 2**20 + cap_bytes + 160 * 2**20, (most, cap_bytes)
    assert took < 4 * 60 + 60, took


def test_the_default_gate_of_a_head_throttled_to_one_byte_a_second_ends_as_head_timed_out(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    # the default gate: guest cells and replay cells. Its replay cells' streams are recorded before
    # the first round, base's then head's, so head's stalls there whatever order the seed draws for
    # the rounds (seeds 1, 2 and 3 each stopped at "head timed out on policy-replay (its recording,
    # ...)" with no round run): one seed
    seed = 1
    repo = clone_project(tmp_path / "repo")
    git(repo, "tag", "base")
    policy = repo / "policy.toml"
    policy.write_text(
        policy.read_text().replace("[drive.options]\n", '[drive.options]\n"throttling.bps-total" = 1\n', 1)
    )
    git(repo, "commit", "-q", "-am", "policy: one byte a second")
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable, "-m", "harness", "gate", "--repo", str(repo), "--base", "base", "--head", "HEAD",
            "--budget-min", "4", "--out", str(out), "--accel", "tcg", "--seed", str(seed),
            "--work-dir", str(disk_dir), "--results-dir", str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=8 * 60,
        cwd=REPO,
    )  # fmt: skip
    took = time.monotonic() - t0
    first = (proc.stdout.splitlines() or [""])[0]
    print(f"default gate, head throttled, seed {seed}: exit {proc.returncode} in {took:.0f} s: {first}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert first.startswith("## diskbench: REGRESSION (head timed out: "), proc.stdout[:2000]
    document = json.loads((out / "comparison.json").read_text())
    assert any(c["kind"] == "head-timed-out" for c in document["cells"])
    assert document["budget"]["stopped"].startswith("head timed out on ")
    assert took < 6 * 60, took
