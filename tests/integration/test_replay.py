"""Replay against the real block layer: a stream recorded from a real guest, replayed by real qemu-io."""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tcgopts import tcg_options

from harness.errors import HarnessError
from harness.sample.guest_sampler import RunOptions
from harness.sample.pairing import Mode, crossed_cpus
from harness.sample.replay.record import record
from harness.sample.replay.replay import Pairing, Replayer, qemu_io_beside, replay
from harness.sample.replay.script import ReplayMismatch
from harness.sample.replay.stream import Kind, Request, Stream, parse_stream
from harness.spec import make_cell
from harness.subject.binaries import QEMU_IMG, Binaries

pytestmark = [pytest.mark.integration]

CELL = make_cell(format="qcow2", cache="none", aio="threads", workload="dd", dd_mib=16, size="256M")


def options(work: Path, results: Path) -> RunOptions:
    return tcg_options(work, results)


@pytest.fixture(scope="module")
def recorded(guest: Any, tmp_path_factory: pytest.TempPathFactory) -> Stream:
    root = tmp_path_factory.mktemp("record")
    return record(CELL, guest, options(root / "work", root / "results"), root / "logs")


@pytest.mark.guest
def test_a_recorded_dd_stream_is_replayed_request_for_request(recorded: Stream, disk_dir: Path) -> None:
    counts = recorded.counts()
    # the guest wrote its 16 MiB and flushed: the stream holds them, with their data's zeroness
    assert counts["write"] >= 8 and counts["flush"] >= 1
    assert recorded.summary()["write_bytes"] >= 16 * 1024 * 1024
    assert recorded.graph == (("qcow2", "0x22"), ("file", "0x22"))
    assert recorded.drive["cache"] == "none" and recorded.source["unmatched_issues"] == 0
    back = parse_stream(recorded.to_json(), source="recorded")
    assert back.digest == recorded.digest

    sample = replay(back, CELL, replayer=Replayer(qemu_io_beside("qemu-img"), QEMU_IMG, disk_dir))
    # what qemu-io completed, request for request, is what the stream holds
    assert sample.completions == {
        "wrote": counts["write"] + counts["write_zeroes"],
        "read": counts["read"],
        "discard": counts["discard"],
        "flush": counts["flush"],
    }
    assert sample.figures["replay.write_ops"] == counts["write"] + counts["write_zeroes"]
    assert sample.graph == [("qcow2", "0x22"), ("file", "0x22")]
    assert sample.options["cache"] == "none" and not sample.notes
    assert 0 < sample.figures["replay.write_p50_ms"] <= sample.figures["replay.write_p99_ms"] < 10_000
    assert 0 < sample.figures["replay.wall_s"] < 60


def test_the_recording_image_is_made_by_the_sides_own_qemu_img(
    tmp_path: Path, disk_dir: Path, qemu_reachable_dir: Path
) -> None:
    """A side that brings its own qemu-img records its stream on an image its qemu-img made: a
    wrapper that logs its calls is the side's qemu-img (PATH is left as it is), and the guest's QEMU
    fails at once, so the test stops after the image is made."""
    real = shutil.which("qemu-img")
    assert real
    qemu_reachable_dir.chmod(0o777)  # QEMU's account runs the wrapper and appends to its log
    calls = qemu_reachable_dir / "calls.log"
    wrapper = qemu_reachable_dir / "qemu-img"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    side = Binaries(qemu="/bin/false", qemu_img=str(wrapper))
    opts = replace(options(disk_dir, tmp_path / "results"), binaries=side)
    guest = SimpleNamespace(kernel=tmp_path / "vmlinux", initrd=tmp_path / "initrd", tools=None, payloads={})
    with pytest.raises(HarnessError):
        record(CELL, guest, opts, tmp_path / "logs")  # type: ignore[arg-type]
    created = [line.split() for line in calls.read_text().splitlines() if line.startswith("create ")]
    assert len(created) == 1, calls.read_text()
    # the cell's image (its path is the descriptor handed to QEMU's account)
    assert created[0][2:6] == ["-f", "qcow2", "-o", ",".join(CELL.image.create_options())]
    assert created[0][-1] == str(CELL.image.size)


