"""The storage policy: the image and drive options a platform ships by default.

``policy.toml`` at the top of the repository is what a management layer
(libvirt, a cloud's config) would pick when it creates and attaches a disk:
format, preallocation, cluster_size, cache, aio, interface, and extra
``-drive`` options such as a throttle.  A change to it is a change of the
*subject*: history measures it at every commit, and the gate compares a pull
request's policy with its base's.

Rules of use:

- Cells a spec leaves unset take the policy's values.  Image options that only
  make sense for one format (preallocation, cluster_size, compat,
  lazy_refcounts) are taken only by cells of the policy's format; drive
  options (cache, aio, interface, the extra ``[drive.options]``) by every cell.
- The extra drive options are not part of a cell's id: a cell is the same
  point of the matrix under two policies, and that is what lets base and head
  be compared cell by cell.  They are part of the record's subject (and so of
  its fingerprint).

Parsing is pure; :func:`load_policy` reads the file.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import SpecError
from harness.spec import Cell, Format, make_cell

POLICY_FILE = "policy.toml"

IMAGE_KEYS = ("format", "preallocation", "size", "cluster_size", "compat", "lazy_refcounts")
FORMAT_SPECIFIC = ("preallocation", "cluster_size", "compat", "lazy_refcounts")
DRIVE_KEYS = ("cache", "aio", "interface")

# ``-drive`` option names and values: no commas or '=' in values, so an option
# cannot smuggle in another one.
_OPTION_NAME = re.compile(r"^[a-z][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)*$")
_OPTION_VALUE = re.compile(r"^[A-Za-z0-9._/+-]+$")
# options that would change which file or format is attached, or its identity
_RESERVED = {"file", "format", "if", "id", "cache", "aio", "readonly", "node-name", "driver", "serial"}


@dataclass(frozen=True)
class Policy:
    """A parsed policy; :attr:`digest` names it in records and pages."""

    image: Mapping[str, Any]
    drive: Mapping[str, Any]
    drive_options: tuple[tuple[str, str], ...] = ()
    source: str = POLICY_FILE
    description: str = ""
    text: str = field(default="", compare=False, repr=False)

    @property
    def digest(self) -> str:
        canonical = {"image": dict(self.image), "drive": dict(self.drive), "options": self.drive_options}
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def format(self) -> Format:
        return Format(self.image.get("format", Format.QCOW2.value))

    def defaults_for(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The ``make_cell`` keywords the policy adds to ``values`` (which win)."""
        fmt = str(values.get("format", self.format.value)).strip().lower()
        out: dict[str, Any] = {}
        for key, value in self.image.items():
            if key in FORMAT_SPECIFIC and fmt != self.format.value:
                continue
            out[key] = value
        out.update(self.drive)
        return out

    def cell(self, **values: Any) -> Cell:
        """The policy's own cell for a workload: ``policy.cell(workload="dd", dd_mib=64)``."""
        return make_cell(**{**self.defaults_for(values), **values})

    def as_dict(self) -> dict[str, Any]:
        """What a record's subject says of the policy."""
        return {
            "digest": self.digest,
            "source": self.source,
            "image": dict(self.image),
            "drive": dict(self.drive),
            "drive_options": {k: v for k, v in self.drive_options},
        }


def parse_policy(text: str, *, source: str = POLICY_FILE) -> Policy:
    """Parse and validate a policy; errors name the file and the key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: not valid TOML ({exc}): fix the syntax") from None
    unknown = set(data) - {"image", "drive", "description"}
    if unknown:
        raise SpecError(f"{source}: unknown table {sorted(unknown)[0]!r}: use [image] and [drive]")
    image = _table(data, "image", source)
    drive = dict(_table(data, "drive", source))
    options = drive.pop("options", {})
    for key in image:
        if key not in IMAGE_KEYS:
            raise SpecError(f"{source}: unknown [image] key {key!r}: use one of {', '.join(IMAGE_KEYS)}")
    for key in drive:
        if key not in DRIVE_KEYS:
            raise SpecError(
                f"{source}: unknown [drive] key {key!r}: use one of {', '.join(DRIVE_KEYS)} "
                "or put extra -drive options under [drive.options]"
            )
    if not isinstance(options, dict):
        raise SpecError(f"{source}: [drive.options] must be a table of -drive options")
    drive_options = tuple(_option(k, v, source) for k, v in _flatten(options).items())
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"{source}: description must be a string")
    policy = Policy(
        image=image,
        drive=drive,
        drive_options=drive_options,
        source=source,
        description=description,
        text=text,
    )
    try:
        policy.cell(workload="dd", dd_mib=2)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc.message}") from None
    return policy


def load_policy(path: Path) -> Policy:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(
            f"policy {path} does not exist: pass a policy.toml such as the repository's own"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"policy {path} cannot be read: {exc}") from None
    return parse_policy(text, source=str(path))


def _table(data: Mapping[str, Any], key: str, source: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"{source}: {key} must be a table ([{key}])")
    return dict(value)


def _flatten(options: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{throttling: {bps-write: 1}}`` and ``{"throttling.bps-write": 1}`` alike."""
    flat: dict[str, Any] = {}
    for key, value in options.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _option(name: str, value: Any, source: str) -> tuple[str, str]:
    if not _OPTION_NAME.match(name) or name in _RESERVED:
        raise SpecError(
            f"{source}: [drive.options] {name!r} is not an extra -drive option: "
            "use names such as throttling.bps-write, detect-zeroes, discard"
        )
    if isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, int | str):
        text = str(value)
    else:
        raise SpecError(f"{source}: [drive.options] {name} = {value!r}: use a number, a string or true/false")
    if not _OPTION_VALUE.match(text):
        raise SpecError(
            f"{source}: [drive.options] {name} = {text!r}: use letters, digits and . _ / + - only"
        )
    return name, text
