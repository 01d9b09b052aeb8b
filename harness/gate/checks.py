"""What a gate checks of each side before it spends anything: its cells, their images, the disk.

A side's cells are the gate spec's cells completed from that side's policy, and a
pull request writes the head's policy: its sizes and preallocation go through the
same checks as a sweep's cells (:func:`harness.sweep.limits.check_images`, the runner's
``--max-disk-size`` cap, :func:`harness.sweep.check_free_space`) right after the
side is checked out, before anything is built, booted or created.  ``qemu-img
measure`` is the run's own qemu-img (never one a side brings) and runs as the
unprivileged account.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import SpecError, UsageError
from harness.gate.spec import GateSpec
from harness.spec import Cell
from harness.subject.policy import Completed, Policy, check_reach
from harness.sweep import limits


def side_cells(spec: GateSpec, label: str, policy: Policy) -> dict[str, Cell]:
    """The cells of ``spec`` by gate name under the policy of side ``label``; bad input if a cell
    cannot be made, two become the same cell, or a value of the policy reaches none of them."""
    return {name: done.cell for name, done in side_completed(spec, label, policy).items()}


def side_completed(spec: GateSpec, label: str, policy: Policy) -> dict[str, Completed]:
    """:func:`side_cells` with each cell's drive options and the policy's values it holds back."""
    try:
        completed = {gc.name: gc.complete(policy) for gc in spec.cells}
        check_reach(policy, [c.held for c in completed.values()], "the gate spec")
    except SpecError as exc:
        raise UsageError(f"{spec.source}: under the policy of {label}: {exc.message}") from None
    cells = {name: done.cell for name, done in completed.items()}
    ids = [c.id for c in cells.values()]
    if len(set(ids)) != len(ids):
        raise UsageError(
            f"{spec.source}: two cells are the same cell under the policy of {label}: "
            "make the cells differ in a value the policy does not set"
        )
    return completed


def check_side(
    spec: GateSpec,
    label: str,
    policy: Policy,
    *,
    work_dir: Path,
    qemu_img: str,
    max_disk_bytes: int = limits.MAX_DISK_BYTES,
) -> str:
    """Side ``label``'s cells under ``policy`` pass a sweep's image, size and free-space checks;
    returns the free-space line.  A size over a limit is bad input (exit 2), naming the side;
    too little free space is an infrastructure error (exit 3)."""
    from harness.sweep import check_free_space

    cells = list(side_cells(spec, label, policy).values())
    try:
        limits.check_images(cells, work_dir, qemu_img=qemu_img, max_disk_bytes=max_disk_bytes)
    except SpecError as exc:
        raise SpecError(f"{spec.source}: under the policy of {label}: {exc.message}") from None
    return f"gate: {label}: {check_free_space(work_dir, cells, qemu_img=qemu_img)}"