SMALL = Stream(
    disk_bytes=64 * 1024 * 1024,
    requests=(Request(Kind.WRITE, 0, 65536), Request(Kind.FLUSH), Request(Kind.READ, 0, 4096)),
    drive={
        "format": "qcow2",
        "cache": "none",
        "aio": "threads",
        "discard": "ignore",
        "detect-zeroes": "off",
        "copy-on-read": "off",
    },
    graph=(("qcow2", "0x22"), ("file", "0x22")),
)
SMALL_CELL = make_cell(format="qcow2", cache="none", aio="threads", size="64M")


def test_a_replay_whose_block_graph_differs_from_the_guests_fails_with_the_reason(disk_dir: Path) -> None:
    # recorded where the guest's QEMU opened the image with aio=native (flag 0x80): qemu-io opens it
    # with the cell's aio=threads, and its own trace says so
    native = replace(SMALL, graph=(("qcow2", "0xa2"), ("file", "0xa2")))
    with pytest.raises(ReplayMismatch) as caught:
        replay(native, SMALL_CELL, replayer=Replayer(qemu_io_beside("qemu-img"), QEMU_IMG, disk_dir))
    assert caught.value.message == (
        "the replay's block graph qcow2[0x22] > file[0x22] differs from the guest's qcow2[0xa2] > file[0xa2]"
    )
    # the same stream with its true graph replays
    sample = replay(SMALL, SMALL_CELL, replayer=Replayer(qemu_io_beside("qemu-img"), QEMU_IMG, disk_dir))
    assert sample.completions == {"wrote": 1, "read": 1, "discard": 0, "flush": 1}


def test_a_drive_option_qemu_io_cannot_apply_fails_the_sample_with_the_reason(disk_dir: Path) -> None:
    with pytest.raises(ReplayMismatch, match="qemu-io cannot apply the guest's drive option werror=stop"):
        replay(
            SMALL,
            SMALL_CELL,
            replayer=Replayer(qemu_io_beside("qemu-img"), QEMU_IMG, disk_dir, (("werror", "stop"),)),
        )


def test_a_throttle_and_detect_zeroes_are_applied_and_bind(disk_dir: Path) -> None:
    # 20 writes of 64 KiB at 1 MiB/s (with no burst allowance) take about a second
    writes = tuple(Request(Kind.WRITE, i * 65536, 65536) for i in range(20))
    stream = replace(SMALL, requests=writes, drive={})
    policy = (("throttling.bps-write", str(1024 * 1024)), ("detect-zeroes", "on"))
    sample = replay(
        stream,
        SMALL_CELL,
        replayer=Replayer(qemu_io_beside("qemu-img"), QEMU_IMG, disk_dir, policy),
    )
    assert sample.options["throttling.bps-write"] == str(1024 * 1024)
    assert sample.options["detect-zeroes"] == "on"
    assert sample.graph[0][0] == "throttle"
    assert sample.notes  # recorded under other options: the graph is not compared
    assert sample.figures["replay.wall_s"] > 0.8


@pytest.mark.guest
def test_run_measure_replay_records_replay_samples(tmp_path: Path, disk_dir: Path) -> None:
    """`diskbench run --measure replay`: the stream is recorded once, every sample replays it."""
    from harness.cli import main
    from harness.record import find_records

    results = tmp_path / "results"
    argv = ["run", "--workload", "dd", "--dd-mib", "16", "--size", "256M", "--cache", "none"]
    argv += ["--measure", "replay", "--repeat", "2", "--accel", "tcg"]
    argv += ["--results-dir", str(results), "--work-dir", str(disk_dir)]
    assert main(argv) == 0
    (record,) = find_records([results / "records"], recursive=True)
    assert record.cell_id.endswith(".dd-16m-2m-ext4.replay") and record.cell.get("measure") == "replay"
    assert [s.status for s in record.samples] == ["ok", "ok"]
    digests = {s.host["stream"]["digest"] for s in record.samples}
    assert len(digests) == 1  # one recording, replayed twice
    for sample in record.samples:
        assert sample.measure == "replay"
        counts = sample.host["stream"]["counts"]
        # qemu-io's "wrote" lines: the writes and the write-zeroes of the stream
        assert sample.metrics["replay.write_ops"] == counts["write"] + counts["write_zeroes"]
        assert sample.metrics["replay.write_p90_ms"] > 0
    assert len(list((results / "streams").glob("*.json"))) == 2  # the stream and what its key hashes


