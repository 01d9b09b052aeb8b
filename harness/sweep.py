"""Sweeps: a TOML spec that expands to cells x repeats, run with resume.

A spec names values per axis, single parameters, repeats and exclusions::

    name = "matrix"
    repeat = 3

    [axes]
    format = ["raw", "qcow2"]
    cache = ["none", "writeback"]

    [params]
    size = "2G"
    workload = "dd"

    [[exclude]]
    format = "raw"
    cache = "none"
    reason = "raw with O_DIRECT is measured by the gate already"

Every key is a keyword of :func:`harness.spec.make_cell`, so a new axis there
is a new axis here.  The spec is validated as a whole before anything runs,
and each error names the file, the line and the value (tomllib keeps no
positions for values, so :class:`_Locator` finds them in the text).  A
combination that every value allows on its own but that a format or QEMU
cannot do together (``aio=native`` with a cached mode, ``preallocation=metadata``
on raw) is *excluded with its reason*, listed before the run, never a crash.

Records are the checkpoint: each cell's record lives at
``RESULTS/sweeps/NAME/CELL_ID.json``; a rerun skips the samples a record of
the same fingerprint already holds and runs the rest, so a sweep killed at
any moment loses at most the sample in flight.  Samples are run in rounds
(every cell's first sample, then every cell's second...) so that a host
that speeds up or slows down over a long sweep shifts every cell alike.

Parsing, expansion, selection and estimates are pure; the disk-space check,
the record scan and the loop do I/O.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import shutil
import time
import tomllib
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from harness import proc
from harness.errors import ImageError, InfraError, SpecError
from harness.policy import Policy
from harness.records import load_record, read_input_text, write_json_atomic
from harness.spec import (
    PREALLOCATION,
    WRITTEN,
    CacheState,
    Cell,
    Format,
    Workload,
    make_cell,
    parse_size,
    split_list,
)

if typing.TYPE_CHECKING:
    from harness.progress import Progress
    from harness.session import Session

TOP_KEYS = ("name", "description", "repeat", "axes", "params", "exclude")
# the axis names: make_cell's keywords, so the two can never drift apart
AXES: tuple[str, ...] = tuple(p for p in typing.get_type_hints(make_cell) if p != "return")
SIZE_KEYS = ("size", "cluster_size")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PREALLOCATED = ("falloc", "full", "written")
MIB = 1024**2


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


def canonical(key: str, value: Any) -> Any:
    """One spelling per value, so ``"2G"`` matches ``"2g"`` and ``2147483648``."""
    if key in SIZE_KEYS and isinstance(value, str | int) and not isinstance(value, bool):
        try:
            return parse_size(value)
        except SpecError:
            return value
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, str):
        return value.strip().lower()
    return value


class _Locator:
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
    """The TOML types an axis takes, read from make_cell's hints (an Enum is spelled as a str)."""
    hint = typing.get_type_hints(make_cell)[key]
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
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        where = re.search(r"\s*\(at line (\d+), column \d+\)", msg)
        if where:
            raise SpecError(f"{source}:{where.group(1)}: {msg[: where.start()]}: not valid TOML") from None
        raise SpecError(f"{source}: {msg}: not valid TOML") from None
    loc = _Locator(text)

    def fail(line: int, message: str) -> SpecError:
        return SpecError(f"{source}:{line}: {message}")

    for key in data:
        if key not in TOP_KEYS and key not in extra_keys:
            hint = " (axes go under [axes] or [params])" if key in AXES else ""
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
    for table in ("axes", "params"):
        value = data.get(table, {})
        if not isinstance(value, dict):
            raise fail(loc.line_of("", table), f"{table} must be a table: write [{table}]")
        for key in value:
            if key not in AXES:
                raise fail(
                    loc.line_of(table, key), f"unknown axis {key!r} in [{table}]: use {', '.join(AXES)}"
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
    axes: dict[str, tuple[Any, ...]] = {}
    for key, values in axes_in.items():
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise fail(loc.line_of("axes", key), f"{key} = [] has no value: give at least one")
        for value in values:
            if isinstance(value, list | dict):
                raise fail(loc.line_of("axes", key), f"{key}: each value is a string, number or boolean")
        axes[key] = tuple(dict.fromkeys(values))
    for key, value in params.items():
        problem = _value_problem(key, value, params, axes)
        if problem:
            raise fail(loc.line_of("params", key, value), problem)
    for key, values in axes.items():
        for value in values:
            problem = _value_problem(key, value, params, axes)
            if problem:
                raise fail(loc.line_of("axes", key, value), problem)

    raw_excludes = data.get("exclude", [])
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
            if key not in AXES:
                raise fail(
                    loc.line_of("exclude", key, index=index),
                    f"unknown axis {key!r} in [[exclude]]: use reason and any of {', '.join(AXES)}",
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
    return SweepSpec(
        name=name,
        source=source,
        repeat=repeat,
        description=description,
        axes=axes,
        params=dict(params),
        excludes=tuple(excludes),
    )


def load_spec(path: Path) -> SweepSpec:
    """Read a spec file; the name defaults to the file's stem."""
    text = read_input_text(path, what="sweep spec", hint="pass a .toml file such as sweeps/default.toml")
    return parse_spec(text, source=str(path), default_name=path.stem)


def expand_spec(spec: SweepSpec, *, policy: Policy | None = None) -> Plan:
    """Every combination of the axes, in spec order; exclusions kept with their reasons.

    With ``policy``, what the spec leaves unset comes from the policy (see
    :mod:`harness.policy` for which of its values apply to which cells).
    """
    names = list(spec.axes)
    cells: dict[str, Cell] = {}
    excluded: list[Excluded] = []
    used = [False] * len(spec.excludes)
    for combo in itertools.product(*(spec.axes[n] for n in names)):
        shown = dict(zip(names, combo, strict=True))
        values = {**spec.params, **shown}
        if policy is not None:
            values = {**policy.defaults_for(values), **values}
        hit = next((i for i, ex in enumerate(spec.excludes) if ex.matches(values)), None)
        if hit is not None:
            used[hit] = True
            ex = spec.excludes[hit]
            excluded.append(Excluded(shown, f"{ex.reason} ({spec.source}:{ex.line})"))
            continue
        try:
            cell = make_cell(**values)
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
    return Plan(spec=spec, cells=tuple(cells.values()), excluded=tuple(excluded))


# -- choosing cells: --only and --shard ----------------------------------------


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``: the second of four shards (1-based, as CI matrices count)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise SpecError(f"--shard {text!r} is not K/N: use e.g. --shard 1/4")
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise SpecError(f"--shard {text!r} is not allowed: K runs from 1 to N, and N is 1 or more")
    return k, n


def shard_cells(cells: Sequence[Cell], k: int, n: int) -> list[Cell]:
    """Shard ``k`` of ``n``: round-robin over the sorted cell ids.

    Every cell lands in exactly one shard and shard sizes differ by at most
    one, whatever order the spec lists them in; the kept cells stay in run order.
    """
    ids = sorted(c.id for c in cells)
    mine = set(ids[k - 1 :: n])
    return [c for c in cells if c.id in mine]


def filter_only(cells: Sequence[Cell], patterns: str) -> list[Cell]:
    """Cells whose id matches any of the comma-separated fnmatch globs.

    A glob that matches no cell is an error: a typo would otherwise run
    less than was asked without a word.
    """
    globs = split_list(patterns)
    if not globs:
        raise SpecError("--only is empty: give one or more globs, e.g. --only 'qcow2-*'")
    for glob in globs:
        if not any(fnmatch.fnmatchcase(c.id, glob) for c in cells):
            example = cells[0].id if cells else "-"
            raise SpecError(f"--only {glob!r} matches no cell of this sweep: ids look like {example}")
    return [c for c in cells if any(fnmatch.fnmatchcase(c.id, g) for g in globs)]


def select(cells: Sequence[Cell], *, only: str | None = None, shard: str | None = None) -> list[Cell]:
    """``--only`` first, then ``--shard``: N runners given the same ``--only`` cover it once."""
    chosen = filter_only(cells, only) if only is not None else list(cells)
    if shard is not None:
        chosen = shard_cells(chosen, *parse_shard(shard))
    return chosen


# -- estimates: time and disk -------------------------------------------------

# Rough seconds per sample under TCG on two cores (boot included), used only
# until this sweep has measured its own samples.
_TCG_SAMPLE_S = {"install-small": 45.0, "install-full": 120.0}
_KVM_SPEEDUP = 4.0
# What an install writes, roughly twice the payload image measured today.
_INSTALL_WRITE_BYTES = {"small": 160 * MIB, "full": 320 * MIB}


def estimate_create_s(cell: Cell) -> float:
    """A prior for creating the image, on the host (the same under KVM and TCG).

    Preallocated qcow2 metadata costs per cluster (measured: about 100 s for
    1 GiB of 512-byte clusters on two cores), full preallocation and the raw
    ``written`` image write every byte, LUKS derives its key for about 2 s.
    """
    image = cell.image
    secs = 0.0
    if image.format is Format.QCOW2 and image.preallocation != "off":
        secs += image.size / (image.cluster_size or 65536) * 45e-6
    if image.preallocation in ("full", WRITTEN):
        secs += image.size / 1024**3
    if image.encrypted:
        secs += 2.5
    return secs


def estimate_sample_s(cell: Cell, *, accel: str = "tcg") -> float:
    """A prior for one sample's wall time, before any sample was measured."""
    wl = cell.workload
    if wl.name is Workload.INSTALL:
        secs = _TCG_SAMPLE_S[f"install-{wl.payload}"]
    elif wl.name is Workload.DD:
        secs = 10.0 + wl.dd_mib * 0.1
    elif wl.name is Workload.BONNIE:
        # the file tests (-n, in 1024s) run at about 100 files/s under TCG
        secs = 30.0 + wl.bonnie_size_mib * 0.12 + wl.bonnie_files * 20.0
    else:
        # mkfs with every inode table written: about 1 s per GiB under TCG (5 GiB: 4-8 s)
        secs = 15.0 + cell.image.size / 1024**3 * 1.5
    if cell.cache_state is not CacheState.FRESH:
        secs *= 2  # the unmeasured first run on the same image
    return (secs / _KVM_SPEEDUP if accel == "kvm" else secs) + estimate_create_s(cell)


def workload_write_bytes(cell: Cell) -> int:
    """Bytes the guest writes to the disk at most: its data plus the filesystem's own."""
    wl = cell.workload
    fs_overhead = min(cell.image.size // 16, 256 * MIB)
    if wl.name is Workload.INSTALL:
        data = _INSTALL_WRITE_BYTES[wl.payload]
    elif wl.name is Workload.DD:
        data = wl.dd_mib * MIB
    elif wl.name is Workload.BONNIE:
        data = wl.bonnie_size_mib * MIB + wl.bonnie_files * 1024 * 1024
    else:
        data = 0
    return data + fs_overhead


@dataclass(frozen=True)
class Measure:
    """``qemu-img measure`` of a cell's image."""

    required: int
    fully_allocated: int


def image_need_bytes(cell: Cell, measure: Measure) -> int:
    """Host bytes an image of ``cell`` can take by the end of a sample.

    Preallocated images take their full size at once.  Sparse ones take what
    qemu-img measure says (qcow2 metadata) plus what the workload writes, never
    more than fully allocated.  For raw, measure reports the virtual size as
    "required"; a sparse raw file only holds what is written.
    """
    if cell.image.preallocation in PREALLOCATED:
        return measure.fully_allocated
    base = measure.required if cell.image.format is Format.QCOW2 else 0
    return min(base + workload_write_bytes(cell), measure.fully_allocated)


def measure_image(cell: Cell, *, qemu_img: str | None = None) -> Measure:
    """``qemu-img measure`` for the image ``cell`` would create."""
    from harness.images import qemu_img_binary
    from harness.spec import secret_object

    argv = [
        qemu_img or qemu_img_binary(),
        "measure",
        *(["--object", secret_object()] if cell.image.encrypted else []),
        "--output=json",
        "-O",
        cell.image.format.value,
        "-o",
        ",".join(cell.image.create_options()),
        "--size",
        str(cell.image.size),
    ]
    result = proc.run(argv, timeout_s=60, error_cls=ImageError)
    try:
        data = json.loads(result.stdout)
        return Measure(required=int(data["required"]), fully_allocated=int(data["fully-allocated"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ImageError(f"qemu-img measure printed no figures: {result.stdout[:200]!r}", argv=argv) from exc


def free_bytes(path: Path) -> int:
    """Free bytes for an unprivileged writer where ``path`` is (or would be created)."""
    probe = path.resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def largest_image(
    cells: Iterable[Cell], measure: Callable[[Cell], Measure] = measure_image
) -> tuple[Cell, int]:
    """The cell whose image can take the most host space, and that figure."""
    cache: dict[tuple[str, ...], Measure] = {}
    best: tuple[Cell, int] | None = None
    for cell in cells:
        key = (cell.image.format.value, *cell.image.create_options(), str(cell.image.size))
        if key not in cache:
            cache[key] = measure(cell)
        need = image_need_bytes(cell, cache[key])
        if best is None or need > best[1]:
            best = (cell, need)
    if best is None:
        raise SpecError("no cell selected: nothing to measure")
    return best


def check_free_space(work_dir: Path, cells: Sequence[Cell]) -> str:
    """Refuse to start when the work dir cannot hold the largest image; say the figures.

    One sample's image exists at a time (each is removed after its sample),
    so the largest one is what must fit.
    """
    cell, need = largest_image(cells)
    free = free_bytes(work_dir)
    what = f"the largest image ({cell.id}) needs up to {_gib(need)}"
    if free < need:
        raise InfraError(
            f"work dir {work_dir} has {_gib(free)} free, {what}: "
            "free some space or pass --work-dir on a larger disk"
        )
    return f"disk: {what}; work dir has {_gib(free)} free"


def _gib(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB"


def drop_unsupported(cells: Sequence[Cell], work_dir: Path) -> tuple[list[Cell], list[tuple[str, str]]]:
    """Leave out cells this QEMU cannot open here (io_uring, native aio), with the reason.

    Probed once per aio/cache pair without a guest, so a host whose QEMU
    lacks io_uring excludes those cells instead of failing each sample.
    """
    from harness.capabilities import unsupported_reason

    kept: list[Cell] = []
    dropped: list[tuple[str, str]] = []
    for cell in cells:
        reason = unsupported_reason(cell, work_dir)
        if reason:
            dropped.append((cell.id, reason))
        else:
            kept.append(cell)
    return kept, dropped


# -- records: the checkpoint ------------------------------------------------------


def sweep_dir(results_dir: Path, name: str) -> Path:
    return results_dir / "sweeps" / name


def scan_records(directory: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The records in a sweep dir by cell id.  A record that cannot be read stops the sweep.

    Records are written atomically, so an unreadable one was damaged by
    something else: the message says which file, and to delete it.
    """
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*.json")):
        record = load_record(path)
        found[str(record["cell"].get("id", path.stem))] = (path, record)
    return found


def set_aside(
    directory: Path, fingerprint: str, fingerprint_of: Callable[[dict[str, Any]], str]
) -> list[Path]:
    """Move records of another machine or subject (and their logs) out of the way.

    They go to ``DIR/previous/FINGERPRINT/`` with their log paths rewritten:
    kept for reading, never resumed from or mixed into this sweep's table.
    Returns where they went.
    """
    moved: list[Path] = []
    for cell_id, (path, record) in scan_records(directory).items():
        theirs = fingerprint_of(record)
        if theirs == fingerprint:
            continue
        dest_dir = directory / "previous" / theirs
        old_logs = directory / "logs" / cell_id
        new_logs = dest_dir / "logs" / cell_id
        if old_logs.exists():
            new_logs.parent.mkdir(parents=True, exist_ok=True)
            if new_logs.exists():
                shutil.rmtree(new_logs)
            shutil.move(old_logs, new_logs)
            _rewrite_log_paths(record, old_logs, new_logs)
        dest = dest_dir / path.name
        write_json_atomic(dest, record)
        path.unlink()
        moved.append(dest)
    return moved


def _rewrite_log_paths(record: dict[str, Any], old: Path, new: Path) -> None:
    prefix = str(old)
    for sample in record.get("samples", []):
        logs = sample.get("logs", {})
        for key, value in logs.items():
            if isinstance(value, str) and value.startswith(prefix):
                logs[key] = str(new) + value[len(prefix) :]


def clean_stale_temp_files(directory: Path) -> None:
    """Drop the temp files of a write that a kill interrupted (the record itself is intact)."""
    if directory.is_dir():
        for tmp in directory.glob(".*.json.*.tmp"):
            tmp.unlink(missing_ok=True)


# -- the loop ---------------------------------------------------------------------


@dataclass(frozen=True)
class SweepResult:
    directory: Path
    records: list[dict[str, Any]]
    skipped_samples: int
    ran_samples: int
    set_aside: list[Path]

    @property
    def total_samples(self) -> int:
        return sum(len(r["samples"]) for r in self.records)

    @property
    def failed_samples(self) -> int:
        return sum(1 for r in self.records for s in r["samples"] if s.get("status") != "ok")

    @property
    def failed_cells(self) -> list[str]:
        return [r["cell"]["id"] for r in self.records if any(s.get("status") != "ok" for s in r["samples"])]


def run_sweep(
    name: str,
    cells: Sequence[Cell],
    session: Session,
    *,
    results_dir: Path,
    repeat: int,
    progress: Progress,
) -> SweepResult:
    """Run every cell to ``repeat`` samples, resuming from the records already there.

    Records of this session's fingerprint are resumed (``existing=``);
    others are set aside first (see :func:`set_aside`).  A failed sample is
    a record entry like any other: the sweep goes on.
    """
    from harness.session import record_fingerprint

    directory = sweep_dir(results_dir, name)
    clean_stale_temp_files(directory)
    moved = set_aside(directory, session.fingerprint, record_fingerprint)
    for dest in moved:
        progress.note(f"set aside a record of another machine or subject: {dest}")
    found = scan_records(directory)
    records: dict[str, dict[str, Any]] = {}
    done = 0
    for cell in cells:
        if cell.id in found:
            _path, record = found[cell.id]
            records[cell.id] = record
            done += min(len(record["samples"]), repeat)
    total = len(cells) * repeat
    progress.plan(
        [
            (cell.workload.slug, estimate_sample_s(cell, accel=session.opts.accel))
            for round_number in range(1, repeat + 1)
            for cell in cells
            if len(records.get(cell.id, {}).get("samples", [])) < round_number
        ]
    )
    if done:
        progress.note(f"resuming: {done} of {total} samples are recorded already and are skipped")
    progress.start(total=total, done=done)
    ran = 0
    for round_number in range(1, repeat + 1):
        # one more sample for each cell per round: see the module docstring
        round_session = replace(session, opts=replace(session.opts, repeat=round_number))
        for number, cell in enumerate(cells, start=1):
            existing = records.get(cell.id)
            if existing is not None and len(existing["samples"]) >= round_number:
                continue
            path = directory / f"{cell.id}.json"
            label = (
                f"[round {round_number}/{repeat}, cell {number}/{len(cells)}] "
                if repeat > 1
                else f"[{number}/{len(cells)}] "
            )
            progress.begin(cell.id)
            t0 = time.monotonic()
            try:
                _, record = round_session.run_cell(
                    cell,
                    path=path,
                    existing=existing,
                    log_root=directory / "logs" / cell.id,
                    progress=progress.note,
                    label=label,
                    of=repeat,
                )
            except OSError as exc:
                raise InfraError(f"cannot write the record {path}: {exc.strerror or exc}") from exc
            records[cell.id] = record
            ran += 1
            ok = record["samples"][-1].get("status") == "ok"
            progress.end(cell.id, time.monotonic() - t0, ok=ok, kind=cell.workload.slug)
    progress.finish()
    return SweepResult(
        directory=directory,
        records=[records[c.id] for c in cells if c.id in records],
        skipped_samples=done,
        ran_samples=ran,
        set_aside=moved,
    )


# -- what is shown before a run ----------------------------------------------------


def describe_plan(
    plan: Plan,
    cells: Sequence[Cell],
    *,
    repeat: int,
    only: str | None = None,
    shard: str | None = None,
    recorded: Mapping[str, int] | None = None,
    accel: str = "tcg",
) -> str:
    """The cells that will run, the exclusions with their reasons, and a time estimate."""
    spec = plan.spec
    lines = [
        f"sweep {spec.name} ({spec.source}): {_plural(len(plan.cells), 'cell')} x {_plural(repeat, 'repeat')}"
    ]
    if spec.description:
        lines.append(f"  {spec.description}")
    chosen = []
    if only is not None:
        chosen.append(f"--only {only}")
    if shard is not None:
        chosen.append(f"--shard {shard}")
    if chosen:
        lines.append(f"selected {len(cells)} of {len(plan.cells)} cells by {' '.join(chosen)}")
    recorded = recorded or {}
    todo = 0
    seconds = 0.0
    for cell in cells:
        have = min(recorded.get(cell.id, 0), repeat)
        todo += repeat - have
        seconds += (repeat - have) * estimate_sample_s(cell, accel=accel)
        state = f"  ({have}/{repeat} recorded)" if have else ""
        lines.append(f"  run   {cell.id}{state}")
    by_reason: dict[str, list[Excluded]] = {}
    for ex in plan.excluded:
        by_reason.setdefault(ex.reason, []).append(ex)
    for reason, items in by_reason.items():
        lines.append(f"  excluded {_common_label(items)}: {reason}")
    lines.append(
        f"estimate: {_plural(todo, 'sample')}, about {format_duration(seconds)} under {accel.upper()} "
        "(a rough prior; the progress line refines it from measured samples)"
    )
    return "\n".join(lines) + "\n"


def _common_label(items: Sequence[Excluded]) -> str:
    """What the excluded combinations of one reason share: ``format=raw preallocation=off (8 cells)``."""
    first = items[0].values
    common = {k: v for k, v in first.items() if all(ex.values.get(k) == v for ex in items)}
    label = " ".join(f"{k}={v}" for k, v in common.items()) or "combinations"
    return label if len(items) == 1 else f"{label} ({len(items)} cells)"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
