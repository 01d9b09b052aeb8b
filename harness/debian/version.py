"""Debian version numbers compared as dpkg compares them, and ``Depends`` constraints (pure)."""

from __future__ import annotations

import functools
import re


def _order(char: str) -> int:
    if char == "~":
        return -1
    if char.isdigit():
        return 0
    if not char:
        return 0
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_part(a: str, b: str) -> int:
    """dpkg's verrevcmp: non-digit runs by :func:`_order`, digit runs as numbers."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) else 0
            bc = _order(b[j]) if j < len(b) else 0
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def _split(version: str) -> tuple[int, str, str]:
    epoch, _, rest = version.rpartition(":") if ":" in version else ("0", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or 0), upstream, revision


def compare_versions(a: str, b: str) -> int:
    """Negative, zero or positive as ``a`` is older than, equal to or newer than ``b`` (dpkg's order)."""
    ea, ua, ra = _split(a)
    eb, ub, rb = _split(b)
    if ea != eb:
        return ea - eb
    return _compare_part(ua, ub) or _compare_part(ra, rb)


version_key = functools.cmp_to_key(compare_versions)

_RELATIONS = {
    "<<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    "=": lambda c: c == 0,
    ">=": lambda c: c >= 0,
    ">>": lambda c: c > 0,
}


def depends_on(depends: str, package: str) -> list[tuple[str, str]] | None:
    """The (relation, version) constraints a ``Depends`` field puts on ``package`` ([] when it
    names it without a version), or None when it does not name it."""
    found: list[tuple[str, str]] | None = None
    for group in depends.split(","):
        for alt in group.split("|"):
            m = re.match(
                r"^\s*([a-z0-9][a-z0-9.+-]*)(?::\S+)?\s*(?:\(\s*(<<|<=|=|>=|>>)\s*([^)\s]+)\s*\))?", alt
            )
            if m and m.group(1) == package:
                found = found if found is not None else []
                if m.group(2):
                    found.append((m.group(2), m.group(3)))
    return found


def satisfies(version: str, constraints: list[tuple[str, str]]) -> bool:
    """``version`` meets every (relation, version) constraint."""
    return all(_RELATIONS[rel](compare_versions(version, want)) for rel, want in constraints)
