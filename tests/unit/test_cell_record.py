"""A cell's record bytes, kernel args and id per workload, pinned to what they were before
the workloads declared their own parameters: a record written today must read as one written then."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

from harness.spec import Cell, make_cell

# (keywords, Cell.as_dict() as JSON, kernel args)
PINNED: dict[str, tuple[dict[str, Any], str, list[str]]] = {
    "install": (
        {
            "workload": "install",
            "payload": "small",
            "format": "raw",
            "preallocation": "falloc",
            "size": "4G",
            "cache": "none",
            "aio": "native",
        },
        '{"image": {"format": "raw", "preallocation": "falloc", "size": 4294967296, "cluster_size": null, "lazy_refcounts": false, "compat": null, "encrypt": "none"}, "drive": {"cache": "none", "aio": "native", "interface": "virtio-blk"}, "workload": {"name": "install", "payload": "small", "dd_mib": 256, "dd_chunk_mib": 2, "fs": "ext4", "bonnie_size_mib": 512, "bonnie_ram_mib": 256, "bonnie_files": 0, "fio_target": "both", "fio_size_mib": 64, "fio_ios": 2000, "fio_fsync_ios": 200}, "cache_state": "fresh", "id": "raw-falloc-4g.none-native-virtio-blk.install-small"}',
        ["diskbench.workload=install"],
    ),
    "dd": (
        {
            "workload": "dd",
            "dd_mib": 128,
            "dd_chunk_mib": 4,
            "fs": "ext2",
            "cluster_size": "128K",
            "lazy_refcounts": True,
            "cache_state": "cold",
        },
        '{"image": {"format": "qcow2", "preallocation": "off", "size": 2147483648, "cluster_size": 131072, "lazy_refcounts": true, "compat": "1.1", "encrypt": "none"}, "drive": {"cache": "writeback", "aio": "threads", "interface": "virtio-blk"}, "workload": {"name": "dd", "payload": "full", "dd_mib": 128, "dd_chunk_mib": 4, "fs": "ext2", "bonnie_size_mib": 512, "bonnie_ram_mib": 256, "bonnie_files": 0, "fio_target": "both", "fio_size_mib": 64, "fio_ios": 2000, "fio_fsync_ios": 200}, "cache_state": "cold", "id": "qcow2-off-cs128k-lazy-2g.writeback-threads-virtio-blk.dd-128m-4m-ext2.cold"}',
        ["diskbench.workload=dd", "diskbench.fs=ext2", "diskbench.dd_mib=128", "diskbench.dd_chunk_mib=4"],
    ),
    "bonnie": (
        {
            "workload": "bonnie",
            "bonnie_size_mib": 600,
            "bonnie_ram_mib": 200,
            "bonnie_files": 4,
            "size": "4G",
            "interface": "nvme",
        },
        '{"image": {"format": "qcow2", "preallocation": "off", "size": 4294967296, "cluster_size": 65536, "lazy_refcounts": false, "compat": "1.1", "encrypt": "none"}, "drive": {"cache": "writeback", "aio": "threads", "interface": "nvme"}, "workload": {"name": "bonnie", "payload": "full", "dd_mib": 256, "dd_chunk_mib": 2, "fs": "ext4", "bonnie_size_mib": 600, "bonnie_ram_mib": 200, "bonnie_files": 4, "fio_target": "both", "fio_size_mib": 64, "fio_ios": 2000, "fio_fsync_ios": 200}, "cache_state": "fresh", "id": "qcow2-off-cs64k-4g.writeback-threads-nvme.bonnie-600m-r200m-n4-ext4"}',
        [
            "diskbench.workload=bonnie",
            "diskbench.fs=ext4",
            "diskbench.bonnie_size_mib=600",
            "diskbench.bonnie_ram_mib=200",
            "diskbench.bonnie_files=4",
        ],
    ),
    "mkfs": (
        {"workload": "mkfs", "fs": "ext2", "encrypt": "luks", "cache_state": "warm"},
        '{"image": {"format": "qcow2", "preallocation": "off", "size": 2147483648, "cluster_size": 65536, "lazy_refcounts": false, "compat": "1.1", "encrypt": "luks"}, "drive": {"cache": "writeback", "aio": "threads", "interface": "virtio-blk"}, "workload": {"name": "mkfs", "payload": "full", "dd_mib": 256, "dd_chunk_mib": 2, "fs": "ext2", "bonnie_size_mib": 512, "bonnie_ram_mib": 256, "bonnie_files": 0, "fio_target": "both", "fio_size_mib": 64, "fio_ios": 2000, "fio_fsync_ios": 200}, "cache_state": "warm", "id": "qcow2-off-cs64k-luks-2g.writeback-threads-virtio-blk.mkfs-ext2.warm"}',
        ["diskbench.workload=mkfs", "diskbench.fs=ext2"],
    ),
    "fio": (
        {
            "workload": "fio",
            "fio_target": "RAW",
            "fio_size_mib": 32,
            "fio_ios": 100,
            "fio_fsync_ios": 10,
            "size": "1G",
            "compat": "0.10",
        },
        '{"image": {"format": "qcow2", "preallocation": "off", "size": 1073741824, "cluster_size": 65536, "lazy_refcounts": false, "compat": "0.10", "encrypt": "none"}, "drive": {"cache": "writeback", "aio": "threads", "interface": "virtio-blk"}, "workload": {"name": "fio", "payload": "full", "dd_mib": 256, "dd_chunk_mib": 2, "fs": "ext4", "bonnie_size_mib": 512, "bonnie_ram_mib": 256, "bonnie_files": 0, "fio_target": "raw", "fio_size_mib": 32, "fio_ios": 100, "fio_fsync_ios": 10}, "cache_state": "fresh", "id": "qcow2-off-cs64k-compat0.10-1g.writeback-threads-virtio-blk.fio-raw-32m-100x-10f"}',
        [
            "diskbench.workload=fio",
            "diskbench.fio_target=raw",
            "diskbench.fio_size_mib=32",
            "diskbench.fio_ios=100",
            "diskbench.fio_fsync_ios=10",
        ],
    ),
}


@pytest.mark.parametrize("workload", sorted(PINNED))
def test_cell_record_bytes_are_pinned(workload: str) -> None:
    keywords, record, kernel_args = PINNED[workload]
    cell = make_cell(**keywords)
    assert json.dumps(cell.as_dict()) == record
    assert cell.workload.kernel_args() == kernel_args
    assert cell.id == json.loads(record)["id"]
    # and back: the dict a record holds gives the same cell
    assert Cell.from_dict(json.loads(record)) == cell
    assert json.dumps(Cell.from_dict(json.loads(record)).as_dict()) == record


def test_workload_dict_holds_every_parameter_in_order() -> None:
    keys = list(make_cell().as_dict()["workload"])
    assert keys == [
        "name",
        "payload",
        "dd_mib",
        "dd_chunk_mib",
        "fs",
        "bonnie_size_mib",
        "bonnie_ram_mib",
        "bonnie_files",
        "fio_target",
        "fio_size_mib",
        "fio_ios",
        "fio_fsync_ios",
    ]


def test_make_cell_takes_the_axes_and_the_built_in_workloads_parameters_by_name() -> None:
    """CellSpelling is what the type checker holds make_cell's callers to: the cell's own axes
    (each with a default) and exactly the parameters the built-in workloads declare."""
    from harness.spec import AXIS_DEFAULTS, CellAxes, CellSpelling
    from harness.workloads import registry

    own = list(CellAxes.__annotations__)
    assert own == list(AXIS_DEFAULTS)
    hints = typing.get_type_hints(CellSpelling)
    extra = {k: hints[k].__name__ for k in hints if k not in own}
    built_in = {p.name: p.type.__name__ for name in registry.BUILT_IN for p in registry.kind(name).params}
    assert extra == built_in
