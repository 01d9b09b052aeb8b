"""The gate spec (``harness/data/gate.toml`` by default): named cells, rounds, budget, metrics and rules.

Cells are named so that base and head can be paired by name: each side
completes a cell from its own policy (see :meth:`GateCell.resolve`).
Parsing and validation are pure; errors name the file and the cell.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, NamedTuple

from harness.compare import Settings, parse_percent, parse_rule
from harness.compare.settings import crossed_reads_ok
from harness.errors import SpecError, UsageError
from harness.files import read_input_text
from harness.paths import package_data
from harness.sample.pairing import Mode
from harness.spec import Cell, axis_names, make_cell
from harness.subject.policy import Completed, Policy
from harness.sweep.specfile import Locator
from harness.untrusted import toml_loads
from harness.workloads import metric_info

GATE_SPEC = package_data("gate.toml")
SPEC_KEYS_TABLES = ("params", "cells", "information")
# what a cell of the spec may say beside its axes: its own gated metrics, whether its pair runs together
CELL_GATE_KEYS = ("metrics", "together")


@dataclass(frozen=True)
class GateCell:
    """A named cell of the gate spec: the values it sets; the rest comes from a policy."""

    name: str
    values: Mapping[str, Any]
    #: the cell's gated metrics, where not the spec's ``metrics`` (empty: the spec's)
    metrics: tuple[str, ...] = ()
    #: whether base's and head's sample of a round run together; None: as the spec says
    together: bool | None = None

    @property
    def replayed(self) -> bool:
        return str(self.values.get("measure", "guest")) == "replay"

    def resolve(self, policy: Policy) -> Cell:
        return self.complete(policy).cell

    def complete(self, policy: Policy) -> Completed:
        """The cell under ``policy``, with the policy's values it cannot take (see
        :meth:`harness.subject.policy.Policy.complete`)."""
        return policy.complete(self.values)


@dataclass(frozen=True)
class GateSpec:
    """A gate spec as parsed: its cells, rounds and budget, and how it decides, whose defaults are
    :class:`~harness.compare.settings.Settings`'; every field but ``source`` and ``cells`` is a
    key of the file (:data:`SPEC_KEYS`, :data:`SPEC_KEYS_TABLES`)."""

    name: str
    source: str
    cells: tuple[GateCell, ...]
    description: str = ""
    rounds: int = 4
    max_rounds: int = 10
    budget_min: float = 60.0
    metrics: tuple[str, ...] = Settings.metrics
    min_effect: float = Settings.min_effect
    rules: Mapping[str, float] = field(default_factory=dict)
    counters: tuple[str, ...] = Settings.counters
    changed_fails: bool = Settings.changed_fails
    #: a replay cell's samples per round and side (cheap: many more rounds in the same time)
    replay_samples: int = 1
    #: passes of the stream in one replay sample (each a fresh image and qemu-io)
    replay_passes: int = 1
    #: a replay cell's pair of samples (base's and head's) runs at the same moment, pass by pass
    replay_together: bool = False
    #: how a replay pair taken together shares the host: each qemu-io on a CPU of its own, the two
    #: swapped (crossed), or both on one CPU (shared; where the host has one CPU, crossed is shared)
    replay_pairing: Mode = Mode.SHARED
    #: a guest cell's pair of samples runs at the same moment on one CPU (a cell's ``together`` wins)
    guest_together: bool = False
    #: how a guest pair taken together shares the host: each side on a CPU of its own, the two
    #: swapped (crossed), or both on one CPU (shared; where the host has one CPU, crossed is shared)
    guest_pairing: Mode = Mode.CROSSED
    #: a guest cell's pairs per round where they run together (cheap beside a round: more pairs)
    guest_samples: int = 1
    #: metric -> why it is shown but not gated
    information: Mapping[str, str] = field(default_factory=dict)
    #: what a crossed guest pair reads of a change's size alone on logs, at least and at most, as
    #: calibrated on the runner (benchmarks/calibrate_guest_pairs.py): Settings.crossed_reads
    crossed_reads: tuple[float, float] = Settings.crossed_reads
    #: the most crossed guest pairs that run at the same moment, each on two CPUs of its own
    #: (harness.sample.pairing.crossed_slots); None ("auto"): as many as the runner's CPUs give
    guest_pairs_at_once: int | None = None
    #: the host disk model the spec is sized for (``gate-MODEL.toml``): the gate runs on it unless
    #: ``--host-disk`` names the same; None: the native disk
    host_disk: str | None = None

    @property
    def guest_pairs(self) -> list[str]:
        """The names of the guest cells whose pair of samples runs together."""
        return [
            c.name
            for c in self.cells
            if not c.replayed and (self.guest_together if c.together is None else c.together)
        ]

    @property
    def cell_metrics(self) -> dict[str, tuple[str, ...]]:
        """The gated metrics of the cells that name their own, by name."""
        return {c.name: c.metrics for c in self.cells if c.metrics}

    @property
    def replay_cells(self) -> list[str]:
        """The names of the cells measured by replay."""
        return [c.name for c in self.cells if c.replayed]


#: the keys a gate spec's file may have at its top, and those that are tables
SPEC_KEYS = tuple(f.name for f in fields(GateSpec) if f.name not in ("source", "cells", *SPEC_KEYS_TABLES))


def parse_gate_spec(text: str, *, source: str = "<gate spec>") -> GateSpec:
    """Parse and validate a gate spec; errors name the file and the cell."""
    try:
        data = toml_loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: not valid TOML ({exc}): fix the syntax") from None
    loc = Locator(text)
    for key in data:
        _known_key(key, SPEC_KEYS + SPEC_KEYS_TABLES, f"{source}:{loc.line_of('', key)}")
    cells = _gate_cells(data, source, loc)

    def integer(key: str, default: int) -> int:
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpecError(f"{source}: {key} = {value!r}: use a whole number of 1 or more")
        return value

    rounds = integer("rounds", GateSpec.rounds)
    max_rounds = integer("max_rounds", max(rounds, GateSpec.max_rounds))
    if max_rounds < rounds:
        raise SpecError(f"{source}: max_rounds {max_rounds} is below rounds {rounds}: raise max_rounds")
    budget = data.get("budget_min", GateSpec.budget_min)
    if not isinstance(budget, int | float) or isinstance(budget, bool) or budget <= 0:
        raise SpecError(f"{source}: budget_min = {budget!r}: use a positive number of minutes")
    decision = _decision(data, source)
    together = _flag(data.get("replay_together", False), f"{source}: replay_together")
    return GateSpec(
        name=str(data.get("name", "gate")),
        source=source,
        cells=cells,
        rounds=rounds,
        max_rounds=max_rounds,
        budget_min=float(budget),
        description=str(data.get("description", "")),
        **decision._asdict(),
        replay_samples=integer("replay_samples", 1),
        replay_passes=integer("replay_passes", 1),
        replay_together=bool(together),
        replay_pairing=_pairing(
            data.get("replay_pairing", GateSpec.replay_pairing.value), f"{source}: replay_pairing"
        ),
        guest_together=bool(_flag(data.get("guest_together", False), f"{source}: guest_together")),
        guest_pairing=_pairing(
            data.get("guest_pairing", GateSpec.guest_pairing.value), f"{source}: guest_pairing"
        ),
        guest_samples=integer("guest_samples", 1),
        guest_pairs_at_once=_at_once(
            data.get("guest_pairs_at_once", "auto"), f"{source}: guest_pairs_at_once"
        ),
        crossed_reads=_reads(
            data.get("crossed_reads", list(Settings.crossed_reads)), f"{source}: crossed_reads"
        ),
        host_disk=_host_disk(data.get("host_disk"), f"{source}:{loc.line_of('', 'host_disk')}: host_disk"),
    )


def _gate_cells(data: Mapping[str, object], source: str, loc: Locator) -> tuple[GateCell, ...]:
    """The spec's ``[[cells]]``, each completed by ``[params]``: named apart, every key known,
    every cell a valid one; errors name the file, the line and the cell."""
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise SpecError(f"{source}:{loc.line_of('params')}: params must be a table ([params])")
    for key in params:
        _known_key(key, axis_names(), f"{source}:{loc.line_of('params', key)}: params")
    entries = data.get("cells")
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{source}: no [[cells]]: name at least one cell")
    cells: list[GateCell] = []
    for number, entry in enumerate(entries, start=1):
        values = dict(entry)
        name = str(values.pop("name", "") or f"cell{number}")
        for key in values:
            at = f"{source}:{loc.line_of('cells', key, index=number - 1)}: cells[{number}] ({name})"
            _known_key(key, (*CELL_GATE_KEYS, *axis_names()), at)
        if any(c.name == name for c in cells):
            raise SpecError(f"{source}: cells[{number}]: the name {name!r} is used twice: name cells apart")
        own = {key: values.pop(key) for key in CELL_GATE_KEYS if key in values}
        cell = GateCell(
            name=name,
            values={**params, **values},
            metrics=_metric_list(own.get("metrics", []), f"{source}: cells[{number}] ({name}): metrics"),
            together=_flag(own.get("together"), f"{source}: cells[{number}] ({name}): together"),
        )
        try:
            make_cell(**cell.values)
        except SpecError as exc:
            raise SpecError(f"{source}: cells[{number}] ({name}): {exc.message}") from None
        except TypeError as exc:
            raise SpecError(f"{source}: cells[{number}] ({name}): unknown key: {exc}") from None
        cells.append(cell)
    return tuple(cells)


class _Decision(NamedTuple):
    """How a gate spec decides, as GateSpec's fields of the same names."""

    metrics: tuple[str, ...]
    min_effect: float
    rules: dict[str, float]
    counters: tuple[str, ...]
    changed_fails: bool
    information: dict[str, str]


