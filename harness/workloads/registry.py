"""The workloads the harness knows: the built-in ones and any registered beside them.  Pure.

Each workload is one module that declares ``WORKLOAD``, a
:class:`~harness.workloads.params.WorkloadKind`.  Everything that loops over
workloads or their parameters (cells and their records, sweep spec keys, the
``diskbench run`` flags, presets, planning, output parsers) asks here, so a
new workload is one new module and a :func:`register` call.

The order is the registration order (built-ins first); :func:`params` is the
union of every workload's parameters in that order, each once: the keys of a
record's ``workload`` dict after ``name``.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any, ClassVar

from harness.errors import SpecError
from harness.workloads.metrics import COMMON_METRICS, Metric
from harness.workloads.params import Param, Values, WorkloadKind

BUILT_IN = ("install", "dd", "bonnie", "mkfs", "fio")

_kinds: dict[str, WorkloadKind] = {}
# the built-ins are loaded on first use, which may be in two threads at once (a gate's two sides)
_loading = threading.RLock()
_ready = False


def _loaded() -> dict[str, WorkloadKind]:
    global _ready
    if not _ready:
        with _loading:
            if not _ready:
                for name in BUILT_IN:
                    _add(importlib.import_module(f"harness.workloads.{name}"))
                _ready = True
    return _kinds


def _add(module: ModuleType) -> WorkloadKind:
    kind = getattr(module, "WORKLOAD", None)
    if not isinstance(kind, WorkloadKind):
        raise TypeError(f"workload module {module.__name__} declares no WORKLOAD = WorkloadKind(...)")
    if kind.name in _kinds:
        raise ValueError(f"workload {kind.name!r} is registered already")
    declared = {p.name: p for k in _kinds.values() for p in k.params}
    for param in kind.params:
        if declared.get(param.name, param) is not param:
            raise ValueError(f"parameter {param.name!r} of {kind.name} is declared twice: share one Param")
    if not set(kind.told) <= set(kind.params):
        raise ValueError(f"workload {kind.name} tells the guest a parameter it does not list in params")
    if not kind.words or not kind.headlines:
        raise ValueError(
            f"workload {kind.name} declares no words or no headlines: the reports need both "
            "(WorkloadKind(words=..., headlines=...))"
        )
    _kinds[kind.name] = kind
    metric_table.cache_clear()
    return kind


def register(module: ModuleType) -> WorkloadKind:
    """Add the workload a module declares (its ``WORKLOAD``), after the built-in ones."""
    _loaded()
    with _loading:
        return _add(module)


def unregister(name: str) -> None:
    """Remove a registered workload (a built-in one cannot be removed)."""
    if name in BUILT_IN:
        raise ValueError(f"workload {name!r} is built in")
    _loaded().pop(name, None)
    metric_table.cache_clear()


def kinds() -> tuple[WorkloadKind, ...]:
    return tuple(_loaded().values())


def names() -> tuple[str, ...]:
    return tuple(_loaded())


def kind(name: str) -> WorkloadKind:
    """The workload called ``name``; KeyError if none is."""
    return _loaded()[name]


@functools.cache
def metric_table() -> dict[str, Metric]:
    """Every metric with a fixed name: the common ones and each workload's own (its ``metrics``)."""
    metrics = {m.name: m for m in COMMON_METRICS}
    for k in kinds():
        for metric in k.metrics:
            if metric.name in metrics and metrics[metric.name] != metric:
                raise AssertionError(f"metric {metric.name} is defined twice, differently")
            metrics[metric.name] = metric
    return metrics


def params() -> dict[str, Param]:
    """Every workload's parameters by name, each once, in registration order."""
    found: dict[str, Param] = {}
    for k in kinds():
        for param in k.params:
            found.setdefault(param.name, param)
    return found


def users(param: Param) -> tuple[str, ...]:
    """The workloads that take ``param``."""
    return tuple(k.name for k in kinds() if param in k.params)


def defaults() -> dict[str, Any]:
    return {name: p.default for name, p in params().items()}


def checked_values(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter's value (``given`` or its default), checked; a cell holds them all.

    Each parameter's own check and each workload's cross check run whatever
    the cell's workload is; an unknown name is a programming error (TypeError).
    """
    known = params()
    for key in given:
        if key not in known:
            raise TypeError(f"make_cell() got an unexpected keyword argument {key!r}")
    values = {name: given.get(name, p.default) for name, p in known.items()}
    done: set[str] = set()
    for k in kinds():
        for param in k.params:
            if param.name not in done:
                values[param.name] = param.check(values[param.name])
                done.add(param.name)
        if k.check is not None:
            k.check(values)
    return values


class Workload(str):
    """A registered workload's name: ``Workload("dd")``, ValueError for a name none has.

    It is its string (compares, hashes and prints as it), one object per name
    (``is`` works), with ``.value`` as an Enum member has.  The built-in names
    are class constants.
    """

    __slots__ = ()
    _interned: ClassVar[dict[str, Workload]] = {}
    INSTALL: ClassVar[Workload]
    DD: ClassVar[Workload]
    BONNIE: ClassVar[Workload]
    MKFS: ClassVar[Workload]
    FIO: ClassVar[Workload]

    def __new__(cls, name: str) -> Workload:
        if name not in _loaded():
            raise ValueError(f"{name!r} is not a registered workload")
        return cls._intern(name)

    @classmethod
    def _intern(cls, name: str) -> Workload:
        return cls._interned.setdefault(name, str.__new__(cls, name))

    @property
    def value(self) -> str:
        return str.__str__(self)

    @property
    def kind(self) -> WorkloadKind:
        return kind(self)


Workload.INSTALL, Workload.DD, Workload.BONNIE, Workload.MKFS, Workload.FIO = (
    Workload._intern(n) for n in BUILT_IN
)


def parse_workload(value: str | Workload) -> Workload:
    """A user's spelling of a workload (``" DD "`` too), or :class:`SpecError` listing the known ones."""
    name = str(value).strip().lower()
    if name not in _loaded():
        raise SpecError(f"unknown workload {value!r}: use one of {', '.join(names())}")
    return Workload(name)


__all__ = [
    "BUILT_IN",
    "Values",
    "Workload",
    "checked_values",
    "defaults",
    "kind",
    "kinds",
    "metric_table",
    "names",
    "params",
    "parse_workload",
    "register",
    "unregister",
    "users",
]
