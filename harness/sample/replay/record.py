"""Record a cell's request stream from a real guest sample, on QEMU's side.

**Why this method.**  QEMU 7.2 traces reads and writes at the BlockBackend
(``blk_co_preadv``/``blk_co_pwritev``: offset, length, flags, issue time) but
has no trace event for a flush or a discard, none for a completion, and none
carries the data.  Its ``blklogwrites`` driver logs every completed write
(with its data), write-zeroes, discard and flush, in completion order, to a
dm-log-writes log.  So the recording sample runs the cell's own guest and
workload with the disk's drive as a ``blklogwrites`` node over the cell's
format node (same image, cache mode, aio and drive options; the device and
everything the guest sees unchanged), and traces the BlockBackend's issues
and the log node's writes (one per logged request, written right after the
request completed: its completion time).  :mod:`harness.sample.replay.capture`
joins the two.  The log costs an extra write per request on the host, so a
recording sample's timing is not a measurement: only its stream is kept.

The trace is switched on by QMP when the guest says its workload starts, as
the runner sets its latency histograms there: the stream holds the requests
the guest sample's figures are made of (the workload, and the flush at power
off), not the boot's.

A stream is cached as ``RESULTS/streams/KEY.json``; the key hashes what the
snapshot key hashes (guest build, QEMU, its guest-visible command line,
the disk's size: :func:`harness.sample.snapshot.key_material`), plus the workload
line with its parameters and the full drive options (format, cache, aio and
the policy's), so a stream's block graph is its cell's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.errors import ProtocolError, StreamOverCap
from harness.files import write_json_atomic
from harness.host.hostinfo import tool_version
from harness.sample import chain, snapshot
from harness.sample.guest_sampler import Guest, RunOptions, vm_config, workload_line
from harness.sample.protocol import parse_ready, parse_report
from harness.sample.replay.capture import merge, parse_log, parse_trace
from harness.sample.replay.script import drive_option_words, guest_options
from harness.sample.replay.stream import MAX_REQUESTS, VERSION, Stream, parse_stream
from harness.sample.vm import DISK_NODE, Drive, Machine, VMConfig
from harness.sample.vm.config import option_value
from harness.spec import Cell

#: events switched on at the workload's start (bdrv_open_common is on from the command line)
WORKLOAD_EVENTS = ("blk_co_preadv", "blk_co_pwritev", "bdrv_co_pwritev_part")
#: format-node options that go below the blklogwrites node
FORMAT_NODE_OPTIONS = ("l2-cache-size", "refcount-cache-size", "cache-clean-interval")
#: a recording's write log may hold its disk written this many times over, plus LOG_FLOOR_BYTES;
#: where base's stream of the cell is known (a gate's head), at most this many times base's log
LOG_DISK_FACTOR = 1
LOG_BASE_FACTOR = 4
LOG_FLOOR_BYTES = 64 * 2**20
#: a recording's trace: ~16 traced lines of ~100 bytes for each request a stream may hold
TRACE_CAP_BYTES = MAX_REQUESTS * 4 * 16 * 100


@dataclass(frozen=True)
class RecordingCaps:
    """What a recording may write beside its image, checked while it runs (:class:`RecordingMachine`)
    and as its trace is parsed; ``why`` says where the log's figure comes from."""

    log_bytes: int
    trace_bytes: int = TRACE_CAP_BYTES
    why: str = ""

    @property
    def total_bytes(self) -> int:
        return self.log_bytes + self.trace_bytes


def recording_caps(disk_bytes: int, base: Stream | None = None) -> RecordingCaps:
    """The caps of a recording on a ``disk_bytes`` disk: its log at most the disk written
    :data:`LOG_DISK_FACTOR` times over; with ``base`` (base's stream of the cell, when head's is
    recorded), at most :data:`LOG_BASE_FACTOR` times what base's log held; :data:`LOG_FLOOR_BYTES`
    more either way."""
    log = LOG_DISK_FACTOR * disk_bytes + LOG_FLOOR_BYTES
    why = f"{LOG_DISK_FACTOR} x the {disk_bytes / 2**20:.0f} MiB disk + {LOG_FLOOR_BYTES // 2**20} MiB"
    if base is not None:
        # base's log: each request's header sector, each write's data
        base_log = base.sector_bytes * (len(base.requests) + 1) + int(base.summary()["write_bytes"])
        if LOG_BASE_FACTOR * base_log + LOG_FLOOR_BYTES < log:
            log = LOG_BASE_FACTOR * base_log + LOG_FLOOR_BYTES
            why = (
                f"{LOG_BASE_FACTOR} x base's {base_log / 2**20:.1f} MiB log of the cell + "
                f"{LOG_FLOOR_BYTES // 2**20} MiB"
            )
    return RecordingCaps(log_bytes=log, why=why)


