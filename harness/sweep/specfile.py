"""Sweep specs: parse and validate the TOML, with the file and line in each error, and expand it.

See :mod:`harness.sweep` for the format.
"""

from __future__ import annotations

import itertools
import re
import tomllib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from harness.backing import parse_backing
from harness.errors import SpecError
from harness.files import read_input_text
from harness.spec import (
    PREALLOCATION,
    Cell,
    CellAxes,
    Format,
    axis_names,
    make_cell,
    parse_size,
)
from harness.subject.policy import Held, Policy, check_reach
from harness.subject.qemu_pin import RUNNER
from harness.untrusted import toml_loads
from harness.workloads import registry

TOP_KEYS = ("name", "description", "repeat", "axes", "params", "exclude")
# the axis names: make_cell's keywords, so the two can never drift apart (those of the
# workloads registered when this module was imported: axis_names() is always current)
AXES: tuple[str, ...] = axis_names()
SIZE_KEYS = ("size", "cluster_size")
#: the QEMU builds a sweep runs (``[axes] qemu = ["runner", "10.0"]``): not a cell's axis but the
#: machine's, so it is kept apart from the cells' axes (:attr:`SweepSpec.qemu`); each build's
#: cells run with that build's binaries, and the report puts them side by side
QEMU_AXIS = "qemu"
#: the disks under the work dir a sweep runs on (``[axes] host_disk = ["native", "period-hdd"]``,
#: harness/host/hostdisk.py): the machine's too, kept apart as the QEMU axis is
#: (:attr:`SweepSpec.host_disk`); each model is built once and its cells run on it, and the
#: report puts the disks side by side
HOST_DISK_AXIS = "host_disk"
_QEMU_VALUE = re.compile(r"[0-9][0-9A-Za-z.+~:-]{0,79}|/[^\x00-\x1f]{1,4000}")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# -- the spec ---------------------------------------------------------------


@dataclass(frozen=True)
class Exclusion:
    """An ``[[exclude]]`` table: axis values (any of each list) and why."""

    match: Mapping[str, tuple[Any, ...]]
    reason: str
    line: int

    def matches(self, values: Mapping[str, Any]) -> bool:
        return all(
            key in values and canonical(key, values[key]) in {canonical(key, v) for v in wanted}
            for key, wanted in self.match.items()
        )


@dataclass(frozen=True)
class SweepSpec:
    name: str
    source: str
    repeat: int = 1
    description: str = ""
    axes: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    excludes: tuple[Exclusion, ...] = ()
    #: the QEMU builds each cell runs under (:data:`QEMU_AXIS`), as the spec names them; empty:
    #: the run's one QEMU
    qemu: tuple[str, ...] = ()
    #: the host disk models the cells run on (:data:`HOST_DISK_AXIS`), in the spec's order;
    #: empty: the one the command names (``--host-disk``, native by default)
    host_disk: tuple[str, ...] = ()


def check_qemu_value(value: Any, what: str) -> str:
    """One value of the QEMU axis: ``runner``, a version ``diskbench qemu list`` offers (``10.0``,
    a Debian version) or the absolute path of a binary or a fetched build's prefix; a SpecError
    naming ``what`` otherwise.  Resolving it is the command's business (it may fetch)."""
    text = value.strip() if isinstance(value, str) else value
    if text == RUNNER or (isinstance(text, str) and _QEMU_VALUE.fullmatch(text)):
        return str(text)
    raise SpecError(
        f"{what} {value!r}: use {RUNNER!r} (the runner's QEMU), a version `diskbench qemu list` offers "
        "(10.0) or the absolute path of a qemu-system-x86_64 or a fetched build's prefix"
    )


@dataclass(frozen=True)
class Excluded:
    """A combination that will not run, and why (shown before the run)."""

    values: Mapping[str, Any]
    reason: str

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.values.items())


@dataclass(frozen=True)
class Plan:
    """A spec expanded: the cells in spec order, and what was left out."""

    spec: SweepSpec
    cells: tuple[Cell, ...]
    excluded: tuple[Excluded, ...]
    #: (cell id, a value of the policy the cell cannot take and keeps its fallback for)
    held: tuple[tuple[str, Held], ...] = ()


