"""The subject diff: what differs between base and head, said before any figure.  Pure.

A side of a comparison document (``base``, ``head``) carries the subject of
its records (the storage policy, the guest recipe and its packages), the
machine its records name (QEMU binary and version) and, from a gate, the
QEMU binaries it was given.  :func:`subject_diff` lists every difference as a
:class:`~harness.compare.model.DiffEntry` (what, base, head): policy keys (``cache: none → writethrough``),
drive options, the guest recipe's hash and kernel, package versions, QEMU
binaries and versions.  :func:`cell_id_changes` lists the cells whose id
differs between the sides (a policy change renames the cells it reaches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.model import ComparedCell, DiffEntry, Renamed, Side, Summary
from harness.record.model import MachineInfo
from harness.subject.policy import QEMU_DEFAULT

# at most this many package lines; the rest is counted
MAX_PACKAGES = 12
UNSET = "(unset)"


def _text(value: Any) -> str:
    if value is None:
        return UNSET
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _keys(what: str, base: Mapping[str, Any], head: Mapping[str, Any]) -> list[DiffEntry]:
    found = []
    for key in sorted(set(base) | set(head)):
        b, h = base.get(key), head.get(key)
        if b != h:
            found.append(DiffEntry(what=f"{what}{key}", base=_text(b), head=_text(h)))
    return found


def _policy(side: Side) -> Mapping[str, Any]:
    return _dict(side.subject.policy or side.policy)


def subject_diff(base: Side, head: Side) -> list[DiffEntry]:
    """Every difference of policy, guest and QEMU between two sides of a comparison."""
    diff: list[DiffEntry] = []
    bp, hp = _policy(base), _policy(head)
    # drive keys by their QEMU names (cache, aio, interface), image keys prefixed; the policy's
    # source path differs between two checkouts and says nothing
    diff += _keys("", _dict(bp.get("drive")), _dict(hp.get("drive")))
    diff += _keys("image ", _dict(bp.get("image")), _dict(hp.get("image")))
    # [overlay]: what cells with a backing chain take for their overlay (harness.gate.reach names it so)
    diff += _keys("overlay ", _dict(bp.get("overlay")), _dict(hp.get("overlay")))
    diff += _keys("drive option ", _dict(bp.get("drive_options")), _dict(hp.get("drive_options")))
    # the QEMU a side's policy pins ([qemu]; absent: the runner's)
    diff += _keys("", {"QEMU pin": bp.get("qemu", "runner")}, {"QEMU pin": hp.get("qemu", "runner")})
    bg, hg = base.subject.guest, head.subject.guest
    for key, label in (("recipe_hash", "guest recipe"), ("kernel_version", "guest kernel")):
        if bg.get(key) != hg.get(key):
            diff.append(DiffEntry(what=label, base=_text(bg.get(key)), head=_text(hg.get(key))))
    bpk, hpk = _dict(bg.get("packages")), _dict(hg.get("packages"))
    packages = _keys("package ", bpk, hpk)
    if len(packages) > MAX_PACKAGES:
        rest = len(packages) - MAX_PACKAGES
        packages = [*packages[:MAX_PACKAGES], DiffEntry(what=f"{rest} more packages", base="…", head="…")]
    diff += packages
    for key, label in (
        ("qemu", "QEMU binary"),
        ("qemu_version", "QEMU version"),
        ("qemu_img", "qemu-img binary"),
        ("qemu_img_version", "qemu-img version"),
    ):
        b, h = _binary(base, key), _binary(head, key)
        if b != h:
            diff.append(DiffEntry(what=label, base=_text(b), head=_text(h)))
    bm, hm = base.machine, head.machine
    if (bm.get("qemu_debian_version"), bm.get("qemu_sha256")) != (
        hm.get("qemu_debian_version"),
        hm.get("qemu_sha256"),
    ):
        diff.append(DiffEntry(what="QEMU build", base=_build(bm), head=_build(hm)))
    return diff


def _binary(side: Side, key: str) -> Any:
    """A side's QEMU or qemu-img (a gate's own binary, else its machine's) or their versions."""
    own = side.qemu if key == "qemu" else side.qemu_img if key == "qemu_img" else None
    return own or side.machine.get(key)


def _build(machine: MachineInfo) -> str:
    """``Debian 1:10.0.2+ds-2+deb13u1~bpo12+1, sha256 e8f995668153``: the build exactly."""
    debian, sha = machine.get("qemu_debian_version"), machine.get("qemu_sha256")
    if not debian and not sha:
        return UNSET
    parts = [f"Debian {debian}" if debian else "no Debian version", f"sha256 {str(sha)[:12]}" if sha else ""]
    return ", ".join(p for p in parts if p)


def cell_id_changes(cells: Sequence[ComparedCell]) -> list[Renamed]:
    """The cells whose id differs between the sides: their name, base's id and head's."""
    return [
        Renamed(name=cell.name, base_id=str(cell.cell.base_id), head_id=cell.cell_id)
        for cell in cells
        if cell.cell.base_id and cell.cell.base_id != cell.cell_id
    ]


def diff_line(entry: DiffEntry) -> str:
    """``cache: none → writethrough``; a gate's policy value that some cells did not take says
    where it applied: ``aio: threads → native (4 of 8 cells; the 3 cache=writeback cells and ...)``."""
    line = f"{entry.what}: {entry.base} → {entry.head}"
    if entry.where and entry.reach is not None and entry.reach.kept:
        line += f" ({entry.where})"
    return line


def held_lines(summary: Summary) -> list[str]:
    """A gate's cells that cannot take a value of their side's policy, one line per value:
    ``head's aio=native → aio=threads in a, b (cache=writeback) and c (cache=writethrough): why``."""
    groups: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for item in summary.policy_held or ():
        sides = item.sides
        group = (
            item.key,
            item.value,
            item.keeps,
            item.why,
            "both sides'" if len(sides) > 1 else f"{sides[0] if sides else '?'}'s",
        )
        groups.setdefault(group, {}).setdefault(item.axis, []).append(item.name)
    lines = []
    for (key, value, keeps, why, whose), by_axis in groups.items():
        parts = [f"{', '.join(names)} ({axis})" for axis, names in by_axis.items()]
        cells = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        kept = keeps if keeps == QEMU_DEFAULT else f"{key}={keeps}"
        lines.append(f"{whose} {key}={value} → {kept} in {cells}: {why}")
    return lines
