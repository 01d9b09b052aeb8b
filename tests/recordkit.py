"""Records and machines the tests build: a record of one cell under TCG, a runner's machine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.record import Record, new_record

# a KVM runner as the comparison and merge tests see it
MACHINE = {
    "hostname": "runner-1",
    "arch": "x86_64",
    "cpu": "AMD EPYC",
    "accel": "kvm",
    "qemu": "/usr/bin/qemu-system-x86_64",
    "qemu_version": "7.2.0",
    "qemu_img_version": "7.2.0",
    "work_dir_fs": "ext4",
}


def tcg_record(
    cell: Mapping[str, Any],
    *,
    machine: Mapping[str, Any] | None = None,
    subject: Mapping[str, Any] | None = None,
    run_id: str = "r1",
) -> Record:
    """A record of ``cell`` (its dict) with no sample yet, its guest under TCG with 256 MiB and one
    CPU; the machine says only its accelerator unless ``machine`` is given."""
    return new_record(
        cell=dict(cell),
        machine=dict(machine) if machine is not None else {"accel": "tcg"},
        subject=dict(subject or {}),
        vm={"accel": "tcg", "mem_mib": 256, "smp": 1},
        run_id=run_id,
    )
