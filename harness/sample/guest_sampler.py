"""Cell -> record: fresh image per sample, one guest per sample, failures captured.

A sample that fails (boot timeout, panic, bad report, corrupt image) becomes
a sample with ``status: error``, its reason and the console tail; the run
goes on.  The record is rewritten atomically after every sample, so a crash
loses at most the sample in flight.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from harness.errors import GuestBuildError, HarnessError, ProtocolError
from harness.host.workdir import image_path as sample_image_path
from harness.record.model import Sample
from harness.sample import chain, images, snapshot
from harness.sample.clean import clean_sample
from harness.sample.host_figures import BLOCKSTATS_FIELDS, PROC_IO_FIELDS, cpu_delta, delta, sample_metrics
from harness.sample.pairing import Crossed, Pairing, meet
from harness.sample.protocol import GuestReport, parse_ready, parse_report
from harness.sample.vm import DISK_NODE, PAYLOAD_SERIAL, TOOLS_SERIAL, Drive, Machine, VMConfig, cell_drive
from harness.spec import Aio, CacheState, Cell, Interface, Workload
from harness.subject.binaries import Binaries
from harness.subject.policy import options_for
from harness.untrusted import STRING_CHARS
from harness.workloads import parse_outputs
from harness.workloads.latency import BOUNDARIES_NS, histograms_from_blockstats


class Guest(Protocol):
    """What the runner needs of a built guest (see :mod:`harness.guest`)."""

    kernel: Path
    initrd: Path
    payloads: dict[str, Path]
    tools: Path | None
    recipe_hash: str
    kernel_version: str


@dataclass(frozen=True)
class RunOptions:
    accel: str
    accel_reason: str
    work_dir: Path
    results_dir: Path
    run_id: str
    # the QEMU and qemu-img every sample runs
    binaries: Binaries
    repeat: int = 3
    boot_timeout_s: float = 120.0
    workload_timeout_s: float = 1800.0
    mem_mib: int = 256
    smp: int = 1
    keep_images: bool = False
    extra_append: tuple[str, ...] = ()
    drive_options: tuple[tuple[str, str], ...] = ()
    # QEMU's latency histograms of the disk under test (off only to measure their cost)
    latency_histograms: bool = True
    # cold | snapshot | auto (see harness.sample.snapshot)
    start: str = "cold"


def vm_config(cell: Cell, guest: Guest, opts: RunOptions, image: Path) -> VMConfig:
    drives = []
    if cell.workload.name is Workload.INSTALL:
        drives.append(
            Drive(
                node="payload",
                path=guest.payloads[cell.workload.payload],
                format="raw",
                interface=Interface.VIRTIO_BLK,
                readonly=True,
                serial=PAYLOAD_SERIAL,
            )
        )
    tools = cell.workload.kind.tools
    if tools:
        if guest.tools is None:
            raise GuestBuildError(
                f"the {cell.workload.name} workload needs the guest's tools drive, and this guest has none: "
                f"add {', '.join(tools)} to [tools] in images/recipe.toml and rebuild (`diskbench guest build`)"
            )
        drives.append(
            Drive(
                node="tools",
                path=guest.tools,
                format="raw",
                interface=Interface.VIRTIO_BLK,
                readonly=True,
                serial=TOOLS_SERIAL,
            )
        )
    drives.append(
        cell_drive(
            cell,
            image,
            # the policy's options this cell takes (qcow2's cache options not on a raw image)
            options=options_for(cell, opts.drive_options),
            backing=chain.drive_backing(cell, work_dir=opts.work_dir, binaries=opts.binaries),
        )
    )
    return VMConfig(
        kernel=guest.kernel,
        initrd=guest.initrd,
        # the workload goes over the control port (workload_line), not the command line
        append=[word for word in opts.extra_append if not word.startswith(WORKLOAD_PREFIX)],
        drives=drives,
        accel=opts.accel,
        mem_mib=opts.mem_mib,
        smp=opts.smp,
        qemu=opts.binaries.qemu,
        runs_as=opts.binaries.runs_as,
        control=True,
    )


WORKLOAD_PREFIX = "diskbench."


def check_outputs(cell: Cell, outputs: dict[str, str]) -> None:
    """The report's outputs agree with what the cell asked for, as its workload checks them
    (fio: the targets it ran); :class:`ProtocolError` if not."""
    check = cell.workload.kind.check_outputs
    if check is not None:
        check(cell.workload.params(), outputs)


def workload_line(cell: Cell, opts: RunOptions) -> str:
    """What the host sends the guest at ready: the workload's diskbench.* words (later win)."""
    extra = [word for word in opts.extra_append if word.startswith(WORKLOAD_PREFIX)]
    return " ".join([*cell.workload.kernel_args(), *extra])


