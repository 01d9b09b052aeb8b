"""What else changed at a commit: the identity of its records beside the commit's own change.  Pure.

History measures a commit on a runner: a step in a series can come from the commit, or from
the runner between two commits' runs (a new QEMU package, a new host kernel, another runner, a
re-pinned guest).  :func:`commit_identity` reads, from the records of one commit, the figures
of their identity and subject that are not the commit's policy (:data:`KEYS`);
:func:`identity_changes` says which of them differ between two commits.  A change point whose
commit has such a difference is attributed to it, not to the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.record.model import Record
from harness.subject.qemu_pin import RUNNER


def _at(part: str, *path: str) -> Callable[[Record], Any]:
    """The value at ``path`` in the record's ``part`` (``machine``, ``subject``, ``vm``)."""

    def get(record: Record) -> Any:
        node: Any = {"machine": record.machine, "subject": record.subject, "vm": record.vm}[part].data
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node

    return get


def _accel(record: Record) -> Any:
    return record.vm.get("accel") or record.machine.get("accel")


def _pin(record: Record) -> Any:
    """The QEMU the commit's policy pins: its version, ``runner`` for a policy that pins none (its
    record's policy says nothing of QEMU), None for a commit from before policies."""
    policy = record.subject.policy
    if not isinstance(policy, Mapping):
        return None
    return policy.get("qemu") or RUNNER


def _build(record: Record) -> Any:
    """Which build of QEMU: its Debian version, else its binary's digest."""
    debian = record.machine.get("qemu_debian_version")
    digest = record.machine.get("qemu_sha256")
    if debian:
        return f"Debian {debian}"
    return f"sha256 {str(digest)[:12]}" if digest else None


#: the keys that change when the commit moves its QEMU pin
PIN = "QEMU pin"
QEMU_KEYS = (PIN, "QEMU version", "QEMU build", "qemu-img version", "QEMU binary")

# (what a person calls it, where a record holds it), in the order a cause is told
KEYS: tuple[tuple[str, Callable[[Record], Any]], ...] = (
    (PIN, _pin),
    ("QEMU version", _at("machine", "qemu_version")),
    ("QEMU build", _build),
    ("qemu-img version", _at("machine", "qemu_img_version")),
    ("QEMU binary", _at("machine", "qemu")),
    ("guest kernel", _at("subject", "guest", "kernel_version")),
    ("guest recipe", _at("subject", "guest", "recipe_hash")),
    ("host kernel", _at("machine", "host_kernel")),
    ("runner", _at("machine", "hostname")),
    ("CPU", _at("machine", "cpu")),
    ("accel", _accel),
)


def commit_identity(records: Iterable[Record]) -> dict[str, str]:
    """Each key's value over a commit's records; several values are joined (``a | b``)."""
    seen: dict[str, set[str]] = {}
    for record in records:
        for name, get in KEYS:
            value = get(record)
            if value not in (None, ""):
                seen.setdefault(name, set()).add(str(value))
    return {name: " | ".join(sorted(values)) for name, values in seen.items()}


@dataclass(frozen=True)
class IdentityChange:
    key: str
    before: str
    after: str

    def __str__(self) -> str:
        before, after = self.before, self.after
        if self.key == "guest recipe":
            before, after = before[:12], after[:12]
        return f"{self.key} {before} → {after}"


def identity_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[IdentityChange]:
    """What differs between two commits' identities (a key one of them lacks is unknown, not a change)."""
    return [
        IdentityChange(name, before[name], after[name])
        for name, _get in KEYS
        if name in before and name in after and before[name] != after[name]
    ]


def cause(changes: Sequence[IdentityChange], *, known: bool) -> str:
    """The sentence a change point carries: what it lines up with, or the commit.

    A commit that moves its QEMU pin changes the QEMU it is measured on: the step is the QEMU
    build's (the commit chose it, its other changes are not blamed); a QEMU or anything else
    that changed without the pin is the runner's, not the commit's."""
    if not known:
        return "the commit? (no records of one side: its identity is unknown)"
    told = "; ".join(str(c) for c in changes)
    if any(c.key == PIN for c in changes):
        return "the QEMU build, not the commit's other changes (the commit moves its QEMU pin): " + told
    if changes:
        return "not the commit: lines up with " + told
    return "the commit (nothing else changed)"
