from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from recordkit import tcg_record

from harness.errors import RecordError
from harness.files import write_json_atomic
from harness.record import Record, Sample, load_record, record_path, write_record
from harness.report import render_table


def sample(index: int, total: float, status: str = "ok") -> Sample:
    return Sample.from_json(sample_document(index, total, status))


def sample_document(index: int, total: float, status: str = "ok") -> dict[str, object]:
    if status != "ok":
        return {
            "index": index,
            "status": status,
            "reason": "no ready line from the guest within 5 s",
            "logs": {"console": "/tmp/x/console.log"},
        }
    return {
        "index": index,
        "status": "ok",
        "metrics": {
            "phase.mkfs_s": total / 4,
            "phase.write_s": total * 3 / 4,
            "total_s": total,
            "mib_per_s": 256 / total,
            "host.boot_s": 4.0,
        },
    }


def make_record() -> Record:
    record = tcg_record({"id": "raw-off-2g.writeback-threads-virtio-blk.dd-256m-2m-ext4"})
    return replace(record, samples=(sample(0, 4.0), sample(1, 5.0), sample(2, 0, status="error")))


def test_write_is_atomic_and_loads_back(tmp_path: Path) -> None:
    path = record_path(tmp_path, "r1", "cell")
    write_record(path, make_record())
    assert load_record(path).run_id == "r1"
    assert [p.name for p in path.parent.iterdir()] == ["cell.json"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema": "diskbench-record", "version": 1, "cell"', "not valid JSON (truncated?"),
        (
            '{"schema": "diskbench-record", "version": 0, "cell": {}, "machine": {}, "samples": []}',
            "has version 0, this diskbench reads version 1",
        ),
        ('{"benchmarks": []}', "is not a diskbench record"),
        ('{"schema": "diskbench-record", "version": 1}', "lacks 'cell'"),
    ],
)
def test_bad_records_say_what_to_do(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(RecordError, match=message.replace("(", r"\(").replace("?", r"\?")):
        load_record(path)


def test_table_shows_median_spread_and_failures() -> None:
    table = render_table([make_record()])
    assert "[2/3 ok, accel tcg, guest RAM 256 MiB, 1 vCPU]" in table
    assert "total" in table and "4.50 s ± 15.7%" in table
    assert "sample 2: FAILED: no ready line from the guest within 5 s" in table
    lines = table.splitlines()
    order = [line.split()[0] for line in lines[1:6]]
    assert order == ["mkfs", "write", "total", "mib_per_s", "host.boot"]
    json.dumps(make_record().to_json())


def test_time_split_says_where_the_wall_time_went() -> None:
    from harness.report import render_time_split, time_split

    record = make_record()
    record = replace(
        record,
        samples=tuple(
            replace(
                s,
                host={**s.host, "wall_s": wall},
                metrics={**s.metrics, "host.overhead_s": 1.0} if s.ok else s.metrics,
            )
            for s, wall in zip(record.samples, (12.0, 14.0, 3.0), strict=True)
        ),
    )
    split = time_split([record])
    assert split == {"wall_s": 29.0, "boot_s": 8.0, "workload_s": 9.0, "overhead_s": 2.0, "failed_s": 3.0}
    line = render_time_split([record])
    assert line.startswith("time: 3 samples took 0.5 min: boot 0.1 min (28%)")
    assert "failed samples 0.1 min (10%)" in line


CORRUPT = {
    "binary": (b"\x00\xff\xfe\x01", "is not text (binary bytes at offset 1)"),
    "samples-oops": ({"samples": "oops"}, "field samples: 'oops' is not of type 'array'"),
    "empty-cell": ({"cell": {}}, "lacks 'cell.id'"),
    "nan-figure": (b"nan", "field samples[0].metrics.total_s is nan: figures must be finite numbers"),
    "bad-status": ({"samples": [{"status": "weird"}]}, "field samples[0].status: 'weird' is not one of"),
    "truncated": (b"truncated", "is not valid JSON (truncated?, line 1)"),
}


def write_corrupt(path: Path, case: str) -> str:
    """A record damaged as ``case`` says; returns the message that must name it."""
    damage, message = CORRUPT[case]
    good = json.dumps(make_record().to_json())
    if isinstance(damage, dict):
        path.write_text(json.dumps({**make_record().to_json(), **damage}))
    elif damage == b"nan":
        path.write_text(good.replace('"total_s": 4.0', '"total_s": NaN'))
    elif damage == b"truncated":
        path.write_text(good[: len(good) // 2])
    else:
        path.write_bytes(damage)
    return message


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_a_corrupt_record_is_one_line_naming_the_file_and_the_field(tmp_path: Path, case: str) -> None:
    path = tmp_path / "r.json"
    message = write_corrupt(path, case)
    with pytest.raises(RecordError) as caught:
        load_record(path)
    assert str(path) in str(caught.value) and message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_a_directory_named_like_a_record_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.json").mkdir()
    with pytest.raises(RecordError, match="is a directory, not a record file"):
        load_record(tmp_path / "x.json")


def test_the_published_schema_accepts_a_real_record_and_names_the_field_of_a_bad_one() -> None:
    from harness.record import schema_problem

    assert schema_problem(make_record().to_json()) is None
    assert schema_problem({**make_record().to_json(), "vm": {"mem_mib": 0}}) == (
        "field vm.mem_mib: 0 is less than the minimum of 1"
    )


def test_a_typed_record_writes_back_the_same_bytes(tmp_path: Path) -> None:
    """Read as a typed Record and written again: the file is byte-identical, extra keys kept in place."""
    record = make_record().to_json()
    record["samples"] = [sample_document(0, 4.0), sample_document(1, 5.0, status="error")]
    record["retried"] = [sample_document(1, 5.0, status="error")]
    path = tmp_path / "a.json"
    write_json_atomic(path, record)
    typed = load_record(path)
    assert typed.cell_id == "raw-off-2g.writeback-threads-virtio-blk.dd-256m-2m-ext4"
    assert typed.ok_samples == 1 and typed.accel == "tcg"
    assert typed.samples[0].metrics["total_s"] == 4.0 and typed.samples[1].reason is not None
    again = tmp_path / "b.json"
    write_record(again, typed)
    assert again.read_bytes() == path.read_bytes()


def test_the_store_passes_over_other_documents_and_set_aside_records(tmp_path: Path) -> None:
    from harness.record import find_records, record_files

    write_record(tmp_path / "a.json", make_record())
    write_json_atomic(tmp_path / "comparison.json", {"schema": "diskbench-comparison"})
    write_record(tmp_path / "previous" / "f00" / "a.json", make_record())
    write_record(tmp_path / "nested" / "b.json", make_record())
    assert [p.name for p in record_files(tmp_path)] == ["a.json"]
    assert [p.relative_to(tmp_path).as_posix() for p in record_files(tmp_path, recursive=True)] == [
        "a.json",
        "nested/b.json",
    ]
    with pytest.raises(Exception, match="no records found"):
        find_records([tmp_path / "previous"])


def test_a_new_sample_keeps_the_order_the_samplers_always_wrote() -> None:
    """A guest's sample and a replay's, ok and failed: the keys in the order of the documents the
    samplers wrote before samples were typed (so a record's bytes never change)."""
    guest_ok = Sample(
        index=0,
        status="ok",
        started_at="t",
        host={"cache_state": "fresh"},
        logs={"console": "c"},
        argv=["qemu"],
        guest_ready={"event": "ready"},
        report={"event": "report"},
        details={"too_fast": []},
        metrics={"total_s": 1.0},
        warning="leaks",
    )
    assert list(guest_ok.to_json()) == [
        "index", "status", "started_at", "host", "logs", "argv", "guest_ready", "report",
        "too_fast", "metrics", "warning",
    ]  # fmt: skip
    guest_failed = Sample(
        index=1, status="error", started_at="t", host={}, logs={}, reason="r", error_type="E", log_tail=""
    )
    assert list(guest_failed.to_json()) == [
        "index", "status", "started_at", "host", "logs", "reason", "error_type", "log_tail",
    ]  # fmt: skip
    replay_ok = Sample(
        index=0,
        status="ok",
        measure="replay",
        started_at="t",
        host={},
        logs={},
        metrics={"x": 1.0},
        replay={},
    )
    assert list(replay_ok.to_json()) == [
        "index", "status", "measure", "started_at", "host", "logs", "metrics", "replay",
    ]  # fmt: skip


def test_a_stored_sample_keeps_its_own_order_and_unknown_keys() -> None:
    document = {"status": "ok", "extra": {"a": 1}, "metrics": {"total_s": 1}, "index": 4}
    sample = Sample.from_json(document)
    assert sample.ok and sample.index == 4 and sample.figure("total_s") == 1.0
    assert sample.details == {"extra": {"a": 1}}
    assert list(sample.to_json().items()) == list(document.items())


def test_failures_set_aside_go_to_retried_at_the_end_of_the_document(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    write_record(path, make_record())
    record, moved = load_record(path).with_failures_aside()
    assert moved == 1 and [s.index for s in record.samples] == [0, 1]
    assert list(record.to_json())[-1] == "retried" and record.to_json()["retried"][0]["index"] == 2
    assert record.next_sample_index() == 3
