"""What a command checks before it spends anything: numbers, deadlines, images, guest tools.

Each check raises the error of bad input (exit 2) naming the flag or file and the fix;
nothing has been built, booted or created when it does.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from pathlib import Path

from harness.errors import SpecError
from harness.spec import Cell
from harness.sweep import limits

if typing.TYPE_CHECKING:
    from harness.rounds.session import MachineOptions


def check_numbers(
    cells: Sequence[Cell],
    machine: MachineOptions,
    *,
    max_disk_bytes: int,
    mem_mib: int | None = None,
    smp: int | None = None,
) -> None:
    """Every numeric flag and image size (see :mod:`harness.sweep.limits`, measured with the
    machine's qemu-img, none over ``max_disk_bytes``); the machine's deadlines; the guest's size
    if given."""
    if mem_mib is not None or smp is not None:
        limits.check_guest(mem_mib=256 if mem_mib is None else mem_mib, smp=1 if smp is None else smp)
    limits.check_deadline("--boot-timeout-s", machine.boot_timeout_s)
    limits.check_deadline("--workload-timeout-s", machine.workload_timeout_s, none_ok=False)
    limits.check_images(
        cells, machine.work_dir, qemu_img=machine.binaries.qemu_img, max_disk_bytes=max_disk_bytes
    )


def check_tools(cells: Sequence[Cell], recipe_dir: Path | None = None) -> None:
    """The guest's tools drive holds every tool the cells' workloads need (WorkloadKind.tools): a
    recipe without one is bad input, said before anything is built or booted (a gate's head guest
    is checked per sample instead)."""
    needed = {tool: c.workload.name for c in cells for tool in c.workload.kind.tools}
    if not needed:
        return
    from harness.guest import load_recipe
    from harness.paths import IMAGES_DIR

    recipe = load_recipe(recipe_dir or IMAGES_DIR, require_lock=False)
    have = {Path(f).name for f in recipe.tools_files}
    for tool, workload in needed.items():
        if tool not in have:
            raise SpecError(
                f"the {workload} workload needs {tool} on the guest's tools drive, and "
                f'images/recipe.toml\'s [tools] files list none: add "/usr/bin/{tool}" there and pin its '
                "packages in [tools.packages] (`diskbench guest pin`), or run another workload"
            )
