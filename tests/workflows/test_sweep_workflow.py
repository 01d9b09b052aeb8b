"""sweep.yml run by act on workflow_dispatch: plan, a matrix of two shards, merge and report.

The spec is tests/workflows/data/sweep-two-cells.toml (two dd cells, one sample, under TCG): the
plan's matrix must have two entries, each shard sweeps its one cell and uploads its records as
``sweep-shard-K``, and the report job downloads them by pattern, merges them, and uploads a
report in which each cell is once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from actkit import World

pytestmark = [pytest.mark.integration, pytest.mark.guest]

RUN_ID = 7001
SPEC = "tests/workflows/data/sweep-two-cells.toml"
CELLS = 2


def records(directory: Path) -> dict[str, dict[str, object]]:
    """cell id -> record, of the record JSON files under ``directory``."""
    found: dict[str, dict[str, object]] = {}
    for path in sorted(directory.rglob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "cell" in data:
            cell = data["cell"]
            cell_id = cell.get("id") if isinstance(cell, dict) else cell
            assert cell_id not in found, f"{cell_id} twice: {found[str(cell_id)]} and {path}"
            found[str(cell_id)] = {"path": str(path), **data}
    return found


def test_two_shards_sweep_their_halves_and_the_report_has_every_cell_once(act: Path, tmp_path: Path) -> None:
    world = World(root=tmp_path, act_bin=act, api_url="http://127.0.0.1:9")
    sha = world.create_repository(tmp_path / "tree")
    workdir = world.working_copy(tmp_path / "workdir", sha)
    event = {
        "ref": "refs/heads/main",
        "inputs": {"spec": SPEC, "only": "", "repeat": "1", "shards": "2"},
        "repository": {"full_name": "acme/diskbench"},
    }

    run = world.act(workdir, "sweep.yml", "workflow_dispatch", event, RUN_ID, suite_venvs=True)

    assert run.rc == 0, run.tail()
    assert run.job_results() == {
        "plan": ["success"],
        "shard": ["success", "success"],
        "report": ["success"],
    }, run.tail()
    assert "shards=[1, 2]" in run.output("plan")
    shard_cells = [records(world.artifact(RUN_ID, f"sweep-shard-{k}")) for k in (1, 2)]
    assert [len(cells) for cells in shard_cells] == [1, 1], shard_cells
    assert set(shard_cells[0]).isdisjoint(shard_cells[1])
    report = world.artifact(RUN_ID, "sweep-report")
    merged = records(report / "records")
    assert sorted(merged) == sorted([*shard_cells[0], *shard_cells[1]])
    assert len(merged) == CELLS
    # the report's table: one row a cell (the axis that differs: format), each with its one sample
    markdown = (report / "report.md").read_text()
    rows = [line for line in markdown.splitlines() if line.startswith(("| raw |", "| qcow2 |"))]
    assert sorted(row.split("|")[1].strip() for row in rows) == ["qcow2", "raw"], markdown
    assert all(row.rstrip().endswith("| 1/1 |") for row in rows), rows
