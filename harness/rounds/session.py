"""A session on one runner: checks, the guest, the accelerator, then cells.

:func:`open_session` does everything that must happen once before any cell
runs (work dir checks, guest build, accelerator choice, machine info); the
returned :class:`Session` runs cells.  :func:`run_cells` is the plain loop
behind ``diskbench run``; sweeps drive a session themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.host.hostinfo import machine_info
from harness.record import MachineInfo, Record, RecordDir, SubjectInfo, VMInfo, run_records
from harness.record.identity import fingerprint
from harness.rounds.cell import new_run_id, run_cell
from harness.sample import images
from harness.sample.accel import choose_accel
from harness.sample.guest_sampler import Guest, RunOptions, Sampler
from harness.spec import Cache, Cell, Measure
from harness.subject.binaries import ON_PATH, Binaries
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
            progress=progress,
            label=label,
            where=where,
            existing=existing,
            of=of,
            upto=upto,
            sampler=sampler or sampler_for(cell),
        )


def open_session(
    *,
    caches: Iterable[Cache],
    repeat: int = 3,
    accel: str = "auto",
    work_dir: Path,
    results_dir: Path,
    boot_timeout_s: float | None = None,
    workload_timeout_s: float = 1800.0,
    mem_mib: int = 256,
    smp: int = 1,
    keep_images: bool = False,
    extra_append: Sequence[str] = (),
    start: str = "cold",
    progress: Callable[[str], None] = lambda _msg: None,
    guest: Any = None,
    run_id: str | None = None,
    policy: Policy | None = None,
    recipe_dir: Path | None = None,
    binaries: Binaries = ON_PATH,
) -> Session:
    """Check the work dir, build the guest, choose the accelerator: once per session.

    ``binaries`` are the QEMU and qemu-img every sample of the session runs
    (and the machine info names).  ``policy`` adds its extra drive options to every sample and is recorded
    in the subject; ``recipe_dir`` builds the guest of another checkout's
    ``images/`` (a gate's base or head).
    """
    from harness.guest import build_guest
    from harness.paths import IMAGES_DIR

    work_dir = work_dir.resolve()
    fstype = images.check_work_dir(work_dir, set(caches))
    if guest is None:
        guest = build_guest(recipe_dir=recipe_dir or IMAGES_DIR, log=progress)
    choice = choose_accel(accel, guest.kernel, guest.initrd, warn=progress, qemu=binaries.qemu)
    progress(f"accel: {choice.accel} ({choice.reason}); work dir {work_dir} on {fstype}")
    opts = RunOptions(
        accel=choice.accel,
        accel_reason=choice.reason,
        work_dir=work_dir,
        results_dir=results_dir.resolve(),
        run_id=run_id or new_run_id(),
        repeat=repeat,
        boot_timeout_s=boot_timeout_s or BOOT_TIMEOUT_S[choice.accel],
        workload_timeout_s=workload_timeout_s,
        mem_mib=mem_mib,
        smp=smp,
        keep_images=keep_images,
        extra_append=tuple(extra_append),
        start=start,
        drive_options=policy.drive_options if policy else (),
        binaries=binaries,
    )
    machine = MachineInfo(
        machine_info(work_dir, accel=choice.accel, accel_reason=choice.reason, binaries=binaries)
    )
    subject = guest_subject(guest)
    if policy is not None:
        subject = subject.with_values(policy=policy.as_dict())
    return Session(guest=guest, opts=opts, machine=machine, subject=subject)


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    records: list[Record]

    @property
    def total_samples(self) -> int:
        return sum(len(r.samples) for r in self.records)

    @property
    def failed_samples(self) -> int:
        return sum(len(r.failed) for r in self.records)


def sampler_for(cell: Cell) -> Sampler | None:
    """How ``cell``'s samples are measured: a replay cell's by replay, others by a guest (None)."""
    if cell.measure is Measure.REPLAY:
        from harness.sample.replay.sample import replay_sample

        return replay_sample
    return None


def run_cells(
    cells: Sequence[Cell],
    *,
    progress: Callable[[str], None] = lambda _msg: None,
    **session_args: Any,
) -> RunResult:
    """Measure every cell ``repeat`` times; bad input fails before anything is created.

    ``session_args`` are :func:`open_session`'s, ``binaries`` among them."""
    from harness.errors import UsageError
    from harness.sample.capabilities import unsupported_reason

    session = open_session(caches={c.drive.cache for c in cells}, progress=progress, **session_args)
    # probed in the work dir open_session has checked, as a sweep does, before any image exists
    for cell in cells:
        reason = unsupported_reason(cell, session.opts.work_dir, session.opts.binaries)
        if reason:
            raise UsageError(f"{cell.id}: {reason}: use aio=threads")
    records = []
    for number, cell in enumerate(cells, start=1):
        _, record = session.run_cell(cell, progress=progress, label=f"[{number}/{len(cells)}] ")
        records.append(record)
    return RunResult(
        run_dir=run_records(session.opts.results_dir, session.opts.run_id).directory,
        records=records,
    )