@dataclass
class GuestRun:
    """What one boot of the guest gave: its report event and the host's view."""

    argv: list[str]
    ready: dict[str, Any]
    event: dict[str, Any]
    boot_s: float
    workload_s: float
    stopped: bool
    start: str
    blockstats: dict[str, int]
    qemu_io: dict[str, int]
    garbage: list[str]
    console_tail: str
    # read, write, flush -> {"boundaries", "bins"} (ns) of the workload; empty when off
    latency_histograms: dict[str, Any] = field(default_factory=dict)
    start_fallback: str | None = None
    # what QEMU had of the CPU while the workload ran (None: the kernel did not tell)
    cpu: dict[str, float] | None = None
    # with a partner (a gate's pair taken together): whether the workload started at the same
    # moment as the partner's, when it was sent (the host's monotonic clock), the CPUs QEMU ran on
    met: bool = False
    sent_at_s: float | None = None
    cpus: list[int] | None = None
    # a crossed pair's (harness.sample.pairing.Crossing): the pair's CPUs, the time on each, the swaps
    crossed: Crossed | None = None
    # whether QEMU ran at the pair's raised priority (harness.sample.pairing.PAIR_NICE)
    raised: bool = False


def _create_scratch(path: Path, cell: Cell, opts: RunOptions) -> None:
    chain.create_disk(path, cell, work_dir=opts.work_dir, binaries=opts.binaries)


def boot_and_run(
    cell: Cell,
    guest: Guest,
    opts: RunOptions,
    image: Path,
    log_dir: Path,
    *,
    together: Pairing | None = None,
) -> GuestRun:
    """Boot the guest on ``image``, wait for its report, read the counters, shut down.

    ``together``: the pair this sample belongs to (:mod:`harness.sample.pairing`): QEMU and its
    threads run on the pair's CPU, and the workload is sent when the partner's guest is ready too.
    """
    config = vm_config(cell, guest, opts, image)
    scratch = opts.work_dir / f"{cell.id}.snapshot-scratch.{cell.image.format.value}"
    if together is not None:
        config = replace(config, affinity=together.cpus)
        # the partner may build the same snapshot at the same moment
        scratch = scratch.with_name(
            f"{cell.id}.{uuid.uuid4().hex[:8]}.snapshot-scratch.{cell.image.format.value}"
        )

    def wait_ready(vm: Machine, timeout_s: float) -> dict[str, Any]:
        return parse_ready(vm.wait_event("ready", timeout_s=timeout_s, what="ready line"))

    with snapshot.start_guest(
        config,
        log_dir,
        name=cell.id,
        start=snapshot.parse_start(opts.start),
        cell=cell,
        plan=snapshot.SnapshotPlan(
            recipe_hash=guest.recipe_hash,
            scratch_path=scratch,
            make_scratch=lambda path: _create_scratch(path, cell, opts),
        ),
        boot_timeout_s=opts.boot_timeout_s,
        wait_ready=wait_ready,
    ) as started:
        vm = started.vm
        raised = together.join(vm.pid) if together is not None else False
        try:
            return _run_workload(started, config, cell, opts, together=together, raised=raised)
        finally:
            if together is not None:
                together.leave(vm.pid)


