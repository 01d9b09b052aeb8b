"""Replay over a backing chain: real qemu-io on a fresh overlay over a built chain, each layer handed
over as a descriptor, and a stream recorded from a real guest on the same chain."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.sample import chain
from harness.sample.replay.replay import Replayer, qemu_io_beside, replay
from harness.sample.replay.script import ReplayMismatch
from harness.sample.replay.stream import Kind, Request, Stream, parse_stream
from harness.spec import make_cell
from harness.subject.binaries import QEMU_IMG, Binaries

pytestmark = [pytest.mark.integration]

MIB = 1024 * 1024
CELL = make_cell(format="qcow2", cache="none", size="64M", backing="depth=2,fill=100%", measure="replay")
# 4 KiB writes, one in each 64K cluster of the first 16 MiB, a read of each, a flush
WRITES = tuple(Request(Kind.WRITE, n * 65536, 4096) for n in range(256))
READS = tuple(Request(Kind.READ, n * 65536 + 32768, 4096) for n in range(256))
STREAM = Stream(
    disk_bytes=64 * MIB,
    requests=(*WRITES, *READS, Request(Kind.FLUSH, 0, 0)),
    drive={},
    graph=(),
)


def replayer(disk_dir: Path, over: chain.Chain | None) -> Replayer:
    return Replayer(qemu_io_beside("qemu-img"), QEMU_IMG, disk_dir / "replay", chain=over)


def test_a_replay_cell_replays_on_a_fresh_overlay_over_its_chain(disk_dir: Path) -> None:
    assert CELL.backing is not None
    over = chain.ensure(CELL.backing, CELL.image.size, work_dir=disk_dir, binaries=Binaries.on_path())
    sample = replay(STREAM, CELL, replayer=replayer(disk_dir, over), passes=2)
    assert sample.completions == {"wrote": 256, "read": 256, "discard": 0, "flush": 1}
    # the chain's layers as the guest's drive gives them: each layer's driver, its name handed over
    assert sample.options["backing.driver"] == sample.options["backing.backing.driver"] == "qcow2"
    image_opts = sample.argv[sample.argv.index("--image-opts") + 1]
    assert "backing.file.filename=/proc/self/fd/" in image_opts
    assert "backing.backing.file.filename=/proc/self/fd/" in image_opts
    # the overlay's own nodes, as the guest's QEMU opens them (the stream was recorded elsewhere)
    assert sample.graph == [("qcow2", "0x22"), ("file", "0x22")]
    assert len(sample.pass_wall_s) == 2
    # each pass had an overlay of its own, gone after it; the chain is as it was built
    assert not list((disk_dir / "replay").iterdir())
    assert chain.load(over.key, chain.bases_root(disk_dir)) is not None
    assert all(layer.stat().st_mode & 0o777 == 0o444 for layer, _ in over.layers)


def test_a_replay_without_the_cells_chain_is_refused(disk_dir: Path) -> None:
    with pytest.raises(ReplayMismatch, match="the cell has a backing chain and the replay was given none"):
        replay(STREAM, CELL, replayer=replayer(disk_dir, None))
    plain = replace(CELL, backing=None)
    assert CELL.backing is not None
    over = chain.ensure(CELL.backing, CELL.image.size, work_dir=disk_dir, binaries=Binaries.on_path())
    with pytest.raises(ReplayMismatch, match="given a backing chain for a cell that has none"):
        replay(STREAM, plain, replayer=replayer(disk_dir, over))


@pytest.mark.guest
def test_run_measure_replay_over_a_chain_records_and_replays_on_the_chain(
    tmp_path: Path, disk_dir: Path
) -> None:
    """`diskbench run --measure replay --backing ...`: the stream is recorded from a guest on an
    overlay of the chain, and every sample replays it on a fresh overlay of the same chain."""
    from harness.cli import main
    from harness.record import find_records

    results = tmp_path / "results"
    argv = ["run", "--workload", "fio", "--fio-jobs", "random", "--fio-target", "raw"]
    argv += ["--fio-size-mib", "32", "--fio-ios", "200", "--size", "256M", "--cache", "none"]
    argv += ["--backing", "depth=1,fill=32M", "--measure", "replay", "--repeat", "2", "--accel", "tcg"]
    argv += ["--results-dir", str(results), "--work-dir", str(disk_dir)]
    assert main(argv) == 0
    (record,) = find_records([results / "records"], recursive=True)
    assert "-over-d1-f32m-sequential-qcow2-cs64k." in record.cell_id and record.cell_id.endswith(".replay")
    assert [s.status for s in record.samples] == ["ok", "ok"], [s.reason for s in record.samples]
    keys = {s.host["chain"]["key"] for s in record.samples}
    assert len(keys) == 1 and len(list((disk_dir / "bases").glob("[0-9a-f]*"))) == 1  # built once
    for sample in record.samples:
        assert sample.replay is not None
        # recorded under these very options, chain included: the block graphs were compared
        assert sample.replay["options"]["backing.driver"] == "qcow2"
        assert not sample.replay["notes"]
        counts = sample.host["stream"]["counts"]
        # fio's two random write jobs, 200 writes of 4 KiB each: the guest may merge two adjacent
        # writes of the queue depth 32 job into one request (399 writes were seen under load), never
        # drop their bytes
        path = Path(sample.host["stream"]["path"])
        summary = parse_stream(path.read_bytes(), source=str(path)).summary()
        assert summary["write_bytes"] >= 400 * 4096, summary
        assert counts["write"] >= 380, counts
        assert sample.metrics["replay.write_ops"] == counts["write"] + counts["write_zeroes"]
