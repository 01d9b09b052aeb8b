"""The storage policy: the image and drive options a platform ships by default.

``policy.toml`` at the top of the repository is what a management layer (libvirt, a cloud's
config) would pick when it creates and attaches a disk: format, preallocation, cluster_size,
cache, aio, interface, and extra ``-drive`` options such as a throttle.  A change to it is a
change of the *subject*: history measures it at every commit, and the gate compares a pull
request's policy with its base's.

- Cells a spec leaves unset take the policy's values.  Image options of one format
  (preallocation, cluster_size, compat, lazy_refcounts) are taken only by cells of the policy's
  format; drive options (cache, aio, interface, ``[drive.options]``) by every cell where QEMU
  accepts them with that cell's own axes.
- Where QEMU does not (``aio=native`` with a cache mode that is not direct, qcow2's cache options
  on a raw image), the cell keeps what a platform falls back to (``aio=threads``, QEMU's default
  for an option).  That depends on the cell alone, so both sides of a gate hold back the same
  values in the same cells; :meth:`Policy.complete` says which (:class:`Held`).
- A policy is refused (exit 2) when its own cell cannot take one of its values, and a spec under
  it when one of its values reaches no cell of the spec (:func:`check_reach`).
- The extra drive options are not part of a cell's id (a cell is the same point of the matrix
  under two policies, so base and head compare cell by cell); they are part of the record's
  subject and fingerprint.

Parsing is pure; :func:`load_policy` reads the file.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import SpecError
from harness.files import read_input_text
from harness.spec import Aio, Cache, Cell, Format, make_cell
from harness.subject.qemu_pin import QemuPin, parse_qemu_pin
from harness.untrusted import toml_loads

POLICY_FILE = "policy.toml"

IMAGE_KEYS = ("format", "preallocation", "size", "cluster_size", "compat", "lazy_refcounts", "extended_l2")
FORMAT_SPECIFIC = ("preallocation", "cluster_size", "compat", "lazy_refcounts", "extended_l2")
#: [overlay]: the qcow2 options of the images a platform creates over a base (cells with a
#: backing chain take them before [image]'s)
OVERLAY_KEYS = ("cluster_size", "extended_l2")
DRIVE_KEYS = ("cache", "aio", "interface")
# the TOML types each key takes (a bool is not an int here: lazy_refcounts = "off" is an error,
# not a true string)
KEY_TYPES: Mapping[str, tuple[type, ...]] = {
    "format": (str,),
    "preallocation": (str,),
    "size": (str, int),
    "cluster_size": (str, int),
    "compat": (str,),
    "lazy_refcounts": (bool,),
    "extended_l2": (bool,),
    "cache": (str,),
    "aio": (str,),
    "interface": (str,),
}

#: QEMU's largest throttling value (``THROTTLE_VALUE_MAX``, include/qemu/throttle.h).
THROTTLE_VALUE_MAX = 1_000_000_000_000_000

ON_OFF = ("on", "off")


@dataclass(frozen=True)
class Refusal:
    """Why QEMU refuses a policy's value with one cell's axes: the axis, QEMU's rule, the fix."""

    axis: str  # the cell's value that rules it out: "cache=writeback", "format=raw"
    why: str
    fix: str  # what the policy could do instead, for a policy whose own cell is refused


@dataclass(frozen=True)
class Held:
    """A value of the policy that one cell cannot take with its own axes, and what it keeps instead."""

    key: str  # "aio", or a [drive.options] name
    value: str  # the policy's value
    keeps: str  # the cell's value instead: aio's fallback, or QEMU's default for an option
    axis: str  # the cell's value that rules it out
    why: str  # QEMU's rule

    @property
    def setting(self) -> str:
        return f"{self.key}={self.value}"

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "keeps": self.keeps, "axis": self.axis, "why": self.why}


#: what a cell keeps for an option of the policy it cannot take: the option is left out
QEMU_DEFAULT = "QEMU's default"

#: the [drive] keys whose value depends on the cell's other axes, and the value a cell falls back
#: to where QEMU refuses the policy's: threads, QEMU's and libvirt's default aio, opens any image
DRIVE_FALLBACK: Mapping[str, str] = {"aio": Aio.THREADS.value}