def _run_workload(
    started: snapshot.Started,
    config: VMConfig,
    cell: Cell,
    opts: RunOptions,
    *,
    together: Pairing | None,
    raised: bool,
) -> GuestRun:
    """:func:`boot_and_run`'s measured part, on a guest ``started`` and ready: send the workload
    (with the partner's, where ``together``), wait for its report and the power-off within the
    workload's deadline, read QEMU's counters before and after; ``raised``: the pair's nice was set."""
    vm = started.vm
    met = meet(together)
    # the workload's time and its vCPU's waits start before the line is sent: once sent, the
    # guest runs (and waits for a CPU) however late this thread is to read a clock
    cpu_before = vm.cpu_times()
    sent_s = vm.elapsed_s
    sent_at_s = time.monotonic()
    vm.send_control(workload_line(cell, opts))
    # every wait on the guest from here to its power-off sits within the workload's deadline
    deadline = sent_at_s + opts.workload_timeout_s
    vm.wait_event(
        "start",
        timeout_s=min(opts.boot_timeout_s, deadline - time.monotonic()),
        what="workload start",
        limit_s=min(opts.boot_timeout_s, opts.workload_timeout_s),
    )
    boot_s = vm.elapsed_s
    if opts.latency_histograms:
        # setting the boundaries resets the counts: the histograms hold the workload's IO only
        (disk,) = [d for d in config.drives if d.node == DISK_NODE]
        vm.set_latency_histograms(disk, BOUNDARIES_NS)
    stats_before = vm.blockstats(DISK_NODE)
    io_before = vm.proc_io()
    event = vm.wait_event(
        "report",
        timeout_s=deadline - time.monotonic(),
        what="workload report",
        limit_s=opts.workload_timeout_s,
    )
    # -no-shutdown keeps QEMU alive after the guest powers off, to read its counters; a guest
    # that does not power off by the deadline fails the sample (GuestTimeout)
    vm.wait_guest_stopped(timeout_s=deadline - time.monotonic())
    # the workload as the host clocks it: from the line the host sent to the guest's
    # power-off, whatever the guest says of its own time or when it reports
    workload_s = vm.elapsed_s - sent_s
    cpu = cpu_delta(cpu_before, vm.cpu_times())
    crossed = together.leave(vm.pid) if together is not None else None
    stats_after = vm.blockstats(DISK_NODE)
    io_after = vm.proc_io()
    histograms = histograms_from_blockstats(stats_after) if opts.latency_histograms else {}
    if together is not None:
        # the partner's workload runs on: nothing of this side's goes on meanwhile
        together.end(timeout_s=opts.workload_timeout_s)
    return GuestRun(
        argv=vm.argv,
        ready=started.ready,
        event=event,
        boot_s=boot_s,
        workload_s=workload_s,
        stopped=True,
        start=started.start,
        start_fallback=started.fallback,
        blockstats=delta(stats_before, stats_after, BLOCKSTATS_FIELDS),
        qemu_io=delta(io_before, io_after, PROC_IO_FIELDS),
        garbage=vm.garbage(),
        console_tail=vm.console_tail(),
        latency_histograms={word: h.as_dict() for word, h in histograms.items()},
        cpu=cpu,
        met=met,
        sent_at_s=sent_at_s if together is not None else None,
        cpus=vm.cpus() if together is not None else None,
        crossed=crossed,
        raised=raised,
    )


def prime(
    cell: Cell, guest: Guest, opts: RunOptions, image: Path, log_dir: Path, host: dict[str, Any]
) -> None:
    """The unmeasured first run of a warm or cold sample; then drop the cache for cold."""
    first = boot_and_run(cell, guest, opts, image, log_dir / "priming")
    report = parse_report(first.event, workload=cell.workload.name.value)
    host["priming"] = {"status": report.status, "total_s": report.total_s, "boot_s": first.boot_s}
    if not report.ok:
        raise ProtocolError(f"the priming run failed: {report.error or f'fsck exit {report.fsck_rc}'}")
    if cell.cache_state is CacheState.COLD:
        host["cache_drop"] = images.drop_page_cache(image)
    host["allocated_before"] = images.allocated_bytes(image)


def touch_guest(guest: Guest) -> None:
    """Mark the guest build as in use (pruning spares it); fail clearly if it is gone."""
    build_dir = guest.kernel.parent
    try:
        os.utime(build_dir)
    except OSError as exc:
        raise GuestBuildError(
            f"the guest build {build_dir} is gone ({exc.strerror}): run `diskbench guest build`"
        ) from exc


# one sample of a cell: (cell, guest, options, sample index, log dir) -> the sample
Sampler = Callable[[Cell, "Guest", "RunOptions", int, Path], Sample]


def paired_sampler(together: Pairing) -> Sampler:
    """A sampler of guest samples taken with a partner's (the other side of a gate's pair):
    both guests on one CPU, their workloads started at the same moment (:mod:`harness.sample.pairing`)."""

    def sample(cell: Cell, guest: Guest, opts: RunOptions, index: int, log_dir: Path) -> Sample:
        return run_sample(cell, guest, opts, index, log_dir, together=together)

    return sample


