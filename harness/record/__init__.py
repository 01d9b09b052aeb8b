"""Records: the typed record and sample, the one store that finds, loads, scans and writes them,
and machine identity with its views.

- :mod:`~harness.record.model`: :class:`Record`, :class:`Sample`, :func:`new_record` (pure);
- :mod:`~harness.record.schema`: the JSON schema and the finite-number check;
- :mod:`~harness.record.store`: :func:`record_path`, :func:`load_record`, :func:`read_record`,
  :func:`record_files`, :func:`find_records`, :func:`scan_records`, :func:`write_record`;
- :mod:`~harness.record.identity`: what makes samples one series, per use (pure).
"""

from harness.record.identity import (
    MACHINE_KEYS,
    fingerprint,
    identity_warnings,
    merge_identity,
    record_fingerprint,
    series_identity,
)
from harness.record.model import SCHEMA, VERSION, Record, Sample, new_record
from harness.record.schema import non_finite_problem, schema_problem
from harness.record.store import (
    find_records,
    load_record,
    read_record,
    record_files,
    record_path,
    scan_records,
    write_record,
)

__all__ = [
    "MACHINE_KEYS",
    "SCHEMA",
    "VERSION",
    "Record",
    "Sample",
    "find_records",
    "fingerprint",
    "identity_warnings",
    "load_record",
    "merge_identity",
    "new_record",
    "non_finite_problem",
    "read_record",
    "record_files",
    "record_fingerprint",
    "record_path",
    "scan_records",
    "schema_problem",
    "series_identity",
    "write_record",
]
