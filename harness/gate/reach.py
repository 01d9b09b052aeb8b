"""Where a change of the policy applies: per differing value, the gate's cells that take it and the
cells that keep another value, and why.  Pure.

A cell takes a value of its side's policy unless the gate spec sets that key for the cell itself,
the key is an image option of another format than the cell's (``preallocation`` of a qcow2 policy
on a raw cell), or QEMU refuses the value with the cell's own axes and the cell keeps its fallback
(:class:`harness.subject.policy.Held`: ``aio=native`` on a ``cache=writeback`` cell keeps
``threads``).  The last is decided by the cell alone, so both sides hold back the same values in
the same cells.  A change applies to a cell where base's and head's cells differ in that value:
"aio: threads → native (4 of 8 cells; the 3 cache=writeback cells and the cache=writethrough cell
keep aio=threads)".  A cell that no change reaches is the same on both sides: the axis sentence
leaves it out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.compare.model import HeldCell, KeptCell
from harness.gate.spec import GateSpec
from harness.spec import format_size
from harness.subject.policy import (
    DRIVE_KEYS,
    FORMAT_SPECIFIC,
    IMAGE_KEYS,
    OVERLAY_KEYS,
    QEMU_DEFAULT,
    Completed,
    Policy,
)

# the subject diff's names of the policy's keys (harness.compare.subject): drive keys bare
IMAGE_PREFIX = "image "
OPTION_PREFIX = "drive option "
OVERLAY_PREFIX = "overlay "


@dataclass(frozen=True)
class KeyReach:
    """One value that differs between the sides' policies: the cells it applies to and the rest."""

    what: str  # as the subject diff names it: "aio", "image preallocation", "drive option l2-cache-size"
    key: str  # the key alone: "aio", "preallocation", "l2-cache-size"
    applied: tuple[str, ...]
    kept: tuple[KeptCell, ...]

    @property
    def where(self) -> str:
        """``4 of 8 cells; the 3 cache=writeback cells and the cache=writethrough cell keep aio=threads``."""
        total = len(self.applied) + len(self.kept)
        text = f"{len(self.applied)} of {total} {'cell' if total == 1 else 'cells'}"
        groups: dict[tuple[str, str], int] = {}
        for kept in self.kept:
            groups[(kept.keeps, kept.axis)] = groups.get((kept.keeps, kept.axis), 0) + 1
        parts = []
        own = sum(n for (_, axis), n in groups.items() if not axis)
        if own:
            parts.append(
                f"1 cell sets its own {self.key}" if own == 1 else f"{own} cells set their own {self.key}"
            )
        by_keeps: dict[str, list[str]] = {}
        counts: dict[str, int] = {}
        for (keeps, axis), n in groups.items():
            if axis:
                by_keeps.setdefault(keeps, []).append(
                    f"the {axis} cell" if n == 1 else f"the {n} {axis} cells"
                )
                counts[keeps] = counts.get(keeps, 0) + n
        for keeps, nouns in by_keeps.items():
            shown = keeps if keeps == QEMU_DEFAULT else f"{self.key}={keeps}"
            parts.append(f"{_joined(nouns)} {'keeps' if counts[keeps] == 1 else 'keep'} {shown}")
        return "; ".join([text, *parts])


@dataclass(frozen=True)
class PolicyReach:
    """Where each difference of the two policies applies, and what cells hold back on either side."""

    cells: tuple[str, ...]
    keys: tuple[KeyReach, ...]
    held: tuple[HeldCell, ...]

    @property
    def untouched(self) -> tuple[str, ...]:
        """The cells that no difference of the policies reaches (none when the policies are alike)."""
        if not self.keys:
            return ()
        reached = {name for key in self.keys for name in key.applied}
        return tuple(name for name in self.cells if name not in reached)


