"""The host-side qemu-img benchmarks save JSON, and their compare gate passes and fails.

Runs ``benchmarks/test_qemu_img.py`` (one case, at the smallest size) in a
subprocess, as a user or CI job would, with its results in a private storage.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.host import proc
from harness.paths import REPO_ROOT

pytestmark = pytest.mark.integration

CASE = "test_create_preallocation and raw-off"
TIME_STATS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total")


def _bench(disk_dir: Path, storage: Path, *flags: str) -> proc.CommandResult:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "benchmarks/test_qemu_img.py",
        "-p",
        "no:cacheprovider",
        "-k",
        CASE,
        "--qemu-img-size=64M",
        "--qemu-img-rounds=3",
        f"--benchmark-storage=file://{storage}",
        *flags,
    ]
    disk_dir.mkdir(parents=True, exist_ok=True)
    return proc.run(
        argv, timeout_s=120, check=False, cwd=REPO_ROOT, env={"DISKBENCH_WORK_DIR": str(disk_dir)}
    )


def _saved(storage: Path) -> list[Path]:
    return sorted(storage.glob("*/*.json"))


def test_saved_runs_compare_and_the_gate_fails_on_a_regression(
    disk_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run as a user would: not as a worker of this suite spread over CPUs (pytest -n), where
    # pytest-benchmark, seeing the worker's environment, would measure and save nothing
    for key in [k for k in os.environ if k.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(key)
    storage = tmp_path / "pytest-benchmark"
    for _ in range(2):
        saved = _bench(disk_dir, storage, "--benchmark-autosave")
        assert saved.returncode == 0, saved.stdout[-3000:] + saved.stderr[-2000:]
    files = _saved(storage)
    assert [p.name[:4] for p in files] == ["0001", "0002"]

    data = json.loads(files[-1].read_text())
    (bench,) = data["benchmarks"]
    assert bench["name"] == "test_create_preallocation[64M-raw-off]"
    assert bench["stats"]["rounds"] == 3
    assert bench["extra_info"]["format"] == "raw"
    assert bench["extra_info"]["preallocation"] == "off"
    assert bench["extra_info"]["size"] == 64 * 1024**2
    assert bench["extra_info"]["allocated_bytes"] < 1024**2
    assert "qemu-img version" in data["machine_info"]["qemu_img"]["version"]

    # against a real baseline, a generous gate passes
    same = _bench(disk_dir, storage, "--benchmark-compare", "--benchmark-compare-fail=min:1000%")
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-2000:]
    assert "Comparing against benchmarks from" in same.stdout + same.stderr

    # against a baseline 100x faster than this host can be, the same gate fails
    for key in TIME_STATS:
        bench["stats"][key] /= 100
    bench["stats"]["ops"] *= 100
    files[-1].write_text(json.dumps(data))
    slower = _bench(disk_dir, storage, "--benchmark-compare", "--benchmark-compare-fail=min:1000%")
    out = slower.stdout + slower.stderr
    assert slower.returncode != 0, out[-3000:]
    assert "Performance has regressed" in out
    assert "test_create_preallocation[64M-raw-off]" in out
    assert "Field 'min' has failed PercentageRegressionCheck" in out
    assert not any(disk_dir.iterdir()), "the benchmark left images in the work dir"