def canonical(key: str, value: Any) -> Any:
    """One spelling per value, so ``"2G"`` matches ``"2g"`` and ``2147483648``."""
    if key in SIZE_KEYS and isinstance(value, str | int) and not isinstance(value, bool):
        try:
            return parse_size(value)
        except SpecError:
            return value
    if isinstance(value, Enum):
        return str(value.value)
    if key == "backing" and isinstance(value, str):
        try:  # "depth=1" matches the chain it spells with every default said
            return parse_backing(value, ANY_DISK).spelled().lower()
        except SpecError:
            return value.strip().lower()
    if isinstance(value, str):
        return value.strip().lower()
    return value


#: a disk any fill fits, to spell a chain apart from a cell's own disk
ANY_DISK = 1 << 60


class Locator:
    """Line numbers of keys and values in TOML text (tomllib gives none).

    Understands what specs use: ``[table]``, ``[[array.of.tables]]``,
    ``key = value`` and arrays over several lines.  When it cannot place a
    value it falls back to its key, then its table, then line 1: a message
    always names a line, at worst a nearby one.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*')\s*=")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.keys: dict[tuple[str, int, str], int] = {}
        self.tables: dict[tuple[str, int], int] = {}
        table, index = "", 0
        counts: dict[str, int] = {}
        depth = 0
        for number, raw in enumerate(self.lines, start=1):
            line = _strip_comment(raw)
            if depth == 0:
                header = self._HEADER.match(line)
                if header:
                    table = header.group(2).replace('"', "").replace("'", "").strip()
                    if header.group(1) == "[[":
                        index = counts.get(table, -1) + 1
                        counts[table] = index
                    else:
                        index = 0
                    self.tables.setdefault((table, index), number)
                    continue
                key = self._KEY.match(line)
                if key:
                    self.keys.setdefault((table, index, key.group(1).strip("\"'")), number)
            depth += _bracket_delta(line)
            depth = max(depth, 0)

    def line_of(self, table: str, key: str | None = None, value: Any = None, *, index: int = 0) -> int:
        start = self.keys.get((table, index, key or "")) if key else None
        if start is None and key:
            start = self._anywhere(key)
        if start is None:
            return self.tables.get((table, index), 1)
        if value is None:
            return start
        pattern = _value_pattern(value)
        depth = 0
        for number in range(start, len(self.lines) + 1):
            line = _strip_comment(self.lines[number - 1])
            searched = line.split("=", 1)[1] if number == start and "=" in line else line
            if pattern.search(searched):
                return number
            depth += _bracket_delta(line)
            if depth <= 0:
                break
        return start

    def _anywhere(self, key: str) -> int | None:
        """The first ``key =`` in any form (``axes.cache = ...``, inline tables)."""
        pattern = re.compile(r"(^|[\s.{,])" + re.escape(key) + r"\s*=")
        for number, line in enumerate(self.lines, start=1):
            if pattern.search(_strip_comment(line)):
                return number
        return None


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def _bracket_delta(line: str) -> int:
    delta, quote = 0, ""
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            delta += 1
        elif ch in "]}":
            delta -= 1
    return delta


def _value_pattern(value: Any) -> re.Pattern[str]:
    if isinstance(value, str):
        return re.compile(r"([\"'])" + re.escape(value) + r"\1")
    if isinstance(value, bool):
        return re.compile(r"\b" + ("true" if value else "false") + r"\b")
    return re.compile(r"(?<![\w.])" + re.escape(str(value)) + r"(?![\w.])")


def _allowed_types(key: str) -> tuple[type, ...]:
    """The TOML types an axis takes: a workload parameter's, or read from the cell's axes (CellAxes)
    (an Enum is spelled as a str)."""
    param = registry.params().get(key)
    if param is not None:
        return (param.type,)
    hint = typing.get_type_hints(CellAxes)[key]
    found: list[type] = []
    for arg in typing.get_args(hint) or (hint,):
        if isinstance(arg, type) and issubclass(arg, Enum):
            found.append(str)
        elif arg in (str, int, bool):
            found.append(arg)
    return tuple(dict.fromkeys(found))


def _type_problem(key: str, value: Any) -> str | None:
    allowed = _allowed_types(key)
    if isinstance(value, bool):
        ok = bool in allowed
    else:
        ok = any(isinstance(value, t) and t is not bool for t in allowed)
    if ok:
        return None
    names = {str: "a string", int: "an integer", bool: "true or false"}
    wanted = " or ".join(names[t] for t in allowed)
    return f"{key} {value!r} is {type(value).__name__}, not {wanted}"


def _value_problem(
    key: str, value: Any, params: Mapping[str, Any], axes: Mapping[str, Sequence[Any]]
) -> str | None:
    """Why ``key = value`` can never be part of a cell, or None.

    A value passes if some cell can hold it: first tried with each format,
    a direct cache and a big disk, with and without the spec's params; then
    with every combination of the spec's other values (a dd size can need
    the spec's chunk size).  What fails only *together* with another axis
    value is an exclusion, not an error (see :func:`expand_spec`).  The
    message is the one of the permissive try: it is about the value itself.
    """
    problem = _type_problem(key, value)
    if problem:
        return problem
    if (
        key == "preallocation"
        and isinstance(value, str)
        and not any(value.strip().lower() in modes for modes in PREALLOCATION.values())
    ):
        allowed = "; ".join(f"{fmt.value}: {', '.join(modes)}" for fmt, modes in PREALLOCATION.items())
        return f"preallocation {value!r} is not allowed: use {allowed}"
    others = {k: v for k, v in params.items() if k != key}
    first: str | None = None
    # qcow2 first: it takes every option, so its refusal is about the value itself
    for with_params, fmt in itertools.product((False, True), (Format.QCOW2, Format.RAW)):
        base: dict[str, Any] = {"format": fmt.value, "cache": "none", "size": "1T"}
        if with_params:
            base.update(others)
        base[key] = value
        problem = _cell_problem(base)
        if problem is None:
            return None
        first = first or problem
    names = [k for k in axes if k != key]
    for combo in itertools.product(*(axes[k] for k in names)):
        if _cell_problem({**others, **dict(zip(names, combo, strict=True)), key: value}) is None:
            return None
    return first


def _cell_problem(values: Mapping[str, Any]) -> str | None:
    try:
        make_cell(**values)
    except SpecError as exc:
        return exc.message
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def parse_spec(
    text: str, *, source: str = "<spec>", default_name: str = "sweep", extra_keys: tuple[str, ...] = ()
) -> SweepSpec:
    """Parse and validate a spec; a :class:`SpecError` names ``source:LINE``.

    ``extra_keys`` are top-level keys a caller reads itself (a preset's
    ``[preset]`` table): allowed here and otherwise ignored.
    """
    try:
        data = toml_loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        where = re.search(r"\s*\(at line (\d+), column \d+\)", msg)
        if where:
            raise SpecError(f"{source}:{where.group(1)}: {msg[: where.start()]}: not valid TOML") from None
        raise SpecError(f"{source}: {msg}: not valid TOML") from None
    loc = Locator(text)

    def fail(line: int, message: str) -> SpecError:
        return SpecError(f"{source}:{line}: {message}")

    known = axis_names()
    for key in data:
        if key not in TOP_KEYS and key not in extra_keys:
            hint = " (axes go under [axes] or [params])" if key in known else ""
            allowed = ", ".join((*TOP_KEYS, *extra_keys))
            raise fail(loc.line_of("", key), f"unknown key {key!r}{hint}: use {allowed}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise fail(
            loc.line_of("", "name"),
            f"name {name!r} is not allowed: use letters, digits, '.', '_' and '-' (it names a directory)",
        )
    repeat = data.get("repeat", 1)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise fail(loc.line_of("", "repeat", repeat), f"repeat {repeat!r} is not allowed: use 1 or more")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail(loc.line_of("", "description"), "description must be a string")

    tables: dict[str, dict[str, Any]] = {}
    qemu: tuple[str, ...] = ()
    host_disk: tuple[str, ...] = ()
    for table in ("axes", "params"):
        value = data.get(table, {})
        if not isinstance(value, dict):
            raise fail(loc.line_of("", table), f"{table} must be a table: write [{table}]")
        if QEMU_AXIS in value:
            value = dict(value)
            qemu = _qemu_axis(value.pop(QEMU_AXIS), f"{source}:{loc.line_of(table, QEMU_AXIS)}: ")
        if HOST_DISK_AXIS in value:
            value = dict(value)
            host_disk = _disk_axis(
                value.pop(HOST_DISK_AXIS), f"{source}:{loc.line_of(table, HOST_DISK_AXIS)}: "
            )
        for key in value:
            if key not in known:
                raise fail(
                    loc.line_of(table, key), f"unknown axis {key!r} in [{table}]: use {', '.join(known)}"
                )
        tables[table] = value
    axes_in, params = tables["axes"], tables["params"]
    for key in axes_in.keys() & params.keys():
        raise fail(
            loc.line_of("params", key),
            f"{key} is given in [axes] (line {loc.line_of('axes', key)}) and in [params]: keep one",
        )
    for key, value in params.items():
        if isinstance(value, list | dict):
            raise fail(
                loc.line_of("params", key), f"{key} in [params] takes one value: put lists under [axes]"
            )
    axes = _axis_values(axes_in, loc, source)
    for key, value in params.items():
        problem = _value_problem(key, value, params, axes)
        if problem:
            raise fail(loc.line_of("params", key, value), problem)
    for key, values in axes.items():
        for value in values:
            problem = _value_problem(key, value, params, axes)
            if problem:
                raise fail(loc.line_of("axes", key, value), problem)

    excludes = _excludes(data.get("exclude", []), loc, source, params=params, axes=axes)
    return SweepSpec(
        name=name,
        source=source,
        repeat=repeat,
        description=description,
        axes=axes,
        params=dict(params),
        excludes=tuple(excludes),
        qemu=qemu,
        host_disk=host_disk,
    )


def _axis_values(axes_in: Mapping[str, Any], loc: Locator, source: str) -> dict[str, tuple[Any, ...]]:
    """Each ``[axes]`` key's values, one value made a list of one, duplicates dropped in order;
    a SpecError (``source:LINE``) for an empty list or a value that is a list or a table."""
    axes: dict[str, tuple[Any, ...]] = {}
    for key, values in axes_in.items():
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise SpecError(
                f"{source}:{loc.line_of('axes', key)}: {key} = [] has no value: give at least one"
            )
        for value in values:
            if isinstance(value, list | dict):
                raise SpecError(
                    f"{source}:{loc.line_of('axes', key)}: {key}: each value is a string, number or boolean"
                )
        axes[key] = tuple(dict.fromkeys(values))
    return axes


def _excludes(
    raw_excludes: Any,
    loc: Locator,
    source: str,
    *,
    params: Mapping[str, Any],
    axes: Mapping[str, tuple[Any, ...]],
) -> list[Exclusion]:
    """The spec's ``[[exclude]]`` tables, each with its reason and the axis values it names,
    checked against ``params`` and ``axes``; a SpecError names ``source:LINE``."""

    def fail(line: int, message: str) -> SpecError:
        return SpecError(f"{source}:{line}: {message}")

    known = axis_names()
    if not isinstance(raw_excludes, list):
        raise fail(loc.line_of("", "exclude"), "exclude must be an array of tables: write [[exclude]]")
    excludes = []
    for index, table in enumerate(raw_excludes):
        line = loc.line_of("exclude", index=index)
        if not isinstance(table, dict):
            raise fail(line, "exclude must be an array of tables: write [[exclude]]")
        reason = table.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise fail(line, 'exclude needs a reason: add reason = "why these cells are left out"')
        match: dict[str, tuple[Any, ...]] = {}
        for key, wanted in table.items():
            if key == "reason":
                continue
            if key in (QEMU_AXIS, HOST_DISK_AXIS):
                what = "build" if key == QEMU_AXIS else "host disk"
                raise fail(
                    loc.line_of("exclude", key, index=index),
                    f"{key} in [[exclude]]: every {what} runs every cell; run a second sweep for other cells",
                )
            if key not in known:
                raise fail(
                    loc.line_of("exclude", key, index=index),
                    f"unknown axis {key!r} in [[exclude]]: use reason and any of {', '.join(known)}",
                )
            values = wanted if isinstance(wanted, list) else [wanted]
            for value in values:
                problem = _value_problem(key, value, params, axes)
                if problem:
                    raise fail(loc.line_of("exclude", key, value, index=index), problem)
            match[key] = tuple(values)
        if not match:
            raise fail(line, "exclude names no axis value, so it would exclude every cell: name some")
        excludes.append(Exclusion(match=match, reason=reason.strip(), line=line))
    return excludes


def _qemu_axis(raw: Any, where: str) -> tuple[str, ...]:
    """The QEMU axis's values, each checked (:func:`check_qemu_value`); ``where`` (``FILE:LINE: ``)
    starts an error."""
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise SpecError(f"{where}qemu = [] has no value: give at least one")
    try:
        return tuple(dict.fromkeys(check_qemu_value(v, "qemu") for v in values))
    except SpecError as exc:
        raise SpecError(f"{where}{exc.message}") from None


def _disk_axis(raw: Any, where: str) -> tuple[str, ...]:
    """The host disk axis's values, each a model's name (``native`` or one of host_disks.toml);
    ``where`` (``FILE:LINE: ``) starts an error."""
    from harness.host.hostdisk import HostDiskError, profile

    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise SpecError(f"{where}host_disk = [] has no value: give at least one")
    for value in values:
        try:
            profile(value if isinstance(value, str) else repr(value), what="host_disk")
        except HostDiskError as exc:
            raise SpecError(f"{where}{exc.message}") from None
    return tuple(dict.fromkeys(str(v) for v in values))


def load_spec(path: Path) -> SweepSpec:
    """Read a spec file; the name defaults to the file's stem."""
    text = read_input_text(path, what="sweep spec", hint="pass a .toml file such as sweeps/default.toml")
    return parse_spec(text, source=str(path), default_name=path.stem)


