"""Machine identity: what must be equal for samples to be one series, and the views of it.

One list of the machine's keys (:data:`MACHINE_KEYS`) and the views its users need, each a
subset or an addition said once here:

- :func:`fingerprint` (resume): a sweep resumes only records of the same machine, subject
  (guest recipe, policy) and guest size; others are set aside;
- :func:`merge_identity` (merge): the same but the runner's name and its QEMU binary's path,
  so shards of one sweep on identical runners merge;
- :func:`series_identity` (report): one series per sweep and identity; the runner's name
  counts, the binary's path does not;
- :func:`identity_warnings` (compare): what differs between the two sides' machines.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from harness.record.model import MachineInfo, Record, SubjectInfo, VMInfo

# what must be equal for two samples to be one series
MACHINE_KEYS = (
    "hostname",
    "arch",
    "cpu",
    "accel",
    "qemu",
    "qemu_version",
    "qemu_img_version",
    # the build exactly: two builds of one version (7.2 from bookworm and from its security
    # suite) are two subjects
    "qemu_debian_version",
    "qemu_sha256",
    "qemu_img_sha256",
    "work_dir_fs",
    # the host disk model the work dir is on (harness/host/hostdisk.py); absent: the native disk
    "host_disk",
)
#: keys a record of the native disk has not (records from before host disk models, and the native
#: disk's since): left out of a hashed identity when absent, so those hashes stay as they were
OPTIONAL_KEYS = ("host_disk",)
# MACHINE_KEYS but the runner's name and the path of its QEMU binary
MERGE_MACHINE_KEYS = tuple(k for k in MACHINE_KEYS if k not in ("hostname", "qemu"))
# the report's series: the accelerator the guest really ran under, the runner, its CPU and QEMU
SERIES_MACHINE_KEYS = (
    "accel",
    "hostname",
    "cpu",
    "qemu_version",
    "qemu_img_version",
    "qemu_sha256",
    "qemu_img_sha256",
    "work_dir_fs",
    "host_disk",
)


#: what tells one host disk model from another (the native disk has none): a report's series of a
#: sweep holds several side by side (a host_disk axis)
DISK_KEYS = ("host_disk",)


def disk_name(machine: MachineInfo) -> str:
    """The host disk model a record ran on, by name (``period-hdd``); ``native`` where none."""
    found = machine.get("host_disk")
    return str(found).split(":", 1)[0] if found else "native"


#: what tells one QEMU build from another: a report's series holds several side by side (a QEMU
#: axis), each cell under each build told apart by these
BUILD_KEYS = ("qemu_version", "qemu_img_version", "qemu_debian_version", "qemu_sha256", "qemu_img_sha256")


def build_identity(record: Record) -> tuple[Any, ...]:
    """The QEMU build a record ran under (:data:`BUILD_KEYS`)."""
    return tuple(record.machine.get(k) for k in BUILD_KEYS)


def _keys(machine: MachineInfo, keys: Sequence[str]) -> dict[str, Any]:
    """``machine``'s values of ``keys``, an :data:`OPTIONAL_KEYS` one left out when it has none."""
    return {k: machine.get(k) for k in keys if k not in OPTIONAL_KEYS or machine.get(k) is not None}


def fingerprint(machine: MachineInfo, subject: SubjectInfo, vm: VMInfo) -> str:
    """A short hash of what makes samples comparable: machine identity, subject, guest size."""
    identity = {
        "machine": _keys(machine, MACHINE_KEYS),
        "guest": subject.guest.get("recipe_hash"),
        "policy": subject.policy,
        "vm": {"mem_mib": vm.mem_mib, "smp": vm.smp},
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def record_fingerprint(record: Record) -> str:
    return fingerprint(record.machine, record.subject, record.vm)


def merge_identity(record: Record) -> dict[str, Any]:
    """What must be equal for two records to be part of one merged sweep."""
    machine, subject, vm = record.machine, record.subject, record.vm
    return {
        **_keys(machine, MERGE_MACHINE_KEYS),
        "guest": subject.guest.get("recipe_hash"),
        "policy": subject.policy,
        "mem_mib": vm.mem_mib,
        "smp": vm.smp,
    }


def identity_slug(identity: Mapping[str, Any]) -> str:
    """A directory name for one identity: readable first, a hash to keep it unique."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    version = str(identity.get("qemu_version") or "unknown").split()[0]
    return f"{identity.get('accel') or 'unknown'}-qemu{version}-{digest}"


def describe_identity(identity: Mapping[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{k} {identity.get(k)!r}" for k in keys)


def series_identity(record: Record, *, build: bool = True, disk: bool = True) -> tuple[Any, ...]:
    """The report's series key: :data:`SERIES_MACHINE_KEYS` (accel as the guest ran) and guest size;
    without ``build`` the QEMU build is left out (:data:`BUILD_KEYS`), without ``disk`` the host
    disk model (:data:`DISK_KEYS`): each is then an axis within the series."""
    machine, vm = record.machine, record.vm
    left_out = (() if build else BUILD_KEYS) + (() if disk else DISK_KEYS)
    keys = tuple(k for k in SERIES_MACHINE_KEYS if k not in left_out)
    return (
        *(machine.get(k) if k != "accel" else vm.get("accel", machine.get("accel")) for k in keys),
        vm.mem_mib,
        vm.smp,
    )


def identity_warnings(base: Sequence[Record], head: Sequence[Record]) -> list[str]:
    """What differs between the machines of the two sides (and within one side)."""

    def values(records: Sequence[Record], key: str) -> list[str]:
        return sorted({str(r.machine.get(key)) for r in records})

    between = []
    within = []
    for key in MACHINE_KEYS:
        b, h = values(base, key), values(head, key)
        if b != h:
            between.append(f"{key}: {', '.join(b)} vs {', '.join(h)}")
        for side, found in (("base", b), ("head", h)):
            if len(found) > 1:
                within.append(f"{side} {key}: {', '.join(found)}")
    warnings = []
    if between:
        warnings.append(
            "base and head come from DIFFERENT MACHINES, their times are not comparable ("
            + "; ".join(between)
            + ")"
        )
    if within:
        warnings.append("records of one side come from several machines (" + "; ".join(within) + ")")
    return warnings
