"""Merging shard dirs: one identity or a loud refusal; duplicates keep the better record."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from recordkit import MACHINE

from harness.cli import main
from harness.errors import UsageError
from harness.record import MachineInfo, Sample, load_record, new_record, write_record
from harness.spec import make_cell
from harness.sweep.merge import merge_dirs, merge_identity


def write(directory: Path, cell_id_size: str, *, ok: int, failed: int = 0, **machine: Any) -> Path:
    cell = make_cell(workload="dd", dd_mib=16, size=cell_id_size)
    record = new_record(
        cell=cell.as_dict(),
        machine={**MACHINE, **machine},
        subject={"guest": {"recipe_hash": "abc"}},
        vm={"accel": machine.get("accel", "kvm"), "mem_mib": 256, "smp": 1},
        run_id="sweep-s",
    )
    for index in range(ok + failed):
        log = f"/home/runner/results/sweeps/s/logs/{cell.id}/sample-{index}/console.log"
        record = record.with_sample(
            Sample.from_json(
                {
                    "index": index,
                    "status": "ok" if index < ok else "error",
                    "metrics": {"total_s": 1.0},
                    "logs": {"console": log},
                }
            )
        )
    path = directory / f"{cell.id}.json"
    write_record(path, record)
    logs = directory / "logs" / cell.id / "sample-0"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "console.log").write_text(f"console of {directory.name}\n")
    return path


def test_shards_of_one_machine_type_merge_into_one_dir(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "256M", ok=2)
    write(b, "512M", ok=2, hostname="runner-2")  # another runner of the same pool
    result = merge_dirs([a, b], tmp_path / "out")
    assert not result.mixed
    assert sorted(p.name for p in (tmp_path / "out").glob("*.json")) == sorted(
        p.name for p in [*a.glob("*.json"), *b.glob("*.json")]
    )
    merged = load_record(result.written[0])
    console = Path(merged.samples[0].logs["console"])
    assert console.is_relative_to(tmp_path / "out" / "logs") and console.read_text().startswith("console of ")


def test_duplicate_cells_keep_the_record_with_more_ok_samples(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "256M", ok=1, failed=2)
    best = write(b, "256M", ok=3)
    logged: list[str] = []
    result = merge_dirs([a, b], tmp_path / "out", log=logged.append)
    (kept,) = result.written
    assert load_record(kept) == replace(load_record(best), samples=load_record(kept).samples)
    assert sum(s.status == "ok" for s in load_record(kept).samples) == 3
    assert logged == [
        f"merge: duplicate cell {kept.stem}: kept {best} (3 ok of 3) over {a / kept.name} (1 ok of 3)"
    ]
    assert (
        tmp_path / "out" / "logs" / kept.stem / "sample-0" / "console.log"
    ).read_text() == "console of b\n"


def test_mixed_accel_is_refused_naming_both_sides(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    kvm = write(a, "256M", ok=1)
    tcg = write(b, "512M", ok=1, accel="tcg")
    with pytest.raises(UsageError) as info:
        merge_dirs([a, b], tmp_path / "out")
    message = str(info.value)
    assert f"{kvm} (accel 'kvm') vs {tcg} (accel 'tcg')" in message
    assert "pass --allow-mixed" in message
    assert not (tmp_path / "out").exists()


def test_mixed_qemu_versions_exit_2_from_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "256M", ok=1)
    write(b, "512M", ok=1, qemu_version="8.2.1", qemu_img_version="8.2.1")
    assert main(["merge", str(a), str(b), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "diskbench: error: merge: records of different machines or subjects would be mixed:"
    )
    assert "qemu_version '7.2.0', qemu_img_version '7.2.0'" in err and "qemu_version '8.2.1'" in err


def test_allow_mixed_keeps_each_identity_apart_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "256M", ok=1)
    write(b, "256M", ok=1, accel="tcg")
    assert main(["merge", str(a), str(b), "--out", str(tmp_path / "out"), "--allow-mixed"]) == 0
    captured = capsys.readouterr()
    assert "WARNING: MIXED records" in captured.err
    subdirs = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert (
        len(subdirs) == 2
        and subdirs[0].startswith("kvm-qemu7.2.0-")
        and subdirs[1].startswith("tcg-qemu7.2.0-")
    )
    for sub in subdirs:
        (record,) = (tmp_path / "out" / sub).glob("*.json")
        assert load_record(record).machine.accel == sub.split("-")[0]
    assert captured.out.count("1 records -> ") == 2


def test_merge_refuses_an_out_dir_with_records(tmp_path: Path) -> None:
    a = tmp_path / "a"
    write(a, "256M", ok=1)
    write(tmp_path / "out", "512M", ok=1)
    with pytest.raises(UsageError, match="holds records already"):
        merge_dirs([a], tmp_path / "out")


def test_hostname_is_not_part_of_the_merge_identity() -> None:
    one = new_record(cell={"id": "c"}, machine=MACHINE, subject={}, vm={}, run_id="r")
    other = replace(one, machine=MachineInfo({**MACHINE, "hostname": "runner-9"}))
    assert merge_identity(one) == merge_identity(other)
    assert merge_identity(one) != merge_identity(
        replace(one, machine=MachineInfo({**MACHINE, "cpu": "Intel Xeon"}))
    )


def test_merge_refuses_a_corrupt_record_and_never_prefers_it_over_a_good_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    good = write(a, "256M", ok=2)
    bad = write(b, "256M", ok=3)
    bad.write_text(bad.read_text().replace('"samples": [', '"samples": "oops", "x": ['))
    rc = main(["merge", str(a), str(b), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and str(bad) in err and "field samples" in err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.json"))
    assert load_record(good).samples[0].status == "ok"