def _decision(data: Mapping[str, object], source: str) -> _Decision:
    """How the spec ``data`` (its TOML document) decides: ``metrics``, ``information``, ``rules``,
    ``min_effect``, ``counters`` and ``changed_fails``, each checked (Settings' where absent)."""
    metrics = _metric_list(data.get("metrics", list(Settings.metrics)), f"{source}: metrics")
    if not metrics:
        raise SpecError(f'{source}: metrics must be a list of metric names such as ["total_s"]')
    information = data.get("information", {})
    if not isinstance(information, dict) or not all(isinstance(v, str) for v in information.values()):
        raise SpecError(f'{source}: information must be a table of metric = "why it is not gated"')
    for name in information:
        _metric_list([name], f"{source}: [information]")
    rules: dict[str, float] = {}
    raw_rules = data.get("rules", {})
    if not isinstance(raw_rules, dict):
        raise SpecError(f'{source}: rules must be a table of metric = "percent"')
    for metric, pct in raw_rules.items():
        try:
            name, effect = parse_rule(f"{metric}:{pct}", what=f"{source}: [rules]")
        except UsageError as exc:
            raise SpecError(exc.message) from None
        rules[name] = effect
    try:
        min_effect = (
            parse_percent(str(data["min_effect"]), what=f"{source}: min_effect")
            if "min_effect" in data
            else Settings.min_effect
        )
    except UsageError as exc:
        raise SpecError(exc.message) from None
    counters = _metric_list(
        data.get("counters", list(Settings.counters)), f"{source}: counters", "host.flushes"
    )
    changed_fails = data.get("changed_fails", Settings.changed_fails)
    if not isinstance(changed_fails, bool):
        raise SpecError(f"{source}: changed_fails = {changed_fails!r}: use true or false")
    return _Decision(tuple(metrics), min_effect, rules, tuple(counters), changed_fails, dict(information))


