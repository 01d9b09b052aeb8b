"""The typed record and sample: one cell's samples, with the machine, subject and guest they ran on.

A record's JSON form is versioned (``schema``/``version``) and described by
``harness/data/record.schema.json``; :meth:`Record.from_json` takes a document that passed
the schema (see :mod:`harness.record.store`), :meth:`Record.to_json` gives back the
very same document, key for key and in the same order, so that reading and writing a
record never changes its bytes.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "diskbench-record"
VERSION = 1


@dataclass(frozen=True)
class Sample:
    """One measured run of a cell, as the record keeps it (``data``), with typed views."""

    data: Mapping[str, Any]

    @property
    def status(self) -> str:
        return str(self.data.get("status", "error"))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def metrics(self) -> dict[str, float]:
        """The sample's figures by name (empty for a failed sample)."""
        return {k: float(v) for k, v in (self.data.get("metrics") or {}).items()}

    @property
    def reason(self) -> str | None:
        reason = self.data.get("reason")
        return str(reason) if reason is not None else None

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class Record:
    """One cell's samples on one machine and subject; ``path`` is where it was read from."""

    cell: Mapping[str, Any]
    machine: Mapping[str, Any]
    samples: tuple[Sample, ...] = ()
    run_id: str | None = None
    subject: Mapping[str, Any] = field(default_factory=dict)
    vm: Mapping[str, Any] = field(default_factory=dict)
    # keys of the document beyond the ones above (``retried``), kept in their order
    extra: Mapping[str, Any] = field(default_factory=dict)
    # which of the optional keys the document had, and in what order
    keys: tuple[str, ...] = ()
    path: Path | None = field(default=None, compare=False)

    @property
    def cell_id(self) -> str:
        """The cell's stable id (the file's name for a record that lacks one)."""
        cell_id = self.cell.get("id")
        if cell_id is None and self.path is not None:
            return self.path.stem
        return str(cell_id)

    @property
    def ok_samples(self) -> int:
        return sum(1 for s in self.samples if s.ok)

    @property
    def accel(self) -> str | None:
        """The accelerator the samples ran under (the guest's, else the machine's)."""
        accel = self.vm.get("accel", self.machine.get("accel"))
        return str(accel) if accel is not None else None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, path: Path | None = None) -> Record:
        """A record from its JSON document (already checked against the schema)."""
        known = ("schema", "version", "run_id", "cell", "machine", "subject", "vm", "samples")
        return cls(
            cell=data["cell"],
            machine=data["machine"],
            samples=tuple(Sample(s) for s in data["samples"]),
            run_id=data.get("run_id"),
            subject=data.get("subject") or {},
            vm=data.get("vm") or {},
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
            "cell": self.cell,
            "machine": self.machine,
            "subject": self.subject,
            "vm": self.vm,
            "samples": [s.to_json() for s in self.samples],
            **self.extra,
        }
        order = self.keys or tuple(values)
        return {k: values[k] for k in order if k in values}


def new_record(
    *,
    cell: dict[str, Any],
    machine: dict[str, Any],
    subject: dict[str, Any],
    vm: dict[str, Any],
    run_id: str,
) -> dict[str, Any]:
    """A new record's document, with no sample yet (the runner appends them as they are measured)."""
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "run_id": run_id,
        "cell": cell,
        "machine": machine,
        "subject": subject,
        "vm": vm,
        "samples": [],
    }
