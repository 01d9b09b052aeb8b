"""A cell's samples: ask a sampler for one sample at a time, write the record after each.

A sample that fails is a sample with ``status: error`` (the sampler never raises for it);
the record is rewritten atomically after every sample, so a crash loses at most the
sample in flight.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.host import confine
from harness.record import (
    CellInfo,
    MachineInfo,
    Record,
    RecordDir,
    Sample,
    SubjectInfo,
    VMInfo,
    new_record,
    run_records,
    write_record,
)
from harness.sample.guest_sampler import Guest, RunOptions, Sampler, run_sample
from harness.spec import Cell


def new_run_id() -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class Turn:
    """How far one call takes a cell, where its record goes, and what it says as it goes
    (see :func:`run_cell`)."""

    where: RecordDir | None = None
    existing: Record | None = None
    upto: int | None = None
    of: int | None = None
    sampler: Sampler | None = None
    label: str = ""
    progress: Callable[[str], None] = lambda _msg: None


def run_cell(
    cell: Cell,
    guest: Guest,
    opts: RunOptions,
    *,
    machine: MachineInfo,
    subject: SubjectInfo,
    turn: Turn | None = None,
) -> tuple[Path, Record]:
    """Run the samples of ``cell`` up to sample number ``upto``, writing the record after each;
    returns the record's path and the record (``upto``, ``of``, ``where``, ``existing``,
    ``sampler``, ``label`` and ``progress`` are the ``turn``'s).

    ``sampler`` measures one sample (default :func:`run_sample`, a guest; a replay cell's is
    :func:`harness.sample.replay.sample.replay_sample`).  ``upto`` defaults to ``opts.repeat``
    (a round of a sweep or a gate passes its own number); ``of`` is the number the cell will have
    in the end, for the progress lines.  ``where`` the record and logs go defaults to a run's
    (``RESULTS/records/RUN_ID/CELL_ID.json``).  With ``existing`` (a record of this cell, same
    machine and subject) the run goes on from its next sample: records are a sweep's checkpoint.
    """
    turn = turn or Turn()
    where = turn.where or run_records(opts.results_dir, opts.run_id)
    existing, sampler, label, progress = turn.existing, turn.sampler, turn.label, turn.progress
    path = where.path(cell.id)
    record = existing or new_record(
        cell=CellInfo(cell.as_dict()),
        machine=machine,
        subject=subject,
        vm=VMInfo(
            {
                "accel": opts.accel,
                "accel_reason": opts.accel_reason,
                "mem_mib": opts.mem_mib,
                "smp": opts.smp,
                "boot_timeout_s": opts.boot_timeout_s,
                "workload_timeout_s": opts.workload_timeout_s,
                "confinement": confine.describe(opts.binaries.runs_as),
                "start": opts.start,
            }
        ),
        run_id=opts.run_id,
    )
    log_root = where.log_root(cell.id)
    upto = opts.repeat if turn.upto is None else turn.upto
    of = turn.of or upto
    for count in range(len(record.samples), upto):
        index = record.next_sample_index()
        progress(f"{label}{cell.id} sample {count + 1}/{of} ...")
        sample = (sampler or run_sample)(cell, guest, opts, index, log_root / f"sample-{index}")
        record = record.with_sample(sample)
        write_record(path, record)
        progress(f"{label}{cell.id} sample {count + 1}/{of}: {describe_sample(sample)}")
    return path, record


def describe_sample(sample: Sample) -> str:
    if not sample.ok:
        return f"FAILED: {'unknown reason' if sample.reason is None else sample.reason}"
    metrics = sample.metrics
    if sample.measure == "replay":
        parts = [f"replay {metrics['replay.wall_s']:.2f} s"]
        if "replay.write_p90_ms" in metrics:
            parts.append(f"write p90 {metrics['replay.write_p90_ms']:.2f} ms")
        return ", ".join(parts)
    parts = [f"total {metrics['total_s']:.2f} s", f"boot {metrics['host.boot_s']:.2f} s"]
    if "mib_per_s" in metrics:
        parts.append(f"{metrics['mib_per_s']:.1f} MiB/s")
    disagreement = clock_disagreement(metrics)
    return ", ".join(parts) + (f"; {disagreement}" if disagreement else "")


# how far the guest's own time may be from the host's clock of the workload before it is said
DISAGREE_FRACTION = 0.20
DISAGREE_S = 0.5


def clock_disagreement(metrics: Mapping[str, float]) -> str | None:
    """Where the guest's word on its time and the host's clock disagree, the line that says so.

    The guest's time is its phases with fsck (``total_s`` leaves fsck out, the
    host's span holds it); they disagree past 20 % of the host's time plus 0.5 s.
    """
    guest, host = metrics.get("total_s"), metrics.get("host.workload_s")
    if not isinstance(guest, (int, float)) or not isinstance(host, (int, float)):
        return None
    spent = guest + float(metrics.get("phase.fsck_s", 0.0))
    if abs(host - spent) <= DISAGREE_FRACTION * host + DISAGREE_S:
        return None
    return (
        f"the guest says {spent:.2f} s (total_s {guest:.2f} s + fsck), the host clocked its "
        f"workload at {host:.2f} s: the guest's own figures are not to be trusted"
    )