def barrier_cpu() -> int:
    return max(os.sched_getaffinity(0))


def _pair(
    streams: tuple[Stream, Stream], cells: tuple[Any, Any], work: Path, passes: int, mode: Mode = Mode.SHARED
) -> dict[str, Any]:
    """Two replays in two threads that meet before each pass, as a gate's pair does."""
    barrier = Pairing(mode=mode)
    got: dict[str, Any] = {}

    def side(label: str, stream: Stream, cell: Any) -> None:
        try:
            got[label] = replay(
                stream,
                cell,
                replayer=Replayer(qemu_io_beside("qemu-img"), QEMU_IMG, work),
                passes=passes,
                together=barrier,
            )
        except ReplayMismatch as exc:
            got[label] = exc

    threads = [
        threading.Thread(target=side, args=(label, stream, cell))
        for label, stream, cell in zip(("base", "head"), streams, cells, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a side of the pair is still waiting"
    return got


def test_a_pair_replays_together_pass_by_pass_and_a_failed_side_never_keeps_the_other_waiting(
    disk_dir: Path,
) -> None:
    # the two sides replay the same cell in one work dir at once: each has an image of its own
    writes = tuple(Request(Kind.WRITE, i * 65536, 65536) for i in range(40))
    stream = replace(SMALL, requests=(*writes, Request(Kind.FLUSH)), drive={})
    got = _pair((stream, stream), (SMALL_CELL, SMALL_CELL), disk_dir, passes=3)
    for label in ("base", "head"):
        assert got[label].passes_together == 3 and len(got[label].pass_wall_s) == 3
        assert got[label].completions["wrote"] == 40
        assert not any("without their partner" in n for n in got[label].notes)
        # both on the pair's one CPU
        assert got[label].cpus == (barrier_cpu(),) and got[label].argv[0].endswith("qemu-io")
    assert not list(disk_dir.glob("*.replay.*"))
    # head fails before its first pass (a disk larger than the cell's): base runs alone, and says so
    too_big = replace(stream, disk_bytes=SMALL_CELL.image.size * 2)
    got = _pair((stream, too_big), (SMALL_CELL, SMALL_CELL), disk_dir, passes=2)
    assert isinstance(got["head"], ReplayMismatch)
    assert got["base"].passes_together == 0
    assert "2 of 2 passes ran without their partner (it failed or was late)" in got["base"].notes


@pytest.mark.skipif(crossed_cpus() is None, reason="a crossed pair needs two CPUs")
def test_a_crossed_pair_swaps_each_passs_qemu_io_between_two_cpus(disk_dir: Path) -> None:
    writes = tuple(Request(Kind.WRITE, i * 65536, 65536) for i in range(400))
    stream = replace(SMALL, requests=(*writes, Request(Kind.FLUSH)), drive={})
    got = _pair((stream, stream), (SMALL_CELL, SMALL_CELL), disk_dir, passes=2, mode=Mode.CROSSED)
    for label in ("base", "head"):
        sample = got[label]
        assert sample.passes_together == 2 and sample.completions["wrote"] == 400
        # each qemu-io of the last pass was moved between the pair's two CPUs, and says so
        assert sample.cpus == crossed_cpus() and sample.crossed is not None
        assert sample.crossed["cpus"] == list(sample.cpus)
        assert sum(sample.crossed["on_cpu_s"]) > 0 and sample.as_dict()["crossed"] == sample.crossed
    assert not list(disk_dir.glob("*.replay.*"))
