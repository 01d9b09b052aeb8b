"""A workload's parameters, declared once, and the workload itself as the registry knows it.  Pure.

A :class:`Param` says everything the rest of the harness derives from a
parameter: its name (the ``make_cell`` keyword, the sweep spec's axis, the
record's key), its type and default, its check, the ``diskbench run`` flag
and help text, how it is spelled in the cell id and what the guest is told
(``diskbench.NAME=VALUE``).  A :class:`WorkloadKind` lists its parameters and
adds what needs several of them or the disk's size: cross checks, the cell id's
workload part, the sample-time and write estimates planning uses, the guest's
tools it needs and the parser of its outputs.  A parameter shared by several
workloads (:data:`FS`) is one object that each lists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import ProtocolError, SpecError
from harness.workloads.metrics import Metric

MIB = 1024**2
# a cell's values of every registered parameter, by name
Values = Mapping[str, Any]
# (extra figures, extra record fields) parsed from a report's outputs
Parsed = tuple[dict[str, float], dict[str, Any]]
OutputParser = Callable[[Mapping[str, str]], Parsed]


@dataclass(frozen=True)
class Param:
    """One workload parameter.

    ``help`` is the run flag's help without the workloads that take it (the
    CLI prefixes them).  ``slug`` is a format string for the cell id's part.
    ``choices`` and ``bounds`` are its own checks; ``fold`` spells a choice
    case-insensitively; ``what`` names it in the unknown-choice message;
    ``flag_choices`` lets the run flag's parser list the choices too.
    """

    name: str
    default: int | str
    help: str
    slug: str = "{}"
    choices: tuple[str, ...] = ()
    what: str = ""
    fold: bool = False
    bounds: tuple[int, int] | None = None
    flag_choices: bool = False
    #: at its default the parameter is left out of the cell id, the record's workload and what
    #: the guest is told (its init has the same default): a parameter added after cells were
    #: recorded leaves their ids and records as they were
    quiet_default: bool = False

    def quiet(self, value: Any) -> bool:
        """Whether ``value`` is left unsaid (:attr:`quiet_default`)."""
        return self.quiet_default and value == self.default

    @property
    def type(self) -> type[int] | type[str]:
        """The type a value has (a sweep spec's TOML value and the run flag's)."""
        return int if isinstance(self.default, int) else str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value: Any) -> Any:
        """``value`` as a cell holds it, or :class:`SpecError` naming it and what is allowed."""
        if self.fold:
            value = str(value).strip().lower()
        if self.choices and value not in self.choices:
            raise SpecError(
                f"unknown {self.what or self.name} {value!r}: use one of {', '.join(self.choices)}"
            )
        if self.bounds is not None:
            low, high = self.bounds
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise SpecError(f"{self.name} {value!r}: use a whole number from {low} to {high}")
        return value


def expect_keys(workload: str, outputs: Mapping[str, str], required: tuple[str, ...]) -> None:
    """Check that ``outputs`` has exactly the ``required`` keys: guest and host agree."""
    missing = [k for k in required if k not in outputs]
    extra = sorted(set(outputs) - set(required))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        raise ProtocolError(f"{workload} report outputs: {'; '.join(parts)}")


def _no_outputs(workload: str) -> OutputParser:
    def parse(outputs: Mapping[str, str]) -> Parsed:
        expect_keys(workload, outputs, ())
        return {}, {}

    return parse


@dataclass(frozen=True)
class WorkloadKind:
    """A workload, declared once: everything the harness, the reports and history know of it.

    ``params`` in the cell id's order; ``told`` the ones the guest gets, in its order.  ``check``
    sees every parameter's value for every cell; ``check_disk`` this workload's cells with the
    disk's size in bytes.  ``estimate_s`` a TCG prior of its ``total_s``; ``write_bytes`` what
    the guest writes at most besides the filesystem's own.  ``tools`` the files it needs on the
    guest's tools drive; ``check_outputs`` checks a report's outputs against the cell's values.
    ``words`` names it in titles and ``headlines`` are a run table's (metric, label) columns (both
    required at registration); ``phases`` and ``figures`` are what history tracks of it.
    """

    name: str
    params: tuple[Param, ...] = ()
    told: tuple[Param, ...] = ()
    check: Callable[[Values], None] | None = None
    check_disk: Callable[[Values, int], None] | None = None
    estimate_s: Callable[[Values, int], float] | None = None
    write_bytes: Callable[[Values], int] | None = None
    tools: tuple[str, ...] = ()
    check_outputs: Callable[[Values, Mapping[str, str]], None] | None = None
    metrics: tuple[Metric, ...] = ()
    parse_outputs: OutputParser | None = None
    words: str = ""
    headlines: tuple[tuple[str, str], ...] = ()
    phases: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()

    def slug(self, values: Values) -> str:
        """The workload part of a cell id: ``dd-256m-2m-ext4``."""
        return "-".join(
            [
                self.name,
                *(p.slug.format(values[p.name]) for p in self.params if not p.quiet(values[p.name])),
            ]
        )

    def kernel_args(self, values: Values) -> list[str]:
        """What the guest is told: ``diskbench.workload=NAME`` and ``diskbench.KEY=VALUE``."""
        return [
            f"diskbench.workload={self.name}",
            *(f"diskbench.{p.name}={values[p.name]}" for p in self.told if not p.quiet(values[p.name])),
        ]

    def parser(self) -> OutputParser:
        return self.parse_outputs or _no_outputs(self.name)


# -- the filesystem, shared by dd, bonnie and mkfs ------------------------------

FS = Param(
    "fs",
    "ext4",
    "filesystem (ext4, ext2)",
    choices=("ext4", "ext2"),
    what="filesystem",
)


def filesystem_room(disk_size: int, fs: str) -> int:
    """Bytes a file can surely take on a fresh ``fs`` filled to the whole disk.

    mke2fs takes inode tables (up to 1/16 of a small disk), bitmaps and, for
    ext4, a journal; the rest minus a margin is room.  Generous enough for
    seed 001's 256 MiB on a 300 MiB ext2 image, strict enough to refuse what
    cannot fit.
    """
    if fs == "ext2":
        return disk_size - disk_size // 16 - 2 * 1024**2
    return disk_size - disk_size // 8 - 8 * 1024**2