def drive_refusal(key: str, value: str, cell: Cell) -> Refusal | None:
    """Why QEMU refuses ``[drive] key = value`` with ``cell``'s own axes (its cache mode), or None."""
    if key == "aio" and value == Aio.NATIVE.value and not cell.drive.cache.direct:
        direct = " or ".join(c.value for c in Cache if c.direct)
        return Refusal(
            axis=f"cache={cell.drive.cache.value}",
            why=f"aio=native needs a direct cache mode ({direct})",
            fix="use cache=none or cache=directsync, or aio=threads",
        )
    return None


@dataclass(frozen=True)
class OptionRule:
    """One ``-drive`` option a policy may set: its value is a number in a range or one of a set.

    A pull request's policy is untrusted input that reaches QEMU's command
    line, so every option is on this list with its values checked; anything
    else (``file.*``, ``backing.*``, ``driver``, ``json:`` filenames, any other
    node option) is refused by name before anything runs.
    """

    name: str
    choices: tuple[str, ...] = ()  # the values allowed, as QEMU spells them
    minimum: int | None = None  # a number from minimum to maximum when choices is empty
    maximum: int | None = None
    why: str = ""
    #: the image formats whose driver takes the option (empty: every format); QEMU refuses it
    #: for another format's image, so a cell of another format keeps QEMU's default
    formats: tuple[Format, ...] = ()

    def refusal(self, cell: Cell) -> Refusal | None:
        """Why QEMU refuses this option with ``cell``'s own axes, or None where it takes it."""
        fmt = cell.image.format
        if self.formats and fmt not in self.formats:
            takers = " and ".join(f.value for f in self.formats)
            return Refusal(
                axis=f"format={fmt.value}",
                why=f"{self.name} is an option of the {takers} driver, which a {fmt.value} image does not have",
                fix=f"drop it, or use format = {self.formats[0].value!r}",
            )
        return None

    def value(self, raw: Any, source: str) -> str:
        """The value as QEMU is given it; a bad one is a SpecError naming the option."""
        where = f"{source}: [drive.options] {self.name} = {_shown(raw)}"
        if self.choices:
            text = ("on" if raw else "off") if isinstance(raw, bool) and "on" in self.choices else raw
            if not isinstance(text, str) or text not in self.choices:
                raise SpecError(f"{where}: use one of {', '.join(self.choices)}")
            return text
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise SpecError(f"{where}: use a number from {self.minimum} to {self.maximum}")
        assert self.minimum is not None and self.maximum is not None
        if not self.minimum <= raw <= self.maximum:
            raise SpecError(f"{where}: use a number from {self.minimum} to {self.maximum}")
        return str(raw)


def _throttle_rules() -> list[OptionRule]:
    rules = []
    for kind in ("bps", "iops"):
        for op in ("total", "read", "write"):
            base = f"throttling.{kind}-{op}"
            rules.append(OptionRule(base, minimum=0, maximum=THROTTLE_VALUE_MAX, why="a limit; 0 is none"))
            rules.append(OptionRule(f"{base}-max", minimum=0, maximum=THROTTLE_VALUE_MAX, why="burst"))
            rules.append(OptionRule(f"{base}-max-length", minimum=1, maximum=THROTTLE_VALUE_MAX, why="s"))
    rules.append(OptionRule("throttling.iops-size", minimum=0, maximum=THROTTLE_VALUE_MAX))
    return rules


#: Every ``-drive`` option a storage policy may set: what libvirt's and other platforms'
#: disk settings map to.  The harness sets file, format, cache, aio, if and id from the
#: cell (``write-cache`` and ``cache.*`` would undo the cell's cache mode); nothing that
#: names another file, node or driver is here.
DRIVE_OPTIONS: Mapping[str, OptionRule] = {
    rule.name: rule
    for rule in [
        *_throttle_rules(),
        OptionRule("detect-zeroes", ("off", "on", "unmap")),
        OptionRule("discard", ("ignore", "unmap", "off", "on")),
        OptionRule("copy-on-read", ON_OFF),
        # what the device does on an IO error (libvirt's error_policy / rerror_policy)
        OptionRule("werror", ("report", "ignore", "enospc", "stop")),
        OptionRule("rerror", ("report", "ignore", "stop")),
        # qcow2's metadata caches, the format's main tuning knob (bytes; 32 MiB covers 256 GiB
        # of 64K clusters): a qcow2-only option, which QEMU refuses for a raw cell ("Block
        # format 'raw' does not support the option"), so raw cells keep QEMU's default
        OptionRule("l2-cache-size", minimum=0, maximum=1 << 32, formats=(Format.QCOW2,)),
        OptionRule("refcount-cache-size", minimum=0, maximum=1 << 32, formats=(Format.QCOW2,)),
        OptionRule("cache-clean-interval", minimum=0, maximum=(1 << 32) - 1, formats=(Format.QCOW2,)),
    ]
}


