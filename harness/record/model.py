"""The typed record and sample: one cell's samples, with the machine, subject and guest they ran on.

A record's JSON form is versioned (``schema``/``version``) and described by
``harness/data/record.schema.json``; :meth:`Record.from_json` takes a document that passed
the schema (see :mod:`harness.record.store`), :meth:`Record.to_json` gives back the
very same document, key for key and in the same order, so that reading and writing a
record never changes its bytes.  A record made here (:func:`new_record`, a sampler's
:class:`Sample`) writes its keys in the order the runner always wrote them.

The parts the harness writes free-form (the machine's facts, the subject, the guest's
limits, the cell's axes; a sample's host figures and the guest's own report) are kept as
their JSON objects, each behind a typed view of the fields the harness reads.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SCHEMA = "diskbench-record"
VERSION = 1

# a JSON object as the record holds it
JsonObject = Mapping[str, Any]


def _str_or_none(value: object) -> str | None:
    return str(value) if value is not None else None


@dataclass(frozen=True)
class _Part:
    """A JSON object of a record kept as written; subclasses name the fields the harness reads."""

    data: JsonObject = field(default_factory=dict)

    def get(self, key: str, default: object = None) -> Any:
        return self.data.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class CellInfo(_Part):
    """The record's cell: its axes (``image``, ``drive``, ``workload``, ``cache_state``) and ``id``."""

    @property
    def id(self) -> str | None:
        return _str_or_none(self.data.get("id"))

    @property
    def workload(self) -> JsonObject:
        workload = self.data.get("workload")
        return workload if isinstance(workload, Mapping) else {}

    @property
    def workload_name(self) -> str:
        return str(self.workload.get("name", "?"))


@dataclass(frozen=True)
class MachineInfo(_Part):
    """The runner: host kernel, CPU, accelerator, QEMU and qemu-img, work dir (see ``hostinfo``)."""

    @property
    def hostname(self) -> str | None:
        return _str_or_none(self.data.get("hostname"))

    @property
    def accel(self) -> str | None:
        return _str_or_none(self.data.get("accel"))

    @property
    def qemu_version(self) -> str | None:
        return _str_or_none(self.data.get("qemu_version"))


@dataclass(frozen=True)
class SubjectInfo(_Part):
    """What was measured: the guest recipe (``guest``), the storage ``policy``, a gate side's ``rev``."""

    @property
    def guest(self) -> JsonObject:
        guest = self.data.get("guest")
        return guest if isinstance(guest, Mapping) else {}

    @property
    def recipe_hash(self) -> str | None:
        return _str_or_none(self.guest.get("recipe_hash"))

    @property
    def policy(self) -> Any:
        return self.data.get("policy")

    @property
    def rev(self) -> str | None:
        rev = self.data.get("rev")
        return rev if isinstance(rev, str) else None

    def with_values(self, **values: object) -> SubjectInfo:
        """This subject with ``values`` set (added at the end, or in place)."""
        return SubjectInfo({**self.data, **values})


@dataclass(frozen=True)
class VMInfo(_Part):
    """The guest's limits: ``accel`` it ran under, ``mem_mib``, ``smp``, its deadlines, ``start``."""

    @property
    def accel(self) -> str | None:
        return _str_or_none(self.data.get("accel"))

    @property
    def mem_mib(self) -> Any:
        return self.data.get("mem_mib")

    @property
    def smp(self) -> Any:
        return self.data.get("smp")


# a new sample's keys in the order the samplers always wrote them; DETAILS is where the
# workload's own fields (``too_fast``, ``bonnie_csv``...) go
DETAILS = "*details"
SAMPLE_ORDER = (
    "index",
    "status",
    "measure",
    "started_at",
    "host",
    "logs",
    "argv",
    "guest_ready",
    "report",
    DETAILS,
    "metrics",
    "replay",
    "reason",
    "error_type",
    "log_tail",
    "warning",
)
# the keys that are fields of :class:`Sample` (the others are its ``details``)
_SAMPLE_FIELDS = tuple(k for k in SAMPLE_ORDER if k != DETAILS)
# the keys a new sample always has; the others only when set
_ALWAYS = ("index", "status", "host", "logs")