@dataclass(frozen=True)
class LoggedDrive(Drive):
    """The disk under test as a ``blklogwrites`` node over its format node, logging to ``log``."""

    log: Path = Path()

    def argv(self) -> list[str]:
        args = super().argv()
        words = drive_option_words(args[1])
        path = str(self.path).replace(",", ",,")
        opts = [
            "if=none",
            f"id={self.node}",
            "driver=blklogwrites",
            f"file.driver={self.format}",
            "file.file.driver=file",
            f"file.file.filename={path}",
            "log.driver=file",
            f"log.filename={str(self.log).replace(',', ',,')}",
            f"cache={self.cache.value}",
            f"aio={self.aio.value}",
        ]
        for name, value in words.items():
            if name in ("if", "id", "file", "format", "cache", "aio"):
                continue
            # an overlay's chain is the format node's (its backing child), under the log node
            below = name in FORMAT_NODE_OPTIONS or name == "encrypt.key-secret" or name.startswith("backing.")
            opts.append(f"{'file.' if below else ''}{name}={value.replace(',', ',,')}")
        return [args[0], ",".join(opts), *args[2:]]


@dataclass(frozen=True)
class RecordingConfig(VMConfig):
    """A guest whose QEMU traces its block nodes into ``trace`` (timestamps on)."""

    trace: Path = Path()

    def extra_args(self) -> list[str]:
        return [
            "-msg",
            "timestamp=on",
            "-trace",
            f"enable=bdrv_open_common,file={option_value(str(self.trace))}",
        ]


class RecordingMachine(Machine):
    """A :class:`Machine` that also hands QEMU its write log and trace file, and watches that they
    stay within ``caps`` while it waits."""

    image_name = ""
    log_name = ""

    def __init__(self, config: RecordingConfig, log_dir: Path, *, name: str, caps: RecordingCaps) -> None:
        super().__init__(config, log_dir, name=name)
        self.caps = caps

    def watch(self, what: str) -> None:
        super().watch(what)
        assert isinstance(self.config, RecordingConfig)
        (disk,) = [d for d in self.config.drives if isinstance(d, LoggedDrive)]
        check_caps(disk.log, self.config.trace, self.caps, what=f"while waiting for {what}")

    def _pre_launch(self) -> None:
        super()._pre_launch()
        assert isinstance(self.config, RecordingConfig)
        (disk,) = [d for d in self.config.drives if isinstance(d, LoggedDrive)]
        log = self._handoff.write(disk.log, create=True)
        trace = self._handoff.write(self.config.trace, create=True)
        argv = []
        for arg in self.argv:
            if "driver=blklogwrites" in arg:
                arg = arg.replace(
                    f"log.filename={option_value(str(disk.log))}", f"log.filename={option_value(log)}"
                )
                self.image_name = drive_option_words(arg)["file.file.filename"]
            argv.append(
                arg.replace(f"file={option_value(str(self.config.trace))}", f"file={option_value(trace)}")
            )
        self.argv = argv
        self.log_name = log


def check_caps(write_log: Path, trace: Path, caps: RecordingCaps, *, what: str) -> None:
    """Raise :class:`~harness.errors.StreamOverCap` when the write log or the trace is past its cap."""
    for path, cap, which in ((write_log, caps.log_bytes, "write log"), (trace, caps.trace_bytes, "trace")):
        try:
            size = os.stat(path).st_size
        except OSError:
            continue
        if size > cap:
            why = f" ({caps.why})" if which == "write log" and caps.why else ""
            raise StreamOverCap(
                f"the recording's {which} grew to {size / 2**20:.0f} MiB, past its cap of "
                f"{cap / 2**20:.0f} MiB{why}, {what}: the guest writes far more than the cell's disk"
            )


def guest_drive(config: VMConfig) -> Drive:
    (disk,) = [d for d in config.drives if d.node == DISK_NODE]
    return disk


def stream_key(cell: Cell, guest: Guest, opts: RunOptions, config: VMConfig) -> tuple[str, dict[str, Any]]:
    """The cache key of ``cell``'s stream and what it hashes."""
    material = {
        "stream_version": VERSION,
        "snapshot": snapshot.key_material(
            config,
            recipe_hash=guest.recipe_hash,
            qemu_version=tool_version(config.qemu, runs_as=config.runs_as),
            disk_bytes=cell.image.size,
        ),
        "workload": workload_line(cell, opts),
        "drive": guest_options(guest_drive(config).argv()[1]),
    }
    # the image path is not the stream's: the key material names it by a placeholder already
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]
    return digest, material