def option_refusal(name: str, cell: Cell) -> Refusal | None:
    """Why QEMU refuses the ``-drive`` option ``name`` with ``cell``'s own axes, or None.

    Every option this allowlist holds is taken by every cache mode, aio and bus (checked against
    QEMU by tests/integration/test_policy_qemu.py); qcow2's cache options need a qcow2 image.
    """
    rule = DRIVE_OPTIONS.get(name)
    return rule.refusal(cell) if rule is not None else None


def options_for(cell: Cell, options: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The policy's extra ``-drive`` options that ``cell`` takes: what its drive is given."""
    return tuple((name, value) for name, value in options if option_refusal(name, cell) is None)


def held_options(cell: Cell, options: Sequence[tuple[str, str]]) -> tuple[Held, ...]:
    """The policy's extra ``-drive`` options that ``cell`` cannot take, each with QEMU's reason."""
    held = []
    for name, value in options:
        refusal = option_refusal(name, cell)
        if refusal is not None:
            held.append(Held(name, value, QEMU_DEFAULT, refusal.axis, refusal.why))
    return tuple(held)


@dataclass(frozen=True)
class Completed:
    """A cell completed from a policy: the cell, the extra options its drive gets, what it holds back."""

    cell: Cell
    options: tuple[tuple[str, str], ...] = ()
    held: tuple[Held, ...] = ()


def _shown(value: Any) -> str:
    """A value for an error message: repr, cut short (it comes from the file under test)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Policy:
    """A parsed policy; :attr:`digest` names it in records and pages."""

    image: Mapping[str, Any]
    drive: Mapping[str, Any]
    drive_options: tuple[tuple[str, str], ...] = ()
    source: str = POLICY_FILE
    description: str = ""
    text: str = field(default="", compare=False, repr=False)
    # the QEMU the repository pins ([qemu]; harness.subject.qemu_pin), else the runner's
    qemu: QemuPin = field(default_factory=QemuPin)
    # [overlay]: what cells with a backing chain take for their overlay (OVERLAY_KEYS)
    overlay: Mapping[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        # options sorted: their order in the file does not change what QEMU is given
        canonical = {
            "image": dict(self.image),
            "drive": dict(self.drive),
            "options": sorted(self.drive_options),
            # only when set: a policy without [overlay] keeps the digest it always had
            **({"overlay": dict(self.overlay)} if self.overlay else {}),
        }
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def format(self) -> Format:
        value = str(self.image.get("format", Format.QCOW2.value)).strip().lower()
        try:
            return Format(value)
        except ValueError:
            allowed = ", ".join(f.value for f in Format)
            raise SpecError(f"[image] format {value!r} is not a format: use one of {allowed}") from None

    def defaults_for(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The ``make_cell`` keywords the policy adds to ``values`` (which win): a drive value
        the cell cannot take is its fallback instead (see :meth:`complete`)."""
        return self._defaults(values)[0]

    def _defaults(self, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[Held]]:
        fmt = str(values.get("format", self.format.value)).strip().lower()
        out: dict[str, Any] = {}
        for key, value in self.image.items():
            if key in FORMAT_SPECIFIC and fmt != self.format.value:
                continue
            out[key] = value
        if values.get("backing") not in (None, "", "none") and fmt == Format.QCOW2.value:
            out.update(self.overlay)
        out.update(self.drive)
        held = []
        for key, fallback in DRIVE_FALLBACK.items():
            if key in values or key not in self.drive:
                continue
            try:
                # the cell as it would be with the fallback: its other axes decide
                probe = make_cell(**{**out, **values, key: fallback})
            except (SpecError, TypeError):
                continue  # the cell is bad for another reason, which make_cell will say
            value = str(self.drive[key]).strip().lower()
            refusal = drive_refusal(key, value, probe)
            if refusal is not None:
                out[key] = fallback
                held.append(Held(key, value, fallback, refusal.axis, refusal.why))
        return out, held

    def complete(self, values: Mapping[str, Any]) -> Completed:
        """The cell of ``values`` with what it leaves unset from the policy, its drive's extra
        options, and the policy's values it cannot take (each kept at its fallback)."""
        defaults, held = self._defaults(values)
        cell = make_cell(**{**defaults, **values})
        return Completed(
            cell=cell,
            options=options_for(cell, self.drive_options),
            held=(*held, *held_options(cell, self.drive_options)),
        )

    def cell(self, **values: Any) -> Cell:
        """The policy's own cell for a workload: ``policy.cell(workload="dd", dd_mib=64)``."""
        return self.complete(values).cell

    def own_refusal(self) -> str | None:
        """Why the policy's own cell cannot take one of its values (the policy is invalid in
        itself), or None."""
        own = self.complete({"workload": "dd", "dd_mib": 2})
        for held in own.held:
            drive = held.key in DRIVE_FALLBACK
            # the cell keeps the fallback, and its other axes still refuse the policy's value
            refusal = (
                drive_refusal(held.key, held.value, own.cell) if drive else option_refusal(held.key, own.cell)
            )
            fix = f": {refusal.fix}" if refusal is not None else ""
            return (
                f"{'[drive]' if drive else '[drive.options]'} {held.setting} cannot apply to the policy's "
                f"own cell ({held.axis}): {held.why}{fix}"
            )
        return None

    def as_dict(self) -> dict[str, Any]:
        """What a record's subject says of the policy."""
        return {
            "digest": self.digest,
            "source": self.source,
            "image": dict(self.image),
            "drive": dict(self.drive),
            "drive_options": {k: v for k, v in self.drive_options},
            # only when pinned: a policy without [qemu] says what it always said
            **({"qemu": self.qemu.version} if self.qemu.pinned else {}),
            **({"overlay": dict(self.overlay)} if self.overlay else {}),
        }


def parse_policy(text: str, *, source: str = POLICY_FILE) -> Policy:
    """Parse and validate a policy; errors name the file and the key."""
    try:
        data = toml_loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: not valid TOML ({exc}): fix the syntax") from None
    unknown = sorted(set(data) - {"image", "drive", "description", "qemu", "overlay"})
    if unknown:
        what = "table" if isinstance(data[unknown[0]], dict) else "key"
        raise SpecError(
            f"{source}: unknown {what} {unknown[0]!r}: use description, [image], [overlay], [drive] and [qemu]"
        )
    image = _table(data, "image", source)
    overlay = _table(data, "overlay", source)
    for key, value in overlay.items():
        if key not in OVERLAY_KEYS:
            raise SpecError(f"{source}: unknown [overlay] key {key!r}: use one of {', '.join(OVERLAY_KEYS)}")
        _check_type("overlay", key, value, source)
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
    for table, values in (("image", image), ("drive", drive)):
        for key, value in values.items():
            _check_type(table, key, value, source)
    if not isinstance(options, dict):
        raise SpecError(f"{source}: [drive.options] must be a table of -drive options")
    drive_options = tuple(_option(k, v, source) for k, v in _flatten(options, source=source).items())
    _check_throttling(dict(drive_options), source)
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
        qemu=parse_qemu_pin(data.get("qemu"), source),
        overlay=overlay,
    )
    if overlay:
        try:  # the policy's own cell over a base takes its [overlay]
            policy.complete({"workload": "dd", "dd_mib": 2, "format": "qcow2", "backing": "depth=1"})
        except SpecError as exc:
            raise SpecError(f"{source}: [overlay] {exc.message}") from None
    try:
        refusal = policy.own_refusal()
    except SpecError as exc:
        raise SpecError(f"{source}: {exc.message}") from None
    if refusal is not None:
        raise SpecError(f"{source}: {refusal}")
    return policy