def _host_disk(value: Any, what: str) -> str | None:
    from harness.host.hostdisk import NATIVE, HostDiskError, profile

    if value is None:
        return None
    try:
        profile(value if isinstance(value, str) else repr(value), what=what)
    except HostDiskError as exc:
        raise SpecError(exc.message) from None
    return None if value == NATIVE else str(value)


def spec_for_disk(path: Path, host_disk: str) -> Path:
    """The gate spec to run: ``path``, or where it is the default spec and ``host_disk`` a model
    with a spec of its own in package data (``gate-MODEL.toml``), that one."""
    if path != GATE_SPEC or host_disk == "native":
        return path
    own = package_data(f"gate-{host_disk}.toml")
    return own if own.is_file() else path


def disk_for_spec(spec: GateSpec, host_disk: str) -> str:
    """The disk a gate of ``spec`` runs on: ``--host-disk`` (``host_disk``), else the spec's; a
    SpecError where the two name different models."""
    if spec.host_disk is None or host_disk == spec.host_disk:
        return host_disk
    if host_disk != "native":
        raise SpecError(
            f"--host-disk {host_disk}: the gate spec {spec.source} is sized for host_disk {spec.host_disk}: "
            f"drop --host-disk, or give a spec for {host_disk} (--spec)"
        )
    return spec.host_disk


