"""The QEMU a repository pins in its ``policy.toml`` (``[qemu] version = "10.0"``), or the
runner's.

A pin is untrusted input (a pull request proposes one): it is only ever a version *name*, looked
up among the versions the configured suites offer (:func:`harness.debian.qemu.resolve`);
a path, an option or anything but a version's characters is refused here, when the policy is
parsed, with one line. Parsing is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import SpecError

#: the pin that means "whatever QEMU the runner gives" (its --qemu, else the one on PATH)
RUNNER = "runner"
KEYS = ("version",)
#: a Debian version's characters (``1:10.0.2+ds-2+deb13u1~bpo12+1``) or a short form (``10.0``)
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+~:-]{0,79}")


@dataclass(frozen=True)
class QemuPin:
    """``version``: a Debian version or a short form of QEMU's version, or :data:`RUNNER`."""

    version: str = RUNNER

    @property
    def pinned(self) -> bool:
        return self.version != RUNNER


def parse_qemu_pin(value: Any, source: str) -> QemuPin:
    """The ``[qemu]`` table of a policy (absent: the runner's); a SpecError naming the file and
    the key for anything but a version name or ``"runner"``."""
    if value is None:
        return QemuPin()
    if not isinstance(value, Mapping):
        raise SpecError(f'{source}: qemu must be a table: [qemu] version = "10.0" (or "{RUNNER}")')
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise SpecError(f"{source}: unknown [qemu] key {_shown(unknown[0])}: use version")
    version = value.get("version", RUNNER)
    if version == RUNNER:
        return QemuPin()
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise SpecError(
            f"{source}: [qemu] version = {_shown(version)}: pin a version the configured suites offer "
            f'(`diskbench qemu list`: a Debian version, or a short form such as "10.0") or "{RUNNER}"; '
            "a path is never a pin"
        )
    return QemuPin(version)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
