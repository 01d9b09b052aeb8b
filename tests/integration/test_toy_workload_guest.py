"""A new workload is one module and its guest script: registered beside a recipe that ships the
script, it runs in a real guest and shows in `show`, the report and history's layout, with no
other file of the harness or the guest's init naming it."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.cli import main
from harness.guest import build_guest
from harness.paths import IMAGES_DIR, REPO_ROOT
from harness.record import load_record
from harness.rounds.session import MachineOptions, SessionOptions, run_cells
from harness.spec import make_cell
from harness.subject.binaries import Binaries
from harness.workloads import registry

pytestmark = [pytest.mark.integration, pytest.mark.guest]

UNIT = REPO_ROOT / "tests" / "unit"


@pytest.fixture
def toy() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("toy_workload", UNIT / "toy_workload.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry.register(module)
    try:
        yield module
    finally:
        registry.unregister("toy")


def test_a_toy_workload_runs_in_a_guest_and_shows_in_show_report_and_history(
    toy: ModuleType, tmp_path: Path, disk_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = tmp_path / "images"
    shutil.copytree(IMAGES_DIR, images)
    shutil.copy(UNIT / "toy_workload.sh", images / "workloads" / "toy.sh")
    guest: Any = build_guest(recipe_dir=images, log=lambda _msg: None)
    results = tmp_path / "results"
    machine = MachineOptions(
        binaries=Binaries.on_path(), work_dir=disk_dir, results_dir=results, accel="tcg", start="cold"
    )
    cell = make_cell(workload="toy", toy_blocks=4, format="raw", size="1G")
    result = run_cells([cell], SessionOptions(machine, repeat=1), guest=guest)
    (path,) = sorted(result.run_dir.glob("*.json"))
    (sample,) = load_record(path).samples
    assert sample.ok, sample.reason
    assert sample.metrics["bytes"] == 4 * 2**20
    assert sample.metrics["mib_per_s"] > 0
    assert {"phase.mkfs_s", "phase.toy_s", "phase.fsck_s"} <= set(sample.metrics)

    capsys.readouterr()
    assert main(["show", str(result.run_dir)]) == 0
    shown = capsys.readouterr().out
    assert "toy rate" in shown and "toy-4b-ext4" in shown, shown

    assert main(["report", str(result.run_dir), "--markdown", str(tmp_path / "report.md")]) == 0
    assert "toy (blocks written)" in (tmp_path / "report.md").read_text()

    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    from history.layout import workload_figures

    figures = [f.metric for f in workload_figures("toy")]
    assert figures[:4] == ["total_s", "phase.mkfs_s", "phase.toy_s", "phase.fsck_s"]
