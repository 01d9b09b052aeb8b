"""Real sweeps under TCG: a small matrix end to end, and a sweep killed mid-way and resumed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from procs import alive, children

from harness.cli import main
from harness.record import load_record

pytestmark = [pytest.mark.integration, pytest.mark.guest]

REPO = Path(__file__).resolve().parents[2]


def write_spec(path: Path, name: str, axes: dict[str, list[str]]) -> Path:
    lines = [f'name = "{name}"', "repeat = 1", "", "[axes]"]
    lines += [f"{key} = {json.dumps(values)}" for key, values in axes.items()]
    lines += ["", "[params]", 'workload = "dd"', "dd_mib = 16", 'size = "256M"']
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_small_matrix_runs_every_cell_once(
    guest: Any, tmp_path: Path, disk_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(
        tmp_path / "small.toml",
        "small",
        {
            "format": ["raw", "qcow2"],
            "cache": ["none", "writeback"],
            "interface": ["virtio-blk", "ide", "ahci"],
        },
    )
    results = tmp_path / "results"
    rc = main(
        ["sweep", str(spec), "--accel", "tcg", "--work-dir", str(disk_dir), "--results-dir", str(results)]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err[-3000:]
    records = [load_record(p).to_json() for p in sorted((results / "sweeps" / "small").glob("*.json"))]
    assert len(records) == 12
    combos = {
        (r["cell"]["image"]["format"], r["cell"]["drive"]["cache"], r["cell"]["drive"]["interface"])
        for r in records
    }
    assert len(combos) == 12
    for record in records:
        (sample,) = record["samples"]
        assert sample["status"] == "ok", (record["cell"]["id"], sample.get("reason"))
        assert sample["metrics"]["bytes"] == 16 * 1024**2
        assert record["vm"]["accel"] == "tcg"
        console = Path(sample["logs"]["console"])
        assert console.is_relative_to(results / "sweeps" / "small" / "logs" / record["cell"]["id"])
    # the summary: one line per cell, each with its one ok sample of one
    assert "dd: 12 cells" in out and len(re.findall(r" 1/1 ", out)) == 12, "a line for every cell"
    assert "12 samples run, 0 resumed" in out
    assert "sweep: 12/12 samples (100%)" in err
    assert not list(disk_dir.glob("*.raw")) and not list(disk_dir.glob("*.qcow2"))


def test_a_sweep_killed_mid_way_resumes_without_rerunning_what_is_recorded(
    guest: Any, tmp_path: Path, disk_dir: Path
) -> None:
    spec = write_spec(
        tmp_path / "kill.toml", "kill", {"format": ["qcow2"], "interface": ["virtio-blk", "ide", "ahci"]}
    )
    results = tmp_path / "results"
    directory = results / "sweeps" / "kill"
    argv = [sys.executable, "-m", "harness", "sweep", str(spec), "--accel", "tcg"]
    argv += ["--work-dir", str(disk_dir), "--results-dir", str(results)]
    log = (tmp_path / "first.log").open("wb")
    sweep = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    qemu: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 300
        while not list(directory.glob("*.json")):
            assert sweep.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no record within 300 s"
            time.sleep(0.2)
        # the next cell's guest is starting: kill the sweep with a sample in flight
        while not qemu:
            qemu = {p: c for p, c in children(sweep.pid).items() if c.startswith("qemu-system")}
            assert time.monotonic() < deadline, "no QEMU of the second cell"
            time.sleep(0.05)
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=30)
        gone_by = time.monotonic() + 30
        while any(alive(p, c) for p, c in qemu.items()) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not any(alive(p, c) for p, c in qemu.items()), f"QEMU outlived its killed harness: {qemu}"
    finally:
        log.close()
        if sweep.poll() is None:
            os.kill(sweep.pid, signal.SIGKILL)
            sweep.wait()
        for pid, comm in qemu.items():  # never leave our QEMU behind, even when the test fails
            if alive(pid, comm):
                os.kill(pid, signal.SIGKILL)

    before = {p.name: p.read_bytes() for p in directory.glob("*.json")}
    assert 1 <= len(before) < 3
    rerun = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"resuming: {len(before)} of 3 samples are recorded already and are skipped" in rerun.stderr
    assert f"{3 - len(before)} samples run, {len(before)} resumed" in rerun.stdout
    after = {p.name: p.read_bytes() for p in directory.glob("*.json")}
    assert len(after) == 3
    for name, content in before.items():
        assert after[name] == content, f"{name} was run again"
    for name in after:
        (sample,) = load_record(directory / name).to_json()["samples"]
        assert sample["status"] == "ok", sample.get("reason")
    assert not list(directory.glob(".*.tmp")) and not list(disk_dir.glob("*.qcow2"))
