"""A new workload is one module: registered, it goes through spec files, the run flags, cell
ids, kernel args, planning, records, the run's table, the report's titles, history's figures and
the guest-tools check without any other module naming it."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from harness.cli import build_parser
from harness.cli.run import cells_from_args
from harness.errors import SpecError
from harness.record import load_record, new_record, record_path, write_record
from harness.spec import Cell, Workload, make_cell
from harness.sweep import estimate_workload_s, expand_spec, parse_spec, workload_write_bytes
from harness.workloads import parse_outputs, registry

MIB = 1024**2


def _load_toy() -> ModuleType:
    path = Path(__file__).with_name("toy_workload.py")
    spec = importlib.util.spec_from_file_location("toy_workload", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def toy() -> Iterator[ModuleType]:
    module = _load_toy()
    registry.register(module)
    try:
        yield module
    finally:
        registry.unregister("toy")


def test_a_registered_workload_makes_cells_with_its_parameters(toy: ModuleType) -> None:
    cell = make_cell(workload="toy", toy_blocks=16, fs="ext2", format="raw")
    assert cell.workload.name is Workload("toy")
    assert cell.workload.toy_blocks == 16
    assert cell.id == "raw-off-2g.writeback-threads-virtio-blk.toy-16b-ext2"
    assert cell.workload.kernel_args() == [
        "diskbench.workload=toy",
        "diskbench.fs=ext2",
        "diskbench.toy_blocks=16",
    ]
    # its own checks, and the one it shares with dd, bonnie and mkfs
    with pytest.raises(SpecError, match=r"^toy_blocks 0: use a whole number from 1 to 1000$"):
        make_cell(workload="toy", toy_blocks=0)
    with pytest.raises(SpecError, match=r"^unknown filesystem 'xfs': use one of ext4, ext2$"):
        make_cell(workload="toy", fs="xfs")
    with pytest.raises(SpecError, match=r"^toy of 900 MiB does not fit the disk"):
        make_cell(workload="toy", toy_blocks=900, size="1G")
    # its disk check is its cells' only: a dd cell does not care
    assert make_cell(workload="dd", toy_blocks=900, size="1G", dd_mib=64).workload.toy_blocks == 900
    # planning asks the workload
    assert estimate_workload_s(cell) == 7.0 + 16
    assert workload_write_bytes(cell) == 16 * MIB + 128 * MIB
    assert parse_outputs("toy", {}) == ({}, {})


def test_a_sweep_spec_takes_its_parameters(toy: ModuleType) -> None:
    spec = parse_spec(
        '[axes]\nworkload = ["toy"]\ntoy_blocks = [4, 8]\n\n[params]\nfs = "ext2"\nsize = "1G"\n',
        source="toy.toml",
    )
    plan = expand_spec(spec)
    assert [c.workload.slug for c in plan.cells] == ["toy-4b-ext2", "toy-8b-ext2"]
    with pytest.raises(SpecError, match=r"^toy\.toml:3: toy_blocks 'many' is str, not an integer"):
        parse_spec('[axes]\nworkload = ["toy"]\ntoy_blocks = ["many"]\n', source="toy.toml")


def test_the_run_command_has_its_flag(toy: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["run", "--workload", "toy,dd", "--toy-blocks", "32", "--fs", "ext2"])
    cells, skipped = cells_from_args(args)
    assert skipped == []
    assert [c.workload.slug for c in cells] == ["toy-32b-ext2", "dd-256m-2m-ext2"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    run_help = " ".join(capsys.readouterr().out.split())
    assert "--toy-blocks TOY_BLOCKS" in run_help
    assert "toy: MiB the toy writes (default: 8)" in run_help
    assert "dd, bonnie, mkfs, toy: filesystem (ext4, ext2)" in run_help
    assert "guest workload: install,dd,bonnie,mkfs,fio,toy" in run_help


def test_its_record_is_written_and_read_back(toy: ModuleType, tmp_path: Path) -> None:
    cell = make_cell(workload="toy", toy_blocks=3)
    record = new_record(cell=cell.as_dict(), machine={"accel": "tcg"}, subject={}, vm={}, run_id="r1")
    path = record_path(tmp_path, "r1", cell.id)
    write_record(path, record)
    loaded = load_record(path)
    assert loaded.cell.to_json() == json.loads(json.dumps(cell.as_dict()))
    assert list(loaded.cell.workload)[-1] == "toy_blocks"
    assert Cell.from_dict(loaded.cell.data) == cell


def test_unregistered_it_is_unknown_again() -> None:
    registry.register(_load_toy())
    registry.unregister("toy")
    with pytest.raises(
        SpecError, match=r"^unknown workload 'toy': use one of install, dd, bonnie, mkfs, fio$"
    ):
        make_cell(workload="toy")
    with pytest.raises(TypeError, match="toy_blocks"):
        make_cell(toy_blocks=3)
    assert "toy_blocks" not in make_cell().as_dict()["workload"]


def test_its_table_title_history_figures_and_tools_come_from_its_entry(
    toy: ModuleType, tmp_path: Path
) -> None:
    import dataclasses
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from history.layout import workload_figures

    from harness.record import Sample
    from harness.report.families import workload_words
    from harness.report.summary import render_group
    from harness.sweep.preflight import check_tools

    cell = make_cell(workload="toy", toy_blocks=3)
    record = new_record(cell=cell.as_dict(), machine={"accel": "tcg"}, subject={}, vm={}, run_id="r1")
    sample = Sample(index=0, status="ok", metrics={"mib_per_s": 42.0, "total_s": 1.5, "phase.toy_s": 1.0})
    record = dataclasses.replace(record, samples=(sample,))
    table = "\n".join(render_group("toy", [record]))
    assert "toy rate" in table and "42.0" in table, table
    assert workload_words("toy") == "toy (blocks written)"
    names = [f.metric for f in workload_figures("toy")]
    assert names[:4] == ["total_s", "phase.mkfs_s", "phase.toy_s", "phase.fsck_s"]
    assert "bytes" in names
    with pytest.raises(SpecError, match="the toy workload needs toytool on the guest's tools drive"):
        check_tools([cell])


def test_a_workload_without_words_or_headlines_is_refused_when_registered() -> None:
    import dataclasses

    module = _load_toy()
    module.WORKLOAD = dataclasses.replace(module.WORKLOAD, words="")
    with pytest.raises(ValueError, match="workload toy declares no words or no headlines"):
        registry.register(module)
    assert "toy" not in registry.names()
