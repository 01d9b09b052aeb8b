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
``JOB.write``.  The raw JSON is kept in the record (``fio_json.raw``, ``fio_json.file``); output that is not fio's
JSON, or a job that reports an error, is a :class:`~harness.errors.ProtocolError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from harness.errors import ProtocolError
from harness.workloads import Metric, Parsed, expect_keys

#: the guest's outputs, per target it ran (diskbench.fio_target: raw, file or both)
OUTPUT_KEYS = ("fio_raw_json", "fio_file_json")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")

# the figures' names are patterns (harness.workloads.FIO_PATTERNS)
METRICS: tuple[Metric, ...] = ()


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(f"fio JSON: {what} is not a number: {value!r:.40}")
    return float(value)


def parse_fio_json(text: str) -> tuple[dict[str, float], dict[str, Any]]:
    """(figures, the parsed document) of fio's ``--output-format=json``; see the module's doc."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"fio output is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list) or not doc["jobs"]:
        raise ProtocolError("fio JSON has no jobs: was it run with --output-format=json?")
    figures: dict[str, float] = {}
    for job in doc["jobs"]:
        if not isinstance(job, dict):
            raise ProtocolError("fio JSON: a job is not an object")
        name = str(job.get("jobname", ""))
        if not _NAME.fullmatch(name):
            raise ProtocolError(f"fio JSON: job name {name!r:.40} is not a plain name")
        if job.get("error"):
            raise ProtocolError(f"fio job {name} failed: error {job['error']}")
        active = [d for d in ("read", "write") if isinstance(job.get(d), dict) and job[d].get("total_ios")]
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
            percentiles = clat.get("percentile") or {}
            for label, pct in (("p50", "50.000000"), ("p99", "99.000000")):
                if pct in percentiles:
                    figures[f"fio.{key}.clat_{label}_ms"] = (
                        _number(percentiles[pct], f"{name} clat {pct}") / 1e6
                    )
    return figures, doc


def parse_outputs(outputs: Mapping[str, str]) -> Parsed:
    """Figures of every target the guest ran; the raw JSON per target as ``fio_json``."""
    if not outputs or set(outputs) - set(OUTPUT_KEYS):
        expect_keys("fio", outputs, OUTPUT_KEYS)  # raises, naming what is missing or extra
    figures: dict[str, float] = {}
    docs: dict[str, Any] = {}
    for key in OUTPUT_KEYS:
        if key in outputs:
            target_figures, docs[key.split("_")[1]] = parse_fio_json(outputs[key])
            figures.update(target_figures)
    return figures, {"fio_json": docs}