def stream_path(results_dir: Path, key: str) -> Path:
    return results_dir / "streams" / f"{key}.json"


def load_cached(path: Path) -> Stream | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    return parse_stream(text, source=str(path))


def record(
    cell: Cell, guest: Guest, opts: RunOptions, log_dir: Path, *, caps: RecordingCaps | None = None
) -> Stream:
    """Run one recording sample of ``cell`` and return its stream (not cached).

    Its boot and workload have ``opts``' deadlines; its write log and trace stay within ``caps``
    (:func:`recording_caps` of the cell's disk unless given), checked while it runs and as the trace
    is parsed (:class:`~harness.errors.StreamOverCap`)."""
    caps = caps or recording_caps(cell.image.size)
    log_dir.mkdir(parents=True, exist_ok=True)
    image = opts.work_dir / f"{cell.id}.record.{cell.image.format.value}"
    write_log = opts.work_dir / f"{cell.id}.record.writelog"
    trace = log_dir / "record.trace"
    for path in (write_log, trace):
        path.unlink(missing_ok=True)
    # a fresh image, or a fresh overlay over the cell's chain (the guest sampler's disk)
    chain.create_disk(image, cell, work_dir=opts.work_dir, binaries=opts.binaries)
    try:
        base = vm_config(cell, guest, opts, image)
        disk = guest_drive(base)
        drive = guest_options(disk.argv()[1])
        logged = LoggedDrive(
            **{f.name: getattr(disk, f.name) for f in dataclasses.fields(Drive)}, log=write_log
        )
        values = {f.name: getattr(base, f.name) for f in dataclasses.fields(VMConfig)}
        drives = [logged if d.node == DISK_NODE else d for d in base.drives]
        config = RecordingConfig(**{**values, "drives": drives}, trace=trace)
        vm = RecordingMachine(config, log_dir, name=f"{cell.id}-record", caps=caps)
        with vm:
            parse_ready(vm.wait_event("ready", timeout_s=opts.boot_timeout_s, what="ready line"))
            vm.send_control(workload_line(cell, opts))
            vm.wait_event("start", timeout_s=opts.boot_timeout_s, what="workload start")
            for traced_event in WORKLOAD_EVENTS:
                vm.qmp("trace-event-set-state", name=traced_event, enable=True)
            t0 = time.monotonic()
            event = vm.wait_event("report", timeout_s=opts.workload_timeout_s, what="workload report")
            host_s = time.monotonic() - t0
            # within the same deadline: a guest that never powers off fails the recording
            vm.wait_guest_stopped(timeout_s=max(opts.workload_timeout_s - host_s, 0.0))
            image_name, log_name = vm.image_name, vm.log_name
        # what QEMU wrote up to its exit
        check_caps(write_log, trace, caps, what="when QEMU exited")
        report = parse_report(event, workload=cell.workload.name.value)
        if not report.ok:
            raise ProtocolError(f"the recording sample failed: {report.error or 'no reason given'}")
        with trace.open(encoding="utf-8", errors="replace") as lines:
            traced = parse_trace(lines, image=image_name, log=log_name, max_issues=MAX_REQUESTS * 4)
        with write_log.open("rb") as fh:
            entries = parse_log(fh)
        merged = merge(entries, traced, disk_bytes=cell.image.size, drive=drive)
    finally:
        image.unlink(missing_ok=True)
        write_log.unlink(missing_ok=True)
    return replace(
        merged.stream,
        source={
            "cell": cell.id,
            "recording_total_s": report.total_s,
            # the workload as the host clocked it: what a head's recording deadline follows
            "recording_host_s": round(host_s, 3),
            "unmatched_issues": merged.unmatched_issues,
            "entries_before_start": merged.unlogged_entries,
        },
    )


def cached_stream(
    cell: Cell, guest: Guest, opts: RunOptions, log_dir: Path, *, caps: RecordingCaps | None = None
) -> tuple[Path, Stream]:
    """``cell``'s stream from the cache, recorded first (within ``caps``, see :func:`record`) if it is
    not there."""
    key, material = stream_key(cell, guest, opts, vm_config(cell, guest, opts, opts.work_dir / "@"))
    path = stream_path(opts.results_dir, key)
    stream = load_cached(path)
    if stream is None:
        stream = record(cell, guest, opts, log_dir, caps=caps)
        stream = replace(stream, source={**stream.source, "key": key})
        write_json_atomic(path, stream.as_dict())
        (path.parent / f"{key}.key.json").write_text(json.dumps(material, indent=1, sort_keys=True))
    return path, stream