@dataclass(frozen=True)
class Sample:
    """One measured run of a cell: ``status`` ``ok`` or ``error``, its figures by metric name
    (``metrics``), the host's own figures (``host``), its logs, and why it failed (``reason``).

    ``details`` are the workload's fields a parser adds (``too_fast``...) and any key of a
    stored sample this model does not name; ``keys`` the stored document's order (empty for
    a new sample: :data:`SAMPLE_ORDER`)."""

    index: int | None = None
    status: str = "error"
    metrics: Mapping[str, float] = field(default_factory=dict)
    host: JsonObject = field(default_factory=dict)
    logs: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None
    error_type: str | None = None
    log_tail: str | None = None
    warning: str | None = None
    started_at: str | None = None
    measure: str | None = None
    argv: Sequence[str] | None = None
    guest_ready: JsonObject | None = None
    report: JsonObject | None = None
    replay: JsonObject | None = None
    details: JsonObject = field(default_factory=dict)
    keys: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def figure(self, name: str) -> float | None:
        """The metric ``name`` as a number; None where the sample lacks it."""
        value = self.metrics.get(name)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def host_figure(self, *path: str) -> float | None:
        """A number among the host's figures (``host_figure("map_after", "data_bytes")``); None if absent."""
        value: Any = self.host
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def start(self) -> str:
        """How the guest started (``cold``, ``snapshot``...); samples from before snapshot start were cold."""
        return str(self.host.get("start", "cold"))

    @property
    def too_fast(self) -> tuple[str, ...]:
        """The figures bonnie++ printed as ``+++++`` in this sample."""
        names = self.details.get("too_fast")
        return tuple(str(n) for n in names) if isinstance(names, list | tuple) else ()

    def with_logs(self, rewrite: Callable[[str], str]) -> Sample:
        """This sample with every log path passed through ``rewrite``."""
        return replace(self, logs={k: rewrite(v) if isinstance(v, str) else v for k, v in self.logs.items()})

    @classmethod
    def from_json(cls, data: JsonObject) -> Sample:
        """A sample from its JSON object (already checked against the schema)."""
        known = {k: data[k] for k in _SAMPLE_FIELDS if k in data}
        return cls(
            **known,
            details={k: v for k, v in data.items() if k not in _SAMPLE_FIELDS},
            keys=tuple(data),
        )

    def to_json(self) -> dict[str, Any]:
        values: dict[str, Any] = {k: getattr(self, k) for k in _SAMPLE_FIELDS}
        if self.keys:
            return {k: values[k] if k in values else self.details[k] for k in self.keys}
        out: dict[str, Any] = {}
        for key in SAMPLE_ORDER:
            if key == DETAILS:
                out.update(self.details)
            elif key in _ALWAYS or (values[key] is not None and (key != "metrics" or values[key])):
                out[key] = values[key]
        return out


