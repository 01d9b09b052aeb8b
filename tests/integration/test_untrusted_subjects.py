"""A pull request's policy, recipe and guest are untrusted: attacks end before QEMU runs, or in a box.

Each test here is an attack that worked on the runner before: a policy that
put ``/etc/shadow`` behind the disk under test (the sample was "ok" and QEMU
held the file open).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gitrepo import git

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]

SHADOW_POLICY = """\
[image]
format = "qcow2"

[drive.options]
"backing.driver" = "raw"
"backing.file.driver" = "file"
"backing.file.filename" = "/etc/shadow"
"""


def test_sweep_refuses_a_policy_that_reaches_a_host_file_before_anything_runs(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    spec = tmp_path / "one.toml"
    spec.write_text(
        'name = "one"\nrepeat = 1\n\n[axes]\nformat = ["qcow2"]\n\n'
        '[params]\nworkload = "dd"\ndd_mib = 8\nsize = "256M"\n'
    )
    policy = tmp_path / "policy.toml"
    policy.write_text(SHADOW_POLICY)
    results = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable, "-m", "harness", "sweep", "--policy", str(policy), str(spec),
            "--accel", "tcg", "--work-dir", str(disk_dir), "--results-dir", str(results),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        f"diskbench: error: {policy}: [drive.options] 'backing.driver' is not a -drive option a policy "
        "may set: use throttling.* (bps-write, iops-total, ...), detect-zeroes, discard, copy-on-read, "
        "werror, rerror, l2-cache-size, refcount-cache-size or cache-clean-interval"
    )
    assert "Traceback" not in proc.stderr
    # nothing ran: no image was created, no record or log written
    assert not results.exists()
    assert not disk_dir.exists() or not any(disk_dir.iterdir())


@pytest.fixture(scope="module")
def hostile_repo(project_clone: Callable[[str], Path]) -> Path:
    """A clone of this repository with a hostile head per attack: tags ``policy`` and ``symlink``."""
    path = project_clone("hostile")
    git(path, "tag", "base")
    policy = path / "policy.toml"
    policy.write_text(
        policy.read_text().replace(
            "[drive.options]\n", "[drive.options]\n" + SHADOW_POLICY.split("\n", 4)[4], 1
        )
    )
    git(path, "commit", "-q", "-am", "policy: a backing file")
    git(path, "tag", "policy")
    git(path, "checkout", "-q", "base")
    (path / "images" / "workloads" / "evil.sh").symlink_to("/etc/shadow")
    git(path, "add", "images/workloads/evil.sh")
    git(path, "commit", "-q", "-m", "images: a workload that is /etc/shadow")
    git(path, "tag", "symlink")
    return path


@pytest.mark.parametrize(
    ("head", "message"),
    [
        ("policy", "[drive.options] 'backing.driver' is not a -drive option a policy may set"),
        ("symlink", "images/workloads/evil.sh is a symlink to /etc/shadow, outside images/"),
    ],
)
def test_a_gate_refuses_a_hostile_head_with_exit_2_before_anything_runs(
    guest: Any, hostile_repo: Path, tmp_path: Path, disk_dir: Path, head: str, message: str
) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable, "-m", "harness", "gate", "--repo", str(hostile_repo), "--base", "base",
            "--head", head, "--out", str(out), "--accel", "tcg", "--no-canary",
            "--work-dir", str(disk_dir), "--results-dir", str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "comparison.json").exists()
    assert not disk_dir.exists() or not any(disk_dir.glob("*.qcow2")), "no image was created"
