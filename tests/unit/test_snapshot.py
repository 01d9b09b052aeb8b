"""Snapshot keys: what the guest saw before its ready line, and nothing else."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.sample.snapshot import (
    Start,
    for_snapshot,
    key_material,
    not_applicable,
    parse_start,
    snapshot_key,
)
from harness.sample.vm import Drive, VMConfig
from harness.spec import Aio, Cache, Interface, make_cell


def config(**drive: object) -> VMConfig:
    disk = Drive(node="disk0", path=Path("/w/a.qcow2"), format="qcow2", **drive)  # type: ignore[arg-type]
    return VMConfig(
        kernel=Path("/g/vmlinux"), initrd=Path("/g/initrd"), append=[], drives=[disk], qemu="qemu"
    )


def key(cfg: VMConfig, size: int = 1 << 30, version: str = "7.2.22") -> str:
    return snapshot_key(key_material(cfg, recipe_hash="r", qemu_version=version, disk_bytes=size))


def test_image_path_format_and_aio_do_not_change_the_key() -> None:
    base = config()
    other = replace(
        base, drives=[replace(base.drives[0], path=Path("/x/b.raw"), format="raw", aio=Aio.NATIVE)]
    )
    assert key(base) == key(other)


def test_what_the_guest_sees_changes_the_key() -> None:
    base = key(config())
    assert key(config(cache=Cache.NONE)) == base, "none and writeback both show a write cache"
    assert key(config(cache=Cache.WRITETHROUGH)) != base, "writethrough hides the write cache"
    assert key(config(interface=Interface.AHCI)) != base
    assert key(config(), size=2 << 30) != base
    assert key(config(), version="8.0.0") != base
    assert key(replace(config(), mem_mib=512)) != base
    assert key(replace(config(), append=["quiet"])) != base


def test_nvme_is_hot_added_after_the_restore() -> None:
    argv = " ".join(
        for_snapshot(config(interface=Interface.NVME)).argv(
            qmp_path=Path("q"), console=Path("c"), report=Path("r"), control=Path("k")
        )
    )
    assert "id=disk0" in argv and "nvme" not in argv
    assert "org.diskbench.control" in argv


def test_a_saved_and_restored_guest_has_a_generation_id_device() -> None:
    cold = " ".join(config().argv(qmp_path=Path("q"), console=Path("c"), report=Path("r")))
    saved = for_snapshot(config())
    restored = replace(saved, incoming=True)
    for cfg in (saved, restored):
        argv = cfg.argv(qmp_path=Path("q"), console=Path("c"), report=Path("r"), incoming=Path("i"))
        assert argv[-2:] == ["-device", "vmgenid,guid=auto"], "a new GUID per QEMU process"
    assert "vmgenid" not in cold
    assert key(config()) == key(for_snapshot(config())), "the key is of the snapshot's own config"


def test_primed_cells_boot_and_bad_start_is_named() -> None:
    assert not_applicable(make_cell(workload="dd")) is None
    assert "warm" in str(not_applicable(make_cell(workload="dd", cache_state="warm")))
    assert parse_start("auto") is Start.AUTO
    with pytest.raises(ValueError, match="--start fast: expected one of cold, snapshot, auto"):
        parse_start("fast")


def test_samples_of_different_start_kinds_are_kept_apart() -> None:
    from harness.compare.rules import mixed_starts
    from harness.record import Sample

    cold = Sample(host={"start": "cold"})
    snap = Sample(host={"start": "snapshot"})
    old = Sample(host={})
    assert mixed_starts([cold, old], [cold]) is None
    assert mixed_starts([snap], [snap]) is None
    assert mixed_starts([cold], [snap]) == (
        "start kinds differ: base cold, head snapshot; run both with the same --start"
    )
    assert mixed_starts([cold, snap], [cold, snap]) is not None


def test_unused_snapshots_are_pruned_and_loading_one_marks_it_used(tmp_path: Path) -> None:
    import json
    import os

    from harness.sample.snapshot import load, prune

    for name in ("old", "used"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "state").write_bytes(b"x")
        (tmp_path / name / "meta.json").write_text(json.dumps({"key": name, "ready": {}}))
        os.utime(tmp_path / name, (0, 0))
    assert load("used", tmp_path) is not None
    assert prune(tmp_path, idle_s=86400) == [tmp_path / "old"]
    assert [p.name for p in tmp_path.iterdir()] == ["used"]


def test_a_comparison_keeps_start_kinds_apart_unless_asked() -> None:
    from harness.compare import Kind, Settings, Verdict, compare_cell
    from harness.record import CellInfo, Sample

    def samples(start: str, mean: float) -> list[Sample]:
        return [
            Sample(status="ok", host={"start": start}, metrics={"total_s": mean + i / 100}) for i in range(6)
        ]

    cell = CellInfo({"id": "c1", "workload": {"name": "dd"}})
    mixed = compare_cell(cell, samples("cold", 2.0), samples("snapshot", 2.0), settings=Settings())
    assert mixed.verdict is Verdict.ERROR
    assert mixed.kind is Kind.MIXED_START
    assert "base cold, head snapshot" in mixed.reason
    asked = compare_cell(
        cell, samples("cold", 2.0), samples("snapshot", 2.0), settings=Settings(mix_starts=True)
    )
    assert asked.kind is not Kind.MIXED_START