def _at_once(value: Any, what: str) -> int | None:
    """``"auto"`` (None: as many as the CPUs give) or a number of pairs from 1."""
    if value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f'{what} = {value!r}: use "auto" or a number of pairs from 1')
    return value


def _reads(value: Any, what: str) -> tuple[float, float]:
    """``[low, high]``: what a crossed pair reads of a change's size alone, at least and at most."""
    fix = "use [low, high] with low from 0.1 to 1 and high from 1 to 10, e.g. [0.35, 1.5]"
    numbers = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )
    if not numbers or not crossed_reads_ok(value[0], value[1]):
        raise SpecError(f"{what} = {value!r}: {fix}")
    return float(value[0]), float(value[1])


def _pairing(value: Any, what: str) -> Mode:
    modes = {m.value: m for m in Mode}
    if not isinstance(value, str) or value not in modes:
        raise SpecError(f"{what} = {value!r}: use {' or '.join(repr(m) for m in modes)}")
    return modes[value]


def _flag(value: Any, what: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise SpecError(f"{what} = {value!r}: use true or false")
    return value


def _metric_list(value: Any, what: str, example: str = "total_s") -> tuple[str, ...]:
    """A list of known metric names; a SpecError naming ``what`` and the fix (a list such as
    ``[example]``) otherwise."""
    if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
        raise SpecError(f'{what} must be a list of metric names such as ["{example}"]')
    for name in value:
        try:
            metric_info(name)
        except UsageError as exc:
            raise SpecError(f"{what}: {exc.message}") from None
    return tuple(value)


def _known_key(key: str, known: tuple[str, ...], where: str) -> None:
    """Bad input naming ``where`` (``FILE:LINE``), the nearest keys and every key there is."""
    if key in known:
        return
    import difflib

    close = difflib.get_close_matches(key, known, n=2, cutoff=0.6)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise SpecError(f"{where}: unknown key {key!r}{hint}: use one of {', '.join(known)}")


def load_gate_spec(path: Path) -> GateSpec:
    text = read_input_text(path, what="gate spec", hint=f"pass a file such as {GATE_SPEC}")
    return parse_gate_spec(text, source=str(path))


def settings_for(
    spec: GateSpec, given: Settings, *, metrics_given: bool = False, min_effect_given: bool = False
) -> Settings:
    """The spec's metrics and minimum effects, unless the command line gave its own."""
    return replace(
        given,
        metrics=given.metrics if metrics_given else spec.metrics,
        min_effect=given.min_effect if min_effect_given else spec.min_effect,
        min_effect_by_metric={**spec.rules, **dict(given.min_effect_by_metric)},
        # a metric given on the command line is gated in every cell
        cell_metrics={} if metrics_given else spec.cell_metrics,
        information=spec.information,
        counters=spec.counters,
        changed_fails=spec.changed_fails and given.changed_fails,
        crossed_reads=spec.crossed_reads,
    )