def expand_spec(spec: SweepSpec, *, policy: Policy | None = None) -> Plan:
    """Every combination of the axes, in spec order; exclusions kept with their reasons.

    With ``policy``, what the spec leaves unset comes from the policy (see
    :mod:`harness.subject.policy` for which of its values apply to which cells): a cell that
    cannot take one of its drive values keeps the fallback (``Plan.held`` says which), and a
    value that no cell takes is refused.
    """
    names = list(spec.axes)
    cells: dict[str, Cell] = {}
    held: dict[str, tuple[Held, ...]] = {}
    excluded: list[Excluded] = []
    used = [False] * len(spec.excludes)
    for combo in itertools.product(*(spec.axes[n] for n in names)):
        shown = dict(zip(names, combo, strict=True))
        own = {**spec.params, **shown}
        values = own if policy is None else {**policy.defaults_for(own), **own}
        hit = next((i for i, ex in enumerate(spec.excludes) if ex.matches(values)), None)
        if hit is not None:
            used[hit] = True
            ex = spec.excludes[hit]
            excluded.append(Excluded(shown, f"{ex.reason} ({spec.source}:{ex.line})"))
            continue
        try:
            if policy is None:
                cell = make_cell(**values)
            else:
                done = policy.complete(own)
                cell = done.cell
                held.setdefault(cell.id, done.held)
        except SpecError as exc:
            excluded.append(Excluded(shown, exc.message))
            continue
        cells.setdefault(cell.id, cell)
    for ex, hit in zip(spec.excludes, used, strict=True):
        if not hit:
            raise SpecError(f"{spec.source}:{ex.line}: exclude matches no combination: check its values")
    if not cells:
        first = excluded[0].reason if excluded else "no axis value"
        raise SpecError(f"{spec.source}: every combination is excluded, so nothing would run: {first}")
    if policy is not None:
        check_reach(policy, list(held.values()), spec.source)
    return Plan(
        spec=spec,
        cells=tuple(cells.values()),
        excluded=tuple(excluded),
        held=tuple((cell_id, h) for cell_id, items in held.items() for h in items),
    )
