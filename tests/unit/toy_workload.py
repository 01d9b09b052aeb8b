"""A workload that exists only for tests: one module, registered with
``harness.workloads.registry.register``, that no other module names.

It writes TOY_BLOCKS MiB on a filesystem, so it takes a parameter of its own
and one it shares with dd, bonnie and mkfs (``fs``).
"""

from __future__ import annotations

from harness.errors import SpecError
from harness.workloads.params import FS, MIB, Param, Values, WorkloadKind, filesystem_room

TOY_BLOCKS = Param("toy_blocks", 8, "MiB the toy writes", slug="{}b", bounds=(1, 1000))


def check_disk(v: Values, disk_size: int) -> None:
    if v["toy_blocks"] * MIB > filesystem_room(disk_size, v["fs"]):
        raise SpecError(f"toy of {v['toy_blocks']} MiB does not fit the disk: use a larger disk")


WORKLOAD = WorkloadKind(
    "toy",
    params=(TOY_BLOCKS, FS),
    told=(FS, TOY_BLOCKS),
    check_disk=check_disk,
    estimate_s=lambda v, disk_size: 7.0 + v["toy_blocks"],
    write_bytes=lambda v: v["toy_blocks"] * MIB,
    words="toy (blocks written)",
    headlines=(("mib_per_s", "toy rate"), ("total_s", "total")),
    phases=("mkfs", "toy", "fsck"),
    figures=("bytes",),
    tools=("toytool",),
)
