"""The dd workload (seed 001): DD_MIB MiB in DD_CHUNK_MIB MiB chunks, then fsync.

The guest script (``images/workloads/dd.sh``) computes its figures itself
(``bytes``, ``mib_per_s``, in the common metrics) and sends no raw outputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.errors import SpecError
from harness.sizes import format_size
from harness.workloads.metrics import Metric
from harness.workloads.params import (
    FS,
    MIB,
    Param,
    Parsed,
    Values,
    WorkloadKind,
    expect_keys,
    filesystem_room,
)

# bytes and mib_per_s are common metrics (harness.workloads.metrics.COMMON_METRICS)
METRICS: tuple[Metric, ...] = ()

DD_MIB = Param("dd_mib", 256, "MiB to write", slug="{}m")
DD_CHUNK_MIB = Param("dd_chunk_mib", 2, "chunk size in MiB", slug="{}m")


def check(v: Values) -> None:
    if v["dd_mib"] <= 0 or v["dd_chunk_mib"] <= 0 or v["dd_mib"] % v["dd_chunk_mib"]:
        raise SpecError(
            f"dd size {v['dd_mib']} MiB in {v['dd_chunk_mib']} MiB chunks: use positive sizes, "
            "the total a multiple of the chunk"
        )


def check_disk(v: Values, disk_size: int) -> None:
    room = filesystem_room(disk_size, v["fs"])
    if v["dd_mib"] * MIB > room:
        raise SpecError(
            f"dd of {v['dd_mib']} MiB does not fit a {format_size(disk_size)} disk: {v['fs']} leaves about "
            f"{room // MIB} MiB there; use a larger disk"
        )


def parse_outputs(outputs: Mapping[str, str]) -> Parsed:
    expect_keys("dd", outputs, ())
    return {}, {}


WORKLOAD = WorkloadKind(
    "dd",
    params=(DD_MIB, DD_CHUNK_MIB, FS),
    told=(FS, DD_MIB, DD_CHUNK_MIB),
    check=check,
    check_disk=check_disk,
    # total_s under TCG, writeback on virtio-blk: 3.07-3.38 s for 256 MiB (the default sweep),
    # 1.85-1.93 s for 128 MiB (docs/snapshot-start.md)
    estimate_s=lambda v, disk_size: 0.6 + v["dd_mib"] * 0.01,
    write_bytes=lambda v: v["dd_mib"] * MIB,
    metrics=METRICS,
    parse_outputs=parse_outputs,
    words="dd (a file written and flushed)",
    headlines=(("mib_per_s", "write"), ("total_s", "total")),
    phases=("mkfs", "mount", "write", "umount", "fsck"),
    figures=("mib_per_s", "bytes"),
)
