"""The fio workload: fixed-size jobs with direct IO, fio's JSON parsed into figures.  Pure.

The guest runs the job file ``images/workloads/fio.fio`` (``fio --output-format=json``) on
the raw disk under test and on a file of the ext4 filesystem made on it (``diskbench.fio_target``
``raw``, ``file`` or ``both``), and sends fio's JSON per target as ``outputs.fio_raw_json`` and
``outputs.fio_file_json``, as bonnie's CSV line is sent.  Every job does a fixed amount of
IO (``size`` or ``number_ios``), never a fixed time, so that a slower disk takes longer and
its latencies, not the amount of work, change: sequential write and read in 1 MiB blocks at
queue depth 4, 4 KiB random write and read at queue depth 1 and 32, and 4 KiB writes with an
fsync after each.

:func:`parse_fio_json` gives, per job and direction, ``fio.JOB.iops``,
``fio.JOB.mib_per_s`` (higher is better), and the completion latency's mean, p50 and p99 in
milliseconds (``fio.JOB.clat_mean_ms``, ``clat_p50_ms``, ``clat_p99_ms``; lower is better),
from fio's ``clat_ns``.  A job that did both reads and writes is named ``JOB.read`` and
``JOB.write``.  The raw JSON is kept in the record (``fio_json.raw``, ``fio_json.file``).

The guest's output is untrusted: output that is not fio's JSON, a job that reports an error,
a figure that is not a number from 0 to :data:`MAX_FIGURE` (NaN and Infinity included: a
record may not hold them), a job whose name lacks its target's prefix or comes twice, or
more jobs than :data:`MAX_JOBS` is a :class:`~harness.errors.ProtocolError`: a failed
sample, never a crash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from harness.errors import ProtocolError, SpecError
from harness.sizes import format_size
from harness.untrusted import strict_json
from harness.workloads.metrics import Metric
from harness.workloads.params import MIB, Param, Parsed, Values, WorkloadKind, filesystem_room

#: the guest's outputs, per target it ran (diskbench.fio_target: raw, file or both); each
#: target's jobs are named with its prefix (raw-..., file-...), so their figures never collide
OUTPUT_KEYS = ("fio_raw_json", "fio_file_json")
_PREFIX = {"fio_raw_json": "raw-", "fio_file_json": "file-"}
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
#: the job file runs 7 jobs per target; a guest that reports many more is not running it
MAX_JOBS = 32

# the figures' names are patterns (harness.workloads.metrics.FIO_PATTERNS)
METRICS: tuple[Metric, ...] = ()


#: above any figure a disk gives (IOPS, bytes/s, nanoseconds: 1e15 ns is 11 days), and far
#: enough below float's end that sums and squares of many figures stay finite
MAX_FIGURE = 1e15


def _number(value: Any, what: str) -> float:
    """A figure of fio's JSON: a finite number from 0 to :data:`MAX_FIGURE` (fio writes no other)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(f"fio JSON: {what} is not a number: {value!r:.40}")
    if not 0 <= value <= MAX_FIGURE:  # NaN fails this too
        raise ProtocolError(f"fio JSON: {what} is {value!r:.40}, not a number from 0 to {MAX_FIGURE:g}")
    return float(value)


def _loads(text: str) -> Any:
    try:
        return strict_json(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"fio output is not JSON ({exc.msg} at line {exc.lineno})") from None
    except ValueError as exc:  # NaN, Infinity, too deep, or an integer of more than 4300 digits
        raise ProtocolError(f"fio output is not fio's JSON ({exc})") from None


def parse_fio_json(text: str, prefix: str = "") -> tuple[dict[str, float], dict[str, Any]]:
    """(figures, the parsed document) of fio's ``--output-format=json``; see the module's doc.

    Every job's name must start with ``prefix`` (the target's: ``raw-``, ``file-``) and be
    unique, so that no figure is silently replaced by another's.
    """
    doc = _loads(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list) or not doc["jobs"]:
        raise ProtocolError("fio JSON has no jobs: was it run with --output-format=json?")
    if len(doc["jobs"]) > MAX_JOBS:
        raise ProtocolError(
            f"fio JSON has {len(doc['jobs'])} jobs, more than the job file's (at most {MAX_JOBS})"
        )
    figures: dict[str, float] = {}
    seen: set[str] = set()
    for job in doc["jobs"]:
        if not isinstance(job, dict):
            raise ProtocolError("fio JSON: a job is not an object")
        name = str(job.get("jobname", ""))
        if not _NAME.fullmatch(name) or not name.startswith(prefix):
            raise ProtocolError(
                f"fio JSON: job name {name!r:.40} is not a plain name"
                + (f" starting with {prefix!r}" if prefix else "")
            )
        if name in seen:
            raise ProtocolError(f"fio JSON: job {name} is reported twice")
        seen.add(name)
        if job.get("error"):
            raise ProtocolError(f"fio job {name} failed: error {job['error']!r:.40}")
        active = [
            d
            for d in ("read", "write")
            if isinstance(job.get(d), dict) and _number(job[d].get("total_ios", 0), f"{name} {d} total_ios")
        ]
        if not active:
            raise ProtocolError(f"fio job {name} did no IO")
        for direction in active:
            data = job[direction]
            key = name if len(active) == 1 else f"{name}.{direction}"
            figures[f"fio.{key}.iops"] = _number(data.get("iops"), f"{name} {direction} iops")
            figures[f"fio.{key}.mib_per_s"] = _number(data.get("bw_bytes"), f"{name} bw_bytes") / 2**20
            clat = data.get("clat_ns")
            if not isinstance(clat, dict):
                raise ProtocolError(f"fio JSON: {name} {direction} has no clat_ns")
            figures[f"fio.{key}.clat_mean_ms"] = _number(clat.get("mean"), f"{name} clat mean") / 1e6
            # fio always reports these percentiles of a job that did IO: a sample without them
            # would silently lack a figure its cell's other samples have
            percentiles = clat.get("percentile")
            if not isinstance(percentiles, dict):
                raise ProtocolError(f"fio JSON: {name} {direction} has no clat_ns percentiles")
            for label, pct in (("p50", "50.000000"), ("p99", "99.000000")):
                figures[f"fio.{key}.clat_{label}_ms"] = (
                    _number(percentiles.get(pct), f"{name} clat {pct}") / 1e6
                )
    return figures, doc


