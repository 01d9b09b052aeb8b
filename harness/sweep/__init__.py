"""Sweeps: a TOML spec that expands to cells x repeats, run with resume.

A spec names values per axis, single parameters, repeats and exclusions (docs/sweeps.md).  Every
key is a keyword of :func:`harness.spec.make_cell`, so a new axis there is a new axis here.  The
spec is validated as a whole before anything runs, and each error names the file, the line and the
value (tomllib keeps no positions for values, so :class:`Locator` finds them in the text).  A
combination that every value allows on its own but that a format or QEMU cannot do together
(``aio=native`` with a cached mode, ``preallocation=metadata`` on raw) is *excluded with its
reason*, listed before the run, never a crash.

Records are the checkpoint: each cell's record lives at ``RESULTS/sweeps/NAME/CELL_ID.json``; a
rerun skips the samples a record of the same fingerprint already holds and runs the rest, so a
sweep killed at any moment loses at most the sample in flight.  Samples run in rounds (every
cell's first sample, then every cell's second...) so that a host that speeds up or slows down
over a long sweep shifts every cell alike.

Parsing, expansion, selection and estimates are pure; the disk-space check, the record scan and
the loop do I/O: :mod:`~harness.sweep.specfile` (the spec and its expansion),
:mod:`~harness.sweep.planning` (selection, estimates, free space, the plan shown before a run),
:mod:`~harness.sweep.rounds` (the order of samples in rounds, which the gate shares) and
:mod:`~harness.sweep.running` (records and the loop).
"""

from harness.record import scan_records, sweep_dir
from harness.sweep.planning import (
    MIB,
    PREALLOCATED,
    Measure,
    check_free_space,
    describe_plan,
    drop_unsupported,
    estimate_builds_s,
    estimate_create_s,
    estimate_sample_s,
    estimate_workload_s,
    filter_only,
    format_duration,
    free_bytes,
    image_need_bytes,
    largest_image,
    measure_image,
    parse_shard,
    select,
    shard_cells,
    workload_write_bytes,
)
from harness.sweep.rounds import Turn, round_order, rounds
from harness.sweep.running import (
    CORRUPT_DIR,
    SweepResult,
    clean_stale_temp_files,
    corrupt_records,
    recorded_samples,
    run_sweep,
    set_aside,
    set_corrupt_aside,
)
from harness.sweep.specfile import (
    AXES,
    HOST_DISK_AXIS,
    NAME_RE,
    QEMU_AXIS,
    SIZE_KEYS,
    TOP_KEYS,
    Excluded,
    Exclusion,
    Plan,
    SweepSpec,
    canonical,
    check_qemu_value,
    expand_spec,
    load_spec,
    parse_spec,
)

__all__ = [
    "AXES",
    "CORRUPT_DIR",
    "HOST_DISK_AXIS",
    "MIB",
    "NAME_RE",
    "PREALLOCATED",
    "QEMU_AXIS",
    "SIZE_KEYS",
    "TOP_KEYS",
    "Excluded",
    "Exclusion",
    "Measure",
    "Plan",
    "SweepResult",
    "SweepSpec",
    "Turn",
    "canonical",
    "check_free_space",
    "check_qemu_value",
    "clean_stale_temp_files",
    "corrupt_records",
    "describe_plan",
    "drop_unsupported",
    "estimate_builds_s",
    "estimate_create_s",
    "estimate_sample_s",
    "estimate_workload_s",
    "expand_spec",
    "filter_only",
    "format_duration",
    "free_bytes",
    "image_need_bytes",
    "largest_image",
    "load_spec",
    "measure_image",
    "parse_shard",
    "parse_spec",
    "recorded_samples",
    "round_order",
    "rounds",
    "run_sweep",
    "scan_records",
    "select",
    "set_aside",
    "set_corrupt_aside",
    "shard_cells",
    "sweep_dir",
    "workload_write_bytes",
]