def run_sample(
    cell: Cell,
    guest: Guest,
    opts: RunOptions,
    index: int,
    log_dir: Path,
    *,
    together: Pairing | None = None,
) -> Sample:
    """One measured run of ``cell``; never raises for a failure of the sample itself.

    ``together``: see :func:`boot_and_run` (the priming run of a warm or cold sample runs alone)."""
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    # a name of its own: the two sides of a pair may run the same cell in one work dir at once
    name = cell.id if together is None else f"{cell.id}.{uuid.uuid4().hex[:8]}"
    image_path = sample_image_path(opts.work_dir, name, cell.image.format.value)
    # the host's own figures: free-form, as QEMU and qemu-img give them
    host: dict[str, Any] = {"cache_state": cell.cache_state.value}
    sample = Sample(
        index=index,
        status="error",
        started_at=started,
        host=host,
        logs={
            "console": str(log_dir / "console.log"),
            "qemu_stderr": str(log_dir / "qemu.stderr"),
            "report": str(log_dir / "report.jsonl"),
        },
    )
    try:
        touch_guest(guest)
        _prepare_image(cell, guest, opts, image_path, log_dir, host)
        run = boot_and_run(cell, guest, opts, image_path, log_dir, together=together)
        sample = _with_run(sample, run, together, host)
        report, extra_metrics, sample = _with_report(sample, run, cell)
        check = _check_image(image_path, cell, opts, host)
        host["wall_s"] = time.monotonic() - t0
        host["overhead_s"] = host["wall_s"] - run.boot_s - report.total_s
        host["written_bytes_source"] = "wchar" if cell.drive.aio is Aio.THREADS else "write_bytes"
        sample = replace(sample, metrics=sample_metrics(report, host, cell.drive.aio) | extra_metrics)
        sample = _judged(sample, report, check, run)
    except HarnessError as exc:
        sample = replace(
            sample,
            reason=exc.message,
            error_type=type(exc).__name__,
            log_tail=exc.log_tail or _tail_of(log_dir / "console.log"),
        )
        host["wall_s"] = time.monotonic() - t0
    except OSError as exc:
        # a file of the sample itself (its image vanished, its log dir is gone):
        # the sample's failure with its cause, not the sweep's
        where = f" ({exc.filename})" if exc.filename else ""
        sample = replace(
            sample,
            reason=f"file error in the sample{where}: {exc.strerror or exc}",
            error_type="WorkDirFull" if exc.errno == errno.ENOSPC else type(exc).__name__,
            log_tail=_tail_of(log_dir / "console.log"),
        )
        host["wall_s"] = time.monotonic() - t0
    finally:
        if not opts.keep_images:
            image_path.unlink(missing_ok=True)
    # the guest's and the logs' text is untrusted: capped and made inert before it is stored
    return clean_sample(sample)


def _prepare_image(
    cell: Cell, guest: Guest, opts: RunOptions, image_path: Path, log_dir: Path, host: dict[str, Any]
) -> None:
    """Create the sample's disk (its chain), prime it for a warm or cold sample; ``host`` gets the
    creation's figures and the image's resident bytes."""
    created = chain.create_disk(image_path, cell, work_dir=opts.work_dir, binaries=opts.binaries, host=host)
    host["create_s"] = created.create_s
    host["allocated_before"] = created.allocated_bytes
    if created.retries:
        host["create_retries"] = list(created.retries)
    if cell.cache_state is not CacheState.FRESH:
        prime(cell, guest, opts, image_path, log_dir, host)
    host["resident_before"] = images.resident_bytes(image_path)


