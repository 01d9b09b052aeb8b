"""Typed parts of a JSON document that read and write it key for key.  Pure: no I/O.

A :class:`JsonPart` is a frozen dataclass whose fields are the keys of one JSON object; the
field's type says how its value is read (:meth:`JsonPart.from_json`) and written
(:meth:`JsonPart.to_json`), declared once:

* ``str``, ``int``, ``float``, ``bool``: a JSON value of that kind (an ``int`` is a ``float``,
  and stays as written: ``12`` is not rewritten as ``12.0``); ``X | None`` also takes null;
* an :class:`~enum.Enum` (``Verdict``, ``Kind``): its value, refused when it is none of them;
* ``tuple[T, ...]``: a JSON list of T;
* ``Mapping[str, T]``: a JSON object of T (``Any``: kept as written);
* another :class:`JsonPart`, or a record's part (:class:`harness.record.model.CellInfo`...):
  an object.

Reading keeps the keys the object had, and their order (``keys``), and the keys no field names
(``extra``): writing gives back the very same object.  A value made in code (``keys`` None) is
written in the order of its fields, those of :attr:`JsonPart.WHEN_SET` only when they are not
None.  A field set on a read value that the object lacked is written after its keys.

A value of the wrong kind is a :class:`PartError` naming the field (``cells[2].verdict``).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

# a JSON object as a document holds it
JsonObject = Mapping[str, Any]

_OWN = ("extra", "keys")


class PartError(ValueError):
    """A document's value that its part cannot read: ``where`` names the field, ``problem`` says why."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"field {where or '(top level)'} {problem}")
        self.where = where
        self.problem = problem


@dataclass(frozen=True)
class JsonPart:
    """One JSON object of a document as a typed value (see the module's doc)."""

    # keys no field names, as they were read
    extra: JsonObject = field(default_factory=dict, kw_only=True)
    # the keys the object had, in their order; None: a value made in code
    keys: tuple[str, ...] | None = field(default=None, kw_only=True, compare=False, repr=False)

    # fields a value made in code writes only when they are not None
    WHEN_SET: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_json(cls, data: object, where: str = "") -> Self:
        """The part of the JSON object ``data``; ``where`` is its place in the document, for errors."""
        if not isinstance(data, Mapping):
            raise PartError(where, f"is {_kind_of(data)}, not an object")
        hints = _fields(cls)
        values = {
            name: _read(kind, data[name], _at(where, name)) for name, kind in hints.items() if name in data
        }
        for f in dataclasses.fields(cls):
            if f.name in hints and f.name not in data and _default(f) is dataclasses.MISSING:
                raise PartError(_at(where, f.name), "is missing")
        extra = {k: v for k, v in data.items() if k not in hints}
        return cls(**values, extra=extra, keys=tuple(data))

    def to_json(self) -> dict[str, Any]:
        """The JSON object: key for key as read, or in the fields' order for a value made in code."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _OWN}
        if self.keys is None:
            order = [k for k, v in values.items() if v is not None or k not in self.WHEN_SET]
            order += [k for k in self.extra if k not in values]
        else:
            defaults = {f.name: _default(f) for f in dataclasses.fields(self)}
            order = [*self.keys, *(k for k, v in values.items() if k not in self.keys and v != defaults[k])]
        out: dict[str, Any] = {}
        for key in order:
            if key in values:
                out[key] = _write(values[key])
            elif key in self.extra:
                out[key] = self.extra[key]
        return out


def _at(where: str, name: str | int) -> str:
    if isinstance(name, int):
        return f"{where}[{name}]"
    return f"{where}.{name}" if where else name


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


_FIELDS: dict[str, dict[str, Any]] = {}


def _fields(cls: type[JsonPart]) -> dict[str, Any]:
    """The JSON fields of a part class and their types (its own bookkeeping left out)."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    if name not in _FIELDS:
        hints = typing.get_type_hints(cls)
        _FIELDS[name] = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in _OWN}
    return _FIELDS[name]


def _kind_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def _read(kind: Any, value: object, where: str) -> Any:
    """``value`` read as a ``kind`` (see the module's doc)."""
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        if value is None and len(options) < len(typing.get_args(kind)):
            return None
        problems = []
        for option in options:
            try:
                return _read(option, value, where)
            except PartError as exc:
                problems.append(exc.problem)
        raise PartError(where, problems[0] if len(problems) == 1 else f"is {_kind_of(value)}")
    if kind is Any:
        return value
    if origin is tuple:
        (item, _dots) = typing.get_args(kind)
        if not isinstance(value, list):
            raise PartError(where, f"is {_kind_of(value)}, not a list")
        return tuple(_read(item, v, _at(where, i)) for i, v in enumerate(value))
    if origin is Mapping or origin is dict:
        (_key, item) = typing.get_args(kind)
        if not isinstance(value, Mapping):
            raise PartError(where, f"is {_kind_of(value)}, not an object")
        if item is Any:
            return value
        return {str(k): _read(item, v, _at(where, str(k))) for k, v in value.items()}
    if isinstance(kind, type) and issubclass(kind, JsonPart):
        return kind.from_json(value, where)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(value)
        except ValueError:
            known = ", ".join(repr(m.value) for m in kind)
            raise PartError(where, f"is {value!r}, not one of {known}") from None
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        # a record's part (CellInfo, MachineInfo...): its JSON object kept as written
        if not isinstance(value, Mapping):
            raise PartError(where, f"is {_kind_of(value)}, not an object")
        part: Any = kind
        return part(value)
    return _scalar(kind, value, where)


def _scalar(kind: Any, value: object, where: str) -> Any:
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif kind is str:
        ok = isinstance(value, str)
    else:
        raise TypeError(f"{where}: no reader for {kind!r}")
    if not ok:
        raise PartError(where, f"is {_kind_of(value)}, not {_NAMES[kind]}")
    return value


_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def _write(value: Any) -> Any:
    """A field's value as JSON."""
    if isinstance(value, JsonPart):
        return value.to_json()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_write(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _write(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and hasattr(value, "to_json"):
        return value.to_json()
    return value