def check_reach(policy: Policy, held: Sequence[Sequence[Held]], where: str) -> None:
    """Refuse a policy value that none of the cells of ``where`` takes (``held``: each cell's).

    A spec under which the policy's value reaches no cell would measure the policy without it:
    exit 2, naming the value, the cells' axis and the rule.
    """
    if not held:
        return
    for first in held[0]:
        everywhere = [next((h for h in cell if h.setting == first.setting), None) for cell in held]
        if all(h is not None for h in everywhere):
            axes = sorted({h.axis for h in everywhere if h is not None})
            raise SpecError(
                f"{policy.source}: {first.setting} reaches no cell of {where} (every cell has "
                f"{' or '.join(axes)}: {first.why}): add a cell that takes it, or drop it from the policy"
            )


def load_policy(path: Path) -> Policy:
    # a checkout's policy.toml may be a pull request's symlink to a host file: read only the file
    if path.is_symlink():
        raise SpecError(f"policy {path} is a symlink: pass the policy file itself")
    text = read_input_text(path, what="policy", hint="pass a policy.toml such as the repository's own")
    return parse_policy(text, source=str(path))


def _table(data: Mapping[str, Any], key: str, source: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"{source}: {key} must be a table ([{key}])")
    return dict(value)


#: What an [image] or [drive] string may hold: a value such as "qcow2", "64K", "1.1", "virtio-blk".
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9._-]{1,32}")