def _with_run(sample: Sample, run: GuestRun, together: Pairing | None, host: dict[str, Any]) -> Sample:
    """``sample`` with what the guest's run gave: its argv, ready line and report, and ``host``
    (the sample's host figures) with the host's figures of it (the pair's, QEMU's CPU, times,
    counters, histograms); a ProtocolError where the guest sent lines that are not JSON."""
    if together is not None:
        host["together"] = {
            "cpu": together.cpu,
            "met": run.met,
            "cpus": run.cpus,
            "sent_at_s": run.sent_at_s,
            "mode": together.how.value,
            "nice": together.nice if run.raised else 0,
        }
        if run.crossed is not None:
            host["together"]["crossed"] = run.crossed.as_dict()
            # a move refused leaves the sides where the scheduler put them: not a crossed pair
            if not run.crossed.ok:
                host["together"]["met"] = False
    if run.cpu is not None:
        host["cpu"] = run.cpu
    sample = replace(sample, argv=run.argv, guest_ready=run.ready, report=run.event)
    host.update(
        boot_s=run.boot_s,
        workload_s=run.workload_s,
        guest_stopped=run.stopped,
        start=run.start,
        blockstats=run.blockstats,
        qemu_io=run.qemu_io,
    )
    if run.latency_histograms:
        host["latency_histograms"] = run.latency_histograms
    if run.start_fallback:
        host["start_fallback"] = run.start_fallback
    if run.garbage:
        raise ProtocolError(
            f"guest sent {len(run.garbage)} line(s) that are not JSON: {run.garbage[0][:80]!r}"
        )
    return sample


def _with_report(sample: Sample, run: GuestRun, cell: Cell) -> tuple[GuestReport, dict[str, float], Sample]:
    """The guest's report, the metrics parsed from its outputs, and ``sample`` with the fields
    parsed from them (an output cut in the record is kept parsed, not as a stub); an output a
    failed workload sent that cannot be parsed adds to the report's error."""
    report = parse_report(run.event, workload=cell.workload.name.value)
    try:
        extra_metrics, extra_fields = parse_outputs(report.workload, report.outputs)
        check_outputs(cell, report.outputs)
    except ProtocolError as exc:
        if report.status == "ok":
            raise
        # the guest failed and says why below; what it sent of its outputs adds to that
        report = replace(report, error=f"{report.error or 'no reason given'} ({exc.message})")
        extra_metrics, extra_fields = {}, {}
    sample = replace(sample, details=extra_fields)
    outputs = run.event.get("outputs")
    if extra_fields and isinstance(outputs, dict):
        # an output the record could keep only cut (fio's JSON) is kept parsed, not as a stub
        outputs = {
            k: f"[{len(v)} chars, parsed into the sample's fields]"
            if isinstance(v, str) and len(v) > STRING_CHARS
            else v
            for k, v in outputs.items()
        }
        sample = replace(sample, report={**run.event, "outputs": outputs})
    return report, extra_metrics, sample


def _check_image(image_path: Path, cell: Cell, opts: RunOptions, host: dict[str, Any]) -> images.CheckResult:
    """``qemu-img check`` of the sample's image after the run; ``host`` gets its result and the
    image's allocated and mapped bytes."""
    # how qemu-img opens the image: the side's binary and account, the image's secret and chain
    how: dict[str, Any] = {
        "qemu_img": opts.binaries.qemu_img,
        "runs_as": opts.binaries.runs_as,
        "encrypted": cell.image.encrypted,
        "backed": cell.backing is not None,
    }
    check = images.check(image_path, cell.image.format, **how)
    host["check"] = {"rc": check.returncode, "verdict": check.verdict, "report": check.report}
    host["allocated_after"] = images.allocated_bytes(image_path)
    host["map_after"] = images.mapped_bytes(image_path, cell.image.format, **how)
    return check


def _judged(sample: Sample, report: GuestReport, check: images.CheckResult, run: GuestRun) -> Sample:
    """``sample`` ok, or failed with why: the guest's workload or its fsck failed, or qemu-img
    check fails the sample; leaked clusters are a warning."""
    if report.status != "ok":
        reason = f"guest workload failed: {report.error or 'no reason given'}"
        return replace(sample, reason=reason, log_tail=run.console_tail)
    if report.fsck_rc not in (None, 0):
        reason = f"e2fsck -fn in the guest found errors (exit {report.fsck_rc})"
        return replace(sample, reason=reason, log_tail=run.console_tail)
    if check.fails_sample:
        return replace(sample, reason=f"qemu-img check says {check.verdict} (exit {check.returncode})")
    warning = "qemu-img check found leaked clusters (exit 3)" if check.verdict == "leaks" else None
    return replace(sample, status="ok", warning=warning)


def _tail_of(path: Path, max_chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-max_chars:]
    except OSError:
        return ""
