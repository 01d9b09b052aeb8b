"""The subject diff: what differs between base and head, said before any figure.  Pure.

A side of a comparison document (``base``, ``head``) carries the subject of
its records (the storage policy, the guest recipe and its packages), the
machine its records name (QEMU binary and version) and, from a gate, the
QEMU binaries it was given.  :func:`subject_diff` lists every difference as
``{"what", "base", "head"}``: policy keys (``cache: none → writethrough``),
drive options, the guest recipe's hash and kernel, package versions, QEMU
binaries and versions.  :func:`cell_id_changes` lists the cells whose id
differs between the sides (a policy change renames the cells it reaches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


def _keys(what: str, base: Mapping[str, Any], head: Mapping[str, Any]) -> list[dict[str, str]]:
    found = []
    for key in sorted(set(base) | set(head)):
        b, h = base.get(key), head.get(key)
        if b != h:
            found.append({"what": f"{what}{key}", "base": _text(b), "head": _text(h)})
    return found


def _policy(side: Mapping[str, Any]) -> Mapping[str, Any]:
    return _dict(_dict(side.get("subject")).get("policy") or side.get("policy"))


def subject_diff(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every difference of policy, guest and QEMU between two sides of a comparison document."""
    diff: list[dict[str, str]] = []
    bp, hp = _policy(base), _policy(head)
    # drive keys by their QEMU names (cache, aio, interface), image keys prefixed; the policy's
    # source path differs between two checkouts and says nothing
    diff += _keys("", _dict(bp.get("drive")), _dict(hp.get("drive")))
    diff += _keys("image ", _dict(bp.get("image")), _dict(hp.get("image")))
    diff += _keys("drive option ", _dict(bp.get("drive_options")), _dict(hp.get("drive_options")))
    bg = _dict(_dict(base.get("subject")).get("guest"))
    hg = _dict(_dict(head.get("subject")).get("guest"))
    for key, label in (("recipe_hash", "guest recipe"), ("kernel_version", "guest kernel")):
        if bg.get(key) != hg.get(key):
            diff.append({"what": label, "base": _text(bg.get(key)), "head": _text(hg.get(key))})
    bpk, hpk = _dict(bg.get("packages")), _dict(hg.get("packages"))
    packages = _keys("package ", bpk, hpk)
    if len(packages) > MAX_PACKAGES:
        rest = len(packages) - MAX_PACKAGES
        packages = [*packages[:MAX_PACKAGES], {"what": f"{rest} more packages", "base": "…", "head": "…"}]
    diff += packages
    bm, hm = _dict(base.get("machine")), _dict(head.get("machine"))
    for key, label in (
        ("qemu", "QEMU binary"),
        ("qemu_version", "QEMU version"),
        ("qemu_img", "qemu-img binary"),
        ("qemu_img_version", "qemu-img version"),
    ):
        b = base.get(key) if key in ("qemu", "qemu_img") and base.get(key) else bm.get(key)
        h = head.get(key) if key in ("qemu", "qemu_img") and head.get(key) else hm.get(key)
        if b != h:
            diff.append({"what": label, "base": _text(b), "head": _text(h)})
    return diff


def cell_id_changes(cells: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``{cell_id (head's), base_id, name}`` of the cells whose id differs between the sides."""
    found = []
    for cell in cells:
        axes = _dict(cell.get("cell"))
        base_id = axes.get("base_id")
        if base_id and base_id != cell.get("cell_id"):
            found.append(
                {
                    "name": str(axes.get("gate_name") or cell.get("cell_id")),
                    "base_id": str(base_id),
                    "head_id": str(cell.get("cell_id")),
                }
            )
    return found


def diff_line(entry: Mapping[str, Any]) -> str:
    """``cache: none → writethrough``; a gate's policy value that some cells did not take says
    where it applied: ``aio: threads → native (4 of 8 cells; the 3 cache=writeback cells and ...)``."""
    line = f"{entry['what']}: {entry['base']} → {entry['head']}"
    reach = _dict(entry.get("reach"))
    if entry.get("where") and reach.get("kept"):
        line += f" ({entry['where']})"
    return line


def held_lines(summary: Mapping[str, Any]) -> list[str]:
    """A gate's cells that cannot take a value of their side's policy, one line per value:
    ``head's aio=native → aio=threads in a, b (cache=writeback) and c (cache=writethrough): why``."""
    groups: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for item in summary.get("policy_held") or []:
        if not isinstance(item, Mapping):
            continue
        sides = [str(s) for s in item.get("sides") or []]
        group = (
            str(item.get("key")),
            str(item.get("value")),
            str(item.get("keeps")),
            str(item.get("why")),
            "both sides'" if len(sides) > 1 else f"{sides[0] if sides else '?'}'s",
        )
        groups.setdefault(group, {}).setdefault(str(item.get("axis")), []).append(str(item.get("name")))
    lines = []
    for (key, value, keeps, why, whose), by_axis in groups.items():
        parts = [f"{', '.join(names)} ({axis})" for axis, names in by_axis.items()]
        cells = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        kept = keeps if keeps == QEMU_DEFAULT else f"{key}={keeps}"
        lines.append(f"{whose} {key}={value} → {kept} in {cells}: {why}")
    return lines
