"""A session on one runner: checks, the guest, the accelerator, then cells.

:func:`open_session` does everything that must happen once before any cell
runs (work dir checks, guest build, accelerator choice, machine info); the
returned :class:`Session` runs cells.  :func:`run_cells` is the plain loop
behind ``diskbench run``; sweeps drive a session themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.host import hostdisk
from harness.host.hostinfo import machine_info
from harness.record import MachineInfo, Record, RecordDir, SampleTally, SubjectInfo, VMInfo, run_records
from harness.record.identity import fingerprint
from harness.rounds.cell import Turn, new_run_id, run_cell
from harness.sample import images
from harness.sample.accel import choose_accel
from harness.sample.guest_sampler import Guest, RunOptions, Sampler
from harness.spec import Cache, Cell, Measure
from harness.subject.binaries import Binaries, QemuChoice
from harness.subject.policy import Policy

BOOT_TIMEOUT_S = {"kvm": 30.0, "tcg": 120.0}


def guest_subject(guest: Any) -> SubjectInfo:
    return SubjectInfo(
        {
            "guest": {
                "recipe_hash": guest.recipe_hash,
                "kernel_version": guest.kernel_version,
                "packages": dict(sorted(guest.packages.items())),
            }
        }
    )


@dataclass
class Session:
    guest: Guest
    opts: RunOptions
    machine: MachineInfo
    subject: SubjectInfo = field(default_factory=SubjectInfo)

    @property
    def fingerprint(self) -> str:
        return fingerprint(
            self.machine, self.subject, VMInfo({"mem_mib": self.opts.mem_mib, "smp": self.opts.smp})
        )

    def run_cell(
        self,
        cell: Cell,
        *,
        where: RecordDir | None = None,
        existing: Record | None = None,
        progress: Callable[[str], None] = lambda _msg: None,
        label: str = "",
        of: int | None = None,
        upto: int | None = None,
        sampler: Sampler | None = None,
    ) -> tuple[Path, Record]:
        """``cell``'s samples up to ``upto``, taken by ``sampler`` (else :func:`sampler_for`'s)."""
        return run_cell(
            cell,
            self.guest,
            self.opts,
            machine=self.machine,
            subject=self.subject,
            turn=Turn(
                where=where,
                existing=existing,
                upto=upto,
                of=of,
                sampler=sampler or sampler_for(cell),
                label=label,
                progress=progress,
            ),
        )


@dataclass(frozen=True)
class MachineOptions:
    """Where and how samples run: the machine options of ``run``, ``sweep``, ``gate`` and
    ``bisect``, built once by the CLI.

    ``binaries`` are the QEMU and qemu-img every sample runs (and the machine info names);
    ``results_dir`` is where records and logs go.  ``boot_timeout_s`` of None takes the
    accelerator's (:data:`BOOT_TIMEOUT_S`).
    """

    binaries: Binaries
    work_dir: Path
    results_dir: Path
    accel: str = "auto"
    start: str = "auto"
    boot_timeout_s: float | None = None
    workload_timeout_s: float = 1800.0
    #: the host disk model ``work_dir`` is on (:mod:`harness.host.hostdisk`); native: the runner's
    host_disk: str = "native"


@dataclass(frozen=True)
class SessionOptions:
    """What every sample of a session runs with: the machine's options, the samples per cell, the
    guest's size and kernel command line, whether images are kept."""

    machine: MachineOptions
    repeat: int = 3
    mem_mib: int = 256
    smp: int = 1
    keep_images: bool = False
    extra_append: tuple[str, ...] = ()


