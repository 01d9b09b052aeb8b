"""Records: the typed record and sample, the one store that finds, loads, scans and writes them,
and machine identity with its views.

- :mod:`~harness.record.model`: :class:`Record`, :class:`Sample` and the record's typed parts
  (:class:`CellInfo`, :class:`MachineInfo`, :class:`SubjectInfo`, :class:`VMInfo`),
  :func:`new_record` (pure);
- :mod:`~harness.record.schema`: the JSON schema and the finite-number check;
- :mod:`~harness.record.store`: where records live (:class:`RecordDir`: :func:`run_records`,
  :func:`sweep_records`, :func:`gate_records`), the one way in (:func:`find_records`,
  :func:`load_record`, :func:`scan_records`, :func:`record_files`) and the one writer
  (:func:`write_record`); JSON stops there;
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
from harness.record.model import (
    SCHEMA,
    VERSION,
    CellInfo,
    MachineInfo,
    Record,
    Sample,
    SampleTally,
    SubjectInfo,
    VMInfo,
    new_record,
)
from harness.record.schema import non_finite_problem, schema_problem
from harness.record.store import (
    LATEST,
    Named,
    RecordDir,
    build_dirs,
    find_records,
    gate_records,
    load_record,
    name_records,
    record_files,
    record_path,
    run_records,
    runs,
    scan_records,
    sweep_dir,
    sweep_records,
    write_record,
)

__all__ = [
    "LATEST",
    "MACHINE_KEYS",
    "SCHEMA",
    "VERSION",
    "CellInfo",
    "MachineInfo",
    "Named",
    "Record",
    "RecordDir",
    "Sample",
    "SampleTally",
    "SubjectInfo",
    "VMInfo",
    "build_dirs",
    "find_records",
    "fingerprint",
    "gate_records",
    "identity_warnings",
    "load_record",
    "merge_identity",
    "name_records",
    "new_record",
    "non_finite_problem",
    "record_files",
    "record_fingerprint",
    "record_path",
    "run_records",
    "runs",
    "scan_records",
    "schema_problem",
    "series_identity",
    "sweep_dir",
    "sweep_records",
    "write_record",
]
