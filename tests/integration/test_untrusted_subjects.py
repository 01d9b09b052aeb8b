"""A pull request's policy, recipe and guest are untrusted: attacks end before QEMU runs, or in a box.

Each test here is an attack that worked on the runner before: a policy that
put ``/etc/shadow`` behind the disk under test (the sample was "ok" and QEMU
held the file open).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