def open_session(
    caches: Iterable[Cache],
    options: SessionOptions,
    *,
    progress: Callable[[str], None] = lambda _msg: None,
    guest: Any = None,
    run_id: str | None = None,
    policy: Policy | None = None,
    recipe_dir: Path | None = None,
) -> Session:
    """Check the work dir, build the guest, choose the accelerator: once per session.

    ``policy`` adds its extra drive options to every sample and is recorded
    in the subject; ``recipe_dir`` builds the guest of another checkout's
    ``images/`` (a gate's base or head).
    """
    from harness.guest import build_guest
    from harness.paths import IMAGES_DIR

    machine = options.machine
    work_dir = machine.work_dir.resolve()
    fstype = images.check_work_dir(work_dir, set(caches))
    if guest is None:
        guest = build_guest(recipe_dir=recipe_dir or IMAGES_DIR, log=progress)
    choice = choose_accel(
        machine.accel,
        guest.kernel,
        guest.initrd,
        warn=progress,
        qemu=machine.binaries.qemu,
        runs_as=machine.binaries.runs_as,
    )
    progress(f"accel: {choice.accel} ({choice.reason}); work dir {work_dir} on {fstype}")
    opts = RunOptions(
        accel=choice.accel,
        accel_reason=choice.reason,
        work_dir=work_dir,
        results_dir=machine.results_dir.resolve(),
        run_id=run_id or new_run_id(),
        repeat=options.repeat,
        boot_timeout_s=machine.boot_timeout_s or BOOT_TIMEOUT_S[choice.accel],
        workload_timeout_s=machine.workload_timeout_s,
        mem_mib=options.mem_mib,
        smp=options.smp,
        keep_images=options.keep_images,
        extra_append=options.extra_append,
        start=machine.start,
        drive_options=policy.drive_options if policy else (),
        binaries=machine.binaries,
    )
    info = MachineInfo(
        machine_info(
            work_dir,
            accel=choice.accel,
            accel_reason=choice.reason,
            binaries=machine.binaries,
            host_disk=hostdisk.identity(machine.host_disk),
        )
    )
    subject = guest_subject(guest)
    if policy is not None:
        subject = subject.with_values(policy=policy.as_dict())
    return Session(guest=guest, opts=opts, machine=info, subject=subject)


@dataclass(frozen=True)
class RunResult(SampleTally):
    run_dir: Path
    records: list[Record]


def sampler_for(cell: Cell) -> Sampler | None:
    """How ``cell``'s samples are measured: a replay cell's by replay, others by a guest (None)."""
    if cell.measure is Measure.REPLAY:
        from harness.sample.replay.sample import replay_sample

        return replay_sample
    return None


def with_binaries(options: SessionOptions, binaries: Binaries) -> SessionOptions:
    """``options`` with another QEMU build's binaries (one value of a QEMU axis)."""
    return replace(options, machine=replace(options.machine, binaries=binaries))


def build_sessions(
    caches: Iterable[Cache],
    options: SessionOptions,
    builds: Sequence[QemuChoice],
    *,
    progress: Callable[[str], None] = lambda _msg: None,
    run_id: str | None = None,
    policy: Policy | None = None,
) -> list[tuple[QemuChoice, Session]]:
    """A session per QEMU build of a QEMU axis, sharing one guest and one run id; each build's
    accelerator is checked with its own QEMU."""
    from harness.guest import build_guest

    guest = build_guest(log=progress)
    run_id = run_id or new_run_id()
    out = []
    for build in builds:
        progress(f"QEMU {build.name}: {build.binaries.qemu}")
        session = open_session(
            caches,
            with_binaries(options, build.binaries),
            progress=progress,
            guest=guest,
            run_id=run_id,
            policy=policy,
        )
        out.append((build, session))
    return out


def run_cells(
    cells: Sequence[Cell],
    options: SessionOptions,
    *,
    progress: Callable[[str], None] = lambda _msg: None,
    guest: Any = None,
    policy: Policy | None = None,
    builds: Sequence[QemuChoice] = (),
) -> RunResult:
    """Measure every cell ``options.repeat`` times; bad input fails before anything is created.

    ``guest`` and ``policy`` are :func:`open_session`'s.  With ``builds`` (a QEMU axis of two or
    more) every cell runs under each build in turn, its records in the run's ``qemu-NAME``
    directories (:meth:`RecordDir.build`)."""
    from harness.errors import UsageError
    from harness.sample.capabilities import unsupported_reason

    caches = {c.drive.cache for c in cells}
    if builds:
        sessions = build_sessions(caches, options, builds, progress=progress, policy=policy)
    else:
        single = open_session(caches, options, progress=progress, guest=guest, policy=policy)
        sessions = [(QemuChoice("", options.machine.binaries), single)]
    first = sessions[0][1]
    where = run_records(first.opts.results_dir, first.opts.run_id)
    # probed in the work dir open_session has checked, as a sweep does, before any image exists
    for cell in cells:
        for build, session in sessions:
            reason = unsupported_reason(cell, session.opts.work_dir, session.opts.binaries)
            if reason:
                under = f" under QEMU {build.name}" if build.name else ""
                raise UsageError(f"{cell.id}{under}: {reason}")
    records = []
    for number, cell in enumerate(cells, start=1):
        for build, session in sessions:
            label = f"[{number}/{len(cells)}{', QEMU ' + build.name if build.name else ''}] "
            _, record = session.run_cell(
                cell, where=where.build(build.name) if build.name else None, progress=progress, label=label
            )
            records.append(record)
    return RunResult(run_dir=where.directory, records=records)