def _joined(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _shown(key: str, value: Any) -> str:
    if value is None:
        return QEMU_DEFAULT
    if isinstance(value, bool):
        return "on" if value else "off"
    if key in ("size", "cluster_size") and isinstance(value, int):
        return format_size(value)
    return str(value)


def _view(done: Completed) -> dict[str, str]:
    """A cell's value of every policy key, as the subject diff names them."""
    cell = done.cell
    image = {
        "format": cell.image.format.value,
        "preallocation": cell.image.preallocation,
        "size": cell.image.size,
        "cluster_size": cell.image.cluster_size,
        "compat": cell.image.compat,
        "lazy_refcounts": cell.image.lazy_refcounts,
        "extended_l2": cell.image.extended_l2,
    }
    view = {f"{IMAGE_PREFIX}{k}": _shown(k, image[k]) for k in IMAGE_KEYS}
    if cell.backing is not None:  # an overlay's own options: what the policy's [overlay] sets
        view.update({f"{OVERLAY_PREFIX}{k}": _shown(k, image[k]) for k in OVERLAY_KEYS})
    drive = {
        "cache": cell.drive.cache.value,
        "aio": cell.drive.aio.value,
        "interface": cell.drive.interface.value,
    }
    view.update({k: drive[k] for k in DRIVE_KEYS})
    view.update({f"{OPTION_PREFIX}{k}": v for k, v in done.options})
    return view


def _differing(base: Policy, head: Policy) -> list[tuple[str, str, bool]]:
    """(what, key, is an image key) of every policy value that differs, in the subject diff's order."""
    found = []
    for key in sorted(set(base.drive) | set(head.drive)):
        if base.drive.get(key) != head.drive.get(key):
            found.append((key, key, False))
    for key in sorted(set(base.image) | set(head.image)):
        if base.image.get(key) != head.image.get(key):
            found.append((f"{IMAGE_PREFIX}{key}", key, True))
    for key in sorted(set(base.overlay) | set(head.overlay)):
        if base.overlay.get(key) != head.overlay.get(key):
            found.append((f"{OVERLAY_PREFIX}{key}", key, False))
    bo, ho = dict(base.drive_options), dict(head.drive_options)
    for key in sorted(set(bo) | set(ho)):
        if bo.get(key) != ho.get(key):
            found.append((f"{OPTION_PREFIX}{key}", key, False))
    return found


def policy_reach(spec: GateSpec, base: Policy, head: Policy) -> PolicyReach:
    """Where each difference between ``base``'s and ``head``'s policies applies over ``spec``'s cells.

    The cells are the ones the gate ran (both sides' checks passed), so completing them cannot fail.
    """
    sides = {"base": base, "head": head}
    done = {label: {gc.name: gc.complete(policy) for gc in spec.cells} for label, policy in sides.items()}
    views = {label: {name: _view(c) for name, c in cells.items()} for label, cells in done.items()}
    keys = []
    for what, key, image in _differing(base, head):
        applied, kept = [], []
        for gc in spec.cells:
            before, after = views["base"][gc.name].get(what), views["head"][gc.name].get(what)
            if before != after:
                applied.append(gc.name)
                continue
            keeps = after if after is not None else QEMU_DEFAULT
            held = next(
                (h for label in ("head", "base") for h in done[label][gc.name].held if h.key == key), None
            )
            if held is not None:
                kept.append(KeptCell(name=gc.name, keeps=held.keeps, axis=held.axis, why=held.why))
            elif what.startswith(OVERLAY_PREFIX) and done["head"][gc.name].cell.backing is None:
                why = "the policy's [overlay] applies to cells with a backing chain only"
                kept.append(KeptCell(name=gc.name, keeps=keeps, axis="no backing", why=why))
            elif key in gc.values:
                kept.append(KeptCell(name=gc.name, keeps=keeps, axis="", why=f"the cell sets {key} itself"))
            elif image and key in FORMAT_SPECIFIC:
                fmt = done["head"][gc.name].cell.image.format.value
                why = f"{key} of the policy applies to cells of its own format only"
                kept.append(KeptCell(name=gc.name, keeps=keeps, axis=f"format={fmt}", why=why))
            else:
                kept.append(KeptCell(name=gc.name, keeps=keeps, axis="alike", why="the same on both sides"))
        keys.append(KeyReach(what=what, key=key, applied=tuple(applied), kept=tuple(kept)))
    return PolicyReach(cells=tuple(gc.name for gc in spec.cells), keys=tuple(keys), held=_held(spec, done))


def _held(spec: GateSpec, done: Mapping[str, Mapping[str, Completed]]) -> tuple[HeldCell, ...]:
    found: list[HeldCell] = []
    for gc in spec.cells:
        sides: dict[tuple[str, str, str, str, str], list[str]] = {}
        for label in ("base", "head"):
            for h in done[label][gc.name].held:
                sides.setdefault((h.key, h.value, h.keeps, h.axis, h.why), []).append(label)
        found += [
            HeldCell(name=gc.name, key=k, value=v, keeps=keeps, axis=axis, why=why, sides=tuple(labels))
            for (k, v, keeps, axis, why), labels in sides.items()
        ]
    return tuple(found)