def parse_outputs(outputs: Mapping[str, str]) -> Parsed:
    """Figures of every target the guest ran; the raw JSON per target as ``fio_json``."""
    extra = sorted(set(outputs) - set(OUTPUT_KEYS))
    if extra or not outputs:
        raise ProtocolError(
            f"fio report outputs: {'unexpected ' + ', '.join(extra) if extra else 'none'}; "
            f"expected {' and/or '.join(OUTPUT_KEYS)}"
        )
    figures: dict[str, float] = {}
    docs: dict[str, Any] = {}
    for key in OUTPUT_KEYS:
        if key in outputs:
            target_figures, docs[key.split("_")[1]] = parse_fio_json(outputs[key], _PREFIX[key])
            figures.update(target_figures)
    return figures, {"fio_json": docs}


# -- parameters ------------------------------------------------------------------

FIO_TARGETS = ("both", "raw", "file")
_COUNT = (1, 10**7)
FIO_TARGET = Param(
    "fio_target",
    "both",
    "the raw disk, a file on ext4 made on it, or both (raw, file, both)",
    choices=FIO_TARGETS,
    what="fio target",
    fold=True,
)
FIO_SIZE_MIB = Param(
    "fio_size_mib", 64, "MiB of the sequential jobs (and the file)", slug="{}m", bounds=_COUNT
)
FIO_IOS = Param("fio_ios", 2000, "4 KiB IOs of each random job", slug="{}x", bounds=_COUNT)
FIO_FSYNC_IOS = Param("fio_fsync_ios", 200, "writes of the fsync-per-write job", slug="{}f", bounds=_COUNT)
#: "random": only the four 4 KiB random jobs, writes first, so that they meet a disk nothing wrote
#: yet (an overlay's copy-on-write path) instead of one the sequential jobs filled
FIO_JOBSETS = ("all", "random")
FIO_JOBS = Param(
    "fio_jobs",
    "all",
    "the jobs: all of them, or only the 4 KiB random ones, writes first (all, random)",
    choices=FIO_JOBSETS,
    what="fio jobs",
    fold=True,
    slug="{}",
    quiet_default=True,
)


def check_disk(v: Values, disk_size: int) -> None:
    room = filesystem_room(disk_size, "ext4")
    if v["fio_size_mib"] * MIB > room:
        raise SpecError(
            f"fio size {v['fio_size_mib']} MiB does not fit a {format_size(disk_size)} disk: ext4 leaves "
            f"about {room // MIB} MiB there; use a larger disk"
        )


def estimate_s(v: Values, disk_size: int) -> float:
    # per target: two sequential passes and four random jobs at about 1 ms an IO under TCG (a
    # prior; a boot, which it once included, taken out)
    targets = 2 if v["fio_target"] == "both" else 1
    if v.get("fio_jobs") == "random":
        return 5.0 + float(targets * 4 * v["fio_ios"] * 1e-3)
    return 5.0 + float(
        targets * (v["fio_size_mib"] * 0.05 + (4 * v["fio_ios"] + v["fio_fsync_ios"] * 5) * 1e-3)
    )


def check_targets(v: Values, outputs: Mapping[str, str]) -> None:
    """The guest ran fio on the targets the cell asked for, no other (its figures are named by target)."""
    target = v["fio_target"]
    wanted = {"both": {"raw", "file"}}.get(target, {target})
    sent = {key.split("_")[1] for key in outputs}
    if sent != wanted:
        raise ProtocolError(
            f"fio ran on {', '.join(sorted(sent)) or 'nothing'}, the cell asked for "
            f"{', '.join(sorted(wanted))} (diskbench.fio_target={target})"
        )


WORKLOAD = WorkloadKind(
    "fio",
    params=(FIO_TARGET, FIO_SIZE_MIB, FIO_IOS, FIO_FSYNC_IOS, FIO_JOBS),
    told=(FIO_TARGET, FIO_SIZE_MIB, FIO_IOS, FIO_FSYNC_IOS, FIO_JOBS),
    check_disk=check_disk,
    estimate_s=estimate_s,
    write_bytes=lambda v: v["fio_size_mib"] * MIB,
    tools=("fio",),
    check_outputs=check_targets,
    metrics=METRICS,
    parse_outputs=parse_outputs,
    # per job: the run's table shows a row per job of these (harness.report.summary); history
    # tracks fio's per-job latencies by name, not phases
    words="fio",
    headlines=(("iops", "IOPS"), ("clat_p50_ms", "p50"), ("clat_p99_ms", "p99")),
    phases=(),
    figures=(),
)