@dataclass(frozen=True)
class Record:
    """One cell's samples on one machine and subject; ``path`` is where it was read from."""

    cell: CellInfo
    machine: MachineInfo
    samples: tuple[Sample, ...] = ()
    run_id: str | None = None
    subject: SubjectInfo = field(default_factory=SubjectInfo)
    vm: VMInfo = field(default_factory=VMInfo)
    # failed samples a resumed sweep ran again, kept with their reasons and logs
    retried: tuple[Sample, ...] = ()
    # keys of the document beyond the ones above, kept in their order
    extra: JsonObject = field(default_factory=dict)
    # which keys the document had, and in what order (empty: a new record's order)
    keys: tuple[str, ...] = ()
    path: Path | None = field(default=None, compare=False)

    @property
    def cell_id(self) -> str:
        """The cell's stable id (the file's name for a record that lacks one)."""
        cell_id = self.cell.id
        if cell_id is None and self.path is not None:
            return self.path.stem
        return str(cell_id)

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if s.ok]

    @property
    def failed(self) -> list[Sample]:
        return [s for s in self.samples if not s.ok]

    @property
    def ok_samples(self) -> int:
        return sum(1 for s in self.samples if s.ok)

    @property
    def accel(self) -> str | None:
        """The accelerator the samples ran under (the guest's, else the machine's)."""
        return _str_or_none(self.vm.get("accel", self.machine.accel))

    def next_sample_index(self) -> int:
        """One more than any index of the record, retried samples included: logs never collide."""
        indices = [s.index for s in (*self.samples, *self.retried)]
        return max((i for i in indices if isinstance(i, int)), default=-1) + 1

    def with_sample(self, sample: Sample) -> Record:
        return replace(self, samples=(*self.samples, sample))

    def with_failures_aside(self) -> tuple[Record, int]:
        """This record with its failed samples moved to ``retried``, and how many moved."""
        failed = tuple(self.failed)
        if not failed:
            return self, 0
        keys = self.keys if not self.keys or "retried" in self.keys else (*self.keys, "retried")
        moved = replace(self, samples=tuple(self.ok), retried=(*self.retried, *failed), keys=keys)
        return moved, len(failed)

    def with_log_paths(self, rewrite: Callable[[str], str]) -> Record:
        """This record with the log paths of its samples passed through ``rewrite``."""
        return replace(self, samples=tuple(s.with_logs(rewrite) for s in self.samples))

    @classmethod
    def from_json(cls, data: JsonObject, *, path: Path | None = None) -> Record:
        """A record from its JSON document (already checked against the schema)."""
        known = ("schema", "version", "run_id", "cell", "machine", "subject", "vm", "samples", "retried")
        return cls(
            cell=CellInfo(data["cell"]),
            machine=MachineInfo(data["machine"]),
            samples=tuple(Sample.from_json(s) for s in data["samples"]),
            run_id=data.get("run_id"),
            subject=SubjectInfo(data.get("subject") or {}),
            vm=VMInfo(data.get("vm") or {}),
            retried=tuple(Sample.from_json(s) for s in data.get("retried") or ()),
            extra={k: v for k, v in data.items() if k not in known},
            keys=tuple(data),
            path=path,
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON document, key for key as it was read (or as :func:`new_record` orders it)."""
        values: dict[str, Any] = {
            "schema": SCHEMA,
            "version": VERSION,
            "run_id": self.run_id,
            "cell": self.cell.data,
            "machine": self.machine.data,
            "subject": self.subject.data,
            "vm": self.vm.data,
            "samples": [s.to_json() for s in self.samples],
            **(
                {"retried": [s.to_json() for s in self.retried]}
                if self.retried or "retried" in self.keys
                else {}
            ),
            **self.extra,
        }
        order = self.keys or tuple(values)
        return {k: values[k] for k in order if k in values}


class SampleTally:
    """The samples of a run's or a sweep's ``records`` counted (a base of their results)."""

    records: list[Record]

    @property
    def total_samples(self) -> int:
        return sum(len(r.samples) for r in self.records)

    @property
    def failed_samples(self) -> int:
        return sum(len(r.failed) for r in self.records)


def new_record(
    *,
    cell: CellInfo | JsonObject,
    machine: MachineInfo | JsonObject,
    subject: SubjectInfo | JsonObject,
    vm: VMInfo | JsonObject,
    run_id: str,
) -> Record:
    """A new record with no sample yet (the runner adds them as they are measured)."""
    return Record(
        cell=cell if isinstance(cell, CellInfo) else CellInfo(cell),
        machine=machine if isinstance(machine, MachineInfo) else MachineInfo(machine),
        subject=subject if isinstance(subject, SubjectInfo) else SubjectInfo(subject),
        vm=vm if isinstance(vm, VMInfo) else VMInfo(vm),
        run_id=run_id,
    )