def _check_type(table: str, key: str, value: Any, source: str) -> None:
    if isinstance(value, str) and not _PLAIN_VALUE.fullmatch(value):
        # a comma would add a qemu-img or -drive option, a newline would forge log lines
        raise SpecError(f"{source}: [{table}] {key} = {_shown(value)}: use letters, digits and . _ - only")
    allowed = KEY_TYPES[key]
    ok = (
        isinstance(value, bool)
        if bool in allowed
        else isinstance(value, allowed) and not isinstance(value, bool)
    )
    if not ok:
        names = {str: "a string", int: "a number", bool: "true or false"}
        wanted = " or ".join(names[t] for t in allowed)
        raise SpecError(f"{source}: [{table}] {key} = {value!r}: use {wanted}")


def _flatten(options: Mapping[str, Any], prefix: str = "", *, source: str) -> dict[str, Any]:
    """``{throttling: {bps-write: 1}}`` and ``{"throttling.bps-write": 1}`` alike.

    Both spellings in one file would give the same option twice: an error, not
    a silent pick of one.
    """
    flat: dict[str, Any] = {}
    for key, value in options.items():
        name = f"{prefix}{key}"
        inner = _flatten(value, f"{name}.", source=source) if isinstance(value, dict) else {name: value}
        for full, item in inner.items():
            if full in flat:
                raise SpecError(
                    f"{source}: [drive.options] {full!r} is given twice (dotted and as a table): keep one"
                )
            flat[full] = item
    return flat


def _check_throttling(options: Mapping[str, str], source: str) -> None:
    """QEMU's own rules for a throttle (util/throttle.c), checked here so a bad one is exit 2, not a boot failure."""

    def value(name: str) -> int:
        return int(options.get(f"throttling.{name}", "0"))

    where = f"{source}: [drive.options]"
    if value("iops-size") and not any(value(f"iops-{op}") for op in ("total", "read", "write")):
        # QEMU: "iops size requires an iops value to be set"
        raise SpecError(
            f"{where} throttling.iops-size needs an iops limit: set throttling.iops-total, -read or -write"
        )
    for kind in ("bps", "iops"):
        for suffix in ("", "-max"):
            total = value(f"{kind}-total{suffix}")
            if total and (value(f"{kind}-read{suffix}") or value(f"{kind}-write{suffix}")):
                raise SpecError(
                    f"{where} throttling.{kind}-total{suffix} and throttling.{kind}-read{suffix}/"
                    f"-write{suffix} cannot be used together: set the total or the read and write limits"
                )
        for op in ("total", "read", "write"):
            name = f"{kind}-{op}"
            avg, peak = value(name), value(f"{name}-max")
            length = options.get(f"throttling.{name}-max-length")
            if peak and not avg:
                raise SpecError(f"{where} throttling.{name}-max needs throttling.{name}: set both")
            if peak and peak < avg:
                raise SpecError(f"{where} throttling.{name}-max = {peak} is below throttling.{name} = {avg}")
            if length is not None and int(length) > 1 and not peak:
                raise SpecError(
                    f"{where} throttling.{name}-max-length needs throttling.{name}-max: set the burst rate"
                )


def _option(name: str, value: Any, source: str) -> tuple[str, str]:
    rule = DRIVE_OPTIONS.get(name)
    if rule is None:
        raise SpecError(
            f"{source}: [drive.options] {_shown(name)} is not a -drive option a policy may set: use "
            "throttling.* (bps-write, iops-total, ...), detect-zeroes, discard, copy-on-read, werror, "
            "rerror, l2-cache-size, refcount-cache-size or cache-clean-interval"
        )
    if not isinstance(value, bool | int | str):
        raise SpecError(
            f"{source}: [drive.options] {name} = {_shown(value)}: use a number, a string or true/false"
        )
    return name, rule.value(value, source)
