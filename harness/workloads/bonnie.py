"""The bonnie workload (seed 004's bonnie++ table): bonnie++'s CSV line, parsed.

The guest (``images/workloads/bonnie.sh``) runs ``bonnie++ -q -f -b`` on a
fresh filesystem (without ``-f`` when ``bonnie_char`` is on: the per-character tests too) and sends the CSV line it prints as ``outputs.bonnie_csv``.

The CSV has one column per figure of bonnie++'s table.  Two layouts exist:
format ``1.96`` (bonnie++ 1.96, the seed documents' lines) and ``1.98``
(bonnie++ 1.98 to 2.00a, the guest's), which adds the number of seeks and of
seeker processes after the chunk size.  In both, an empty field is a test
that did not run (``-f`` skips the per-character ones, ``-n 0`` the file
tests), and ``+++++`` (``+++`` for CPU) is a test that finished too fast for
bonnie++ to time: such a figure is left out of the metrics, never read as 0,
and its name is listed in the ``too_fast`` record field.  Latencies come with
a unit (``us``, ``ms``; ``ns`` and ``s`` are accepted) and are normalised to
microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import ProtocolError, SpecError
from harness.sizes import format_size
from harness.workloads.metrics import Metric, info
from harness.workloads.params import FS, MIB, Param, Parsed, Values, WorkloadKind, expect_keys

OUTPUT_KEY = "bonnie_csv"


@dataclass(frozen=True)
class Test:
    """One test of bonnie++'s table: its metric stem, rate unit and description."""

    key: str
    rate_unit: str  # "kib_per_s" or "per_s", the metric name's suffix
    description: str

    @property
    def rate(self) -> str:
        return f"bonnie.{self.key}_{self.rate_unit}"

    @property
    def cpu(self) -> str:
        return f"bonnie.{self.key}_cpu_pct"

    @property
    def latency(self) -> str:
        return f"bonnie.latency_{self.key}_us"


IO_TESTS = (
    Test("seq_output_char", "kib_per_s", "sequential output, per character (putc)"),
    Test("seq_output_block", "kib_per_s", "sequential output, per block (write)"),
    Test("rewrite", "kib_per_s", "rewrite: read, change and write back each block"),
    Test("seq_input_char", "kib_per_s", "sequential input, per character (getc)"),
    Test("seq_input_block", "kib_per_s", "sequential input, per block (read)"),
    Test("random_seeks", "per_s", "random seeks (lseek and read, 10% rewritten)"),
)
FILE_TESTS = (
    Test("seq_create", "per_s", "files created in sequential order"),
    Test("seq_stat", "per_s", "files stat()ed in sequential order"),
    Test("seq_delete", "per_s", "files deleted in sequential order"),
    Test("random_create", "per_s", "files created in random order"),
    Test("random_stat", "per_s", "files stat()ed in random order"),
    Test("random_delete", "per_s", "files deleted in random order"),
)
TESTS = IO_TESTS + FILE_TESTS

# The test parameters at the head of the line, per CSV format version.
HEADER_196 = ("format_version", "bonnie_version", "name", "concurrency", "seed", "size", "chunk_size")
HEADER_198 = (*HEADER_196, "seeks", "seek_procs")
FILE_PARAMS = ("num_files", "max_size", "min_size", "num_dirs", "file_chunk_size")


def _columns(header: tuple[str, ...]) -> tuple[str, ...]:
    """Column names of a whole line: parameters, then figures under their metric names."""
    cols = list(header)
    for test in IO_TESTS:
        cols += [test.rate, test.cpu]
    cols += FILE_PARAMS
    for test in FILE_TESTS:
        cols += [test.rate, test.cpu]
    cols += [test.latency for test in TESTS]
    return tuple(cols)


LAYOUTS: dict[str, tuple[str, ...]] = {"1.96": _columns(HEADER_196), "1.98": _columns(HEADER_198)}

_RATE_RE = re.compile(r"\d+(?:\.\d+)?")
_LATENCY_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|ms|s)")
_LATENCY_US = {"ns": 0.001, "us": 1.0, "ms": 1000.0, "s": 1_000_000.0}
_TOO_FAST_RE = re.compile(r"\++")


def _metrics() -> tuple[Metric, ...]:
    out: list[Metric] = []
    for test in TESTS:
        unit = "KiB/s" if test.rate_unit == "kib_per_s" else "1/s"
        out.append(Metric(test.rate, unit, True, f"bonnie++ {test.description}"))
        out.append(
            info(test.cpu, "%", f"bonnie++ CPU use during: {test.description} (can exceed 100)"),
        )
        out.append(Metric(test.latency, "us", False, f"bonnie++ worst latency of: {test.description}"))
    return tuple(out)


METRICS: tuple[Metric, ...] = _metrics()


def parse_csv_line(line: str) -> Parsed:
    """Figures and fields of one bonnie++ CSV line; :class:`ProtocolError` if unreadable.

    Fields: ``bonnie_csv`` (the line), ``bonnie_version``, ``bonnie_params``
    (the test parameters that were given: size, chunk size, number of files...)
    and ``too_fast`` (metric names bonnie++ printed as ``+++++``).
    """
    text = line.strip()
    if not text:
        raise ProtocolError("bonnie++ CSV line is empty")
    if "\n" in text:
        raise ProtocolError(f"bonnie++ CSV output is several lines, expected one: {text[:80]!r}")
    fields = text.split(",")
    layout = LAYOUTS.get(fields[0])
    if layout is None:
        raise ProtocolError(
            f"bonnie++ CSV line of format {fields[0][:20]!r} is not one this harness reads "
            f"({', '.join(LAYOUTS)}): {text[:80]!r}"
        )
    if len(fields) != len(layout):
        raise ProtocolError(
            f"bonnie++ CSV line of format {fields[0]} has {len(fields)} fields, "
            f"expected {len(layout)}: {text[:80]!r}"
        )
    params = _params(fields, layout)
    metrics: dict[str, float] = {}
    too_fast: list[str] = []
    for column, value in zip(layout, fields, strict=True):
        if not column.startswith("bonnie.") or value == "":
            continue
        if _TOO_FAST_RE.fullmatch(value):
            too_fast.append(column)
        elif column.startswith("bonnie.latency_"):
            metrics[column] = _latency_us(column, value)
        elif _RATE_RE.fullmatch(value):
            metrics[column] = float(value)
        else:
            raise ProtocolError(f"bonnie++ CSV: {column} is {value!r}, not a figure")
    if not metrics and not too_fast:
        raise ProtocolError(f"bonnie++ CSV line has no figure at all: {text[:80]!r}")
    record: dict[str, Any] = {
        "bonnie_csv": text,
        "bonnie_version": fields[1],
        "bonnie_params": params,
        "too_fast": too_fast,
    }
    return metrics, record


def _params(fields: list[str], layout: tuple[str, ...]) -> dict[str, str]:
    """The test's parameters as bonnie++ wrote them (``"512M"``, ``"1"``), the empty ones left out."""
    names = {*HEADER_198, *FILE_PARAMS} - {"format_version", "bonnie_version", "name", "seed"}
    return {col: val for col, val in zip(layout, fields, strict=True) if col in names and val}


def _latency_us(column: str, value: str) -> float:
    match = _LATENCY_RE.fullmatch(value)
    if match is None:
        raise ProtocolError(f"bonnie++ CSV: {column} is {value!r}, not a latency such as 4766us or 167ms")
    return float(match.group(1)) * _LATENCY_US[match.group(2)]


def parse_outputs(outputs: Mapping[str, str]) -> Parsed:
    expect_keys("bonnie", outputs, (OUTPUT_KEY,))
    return parse_csv_line(outputs[OUTPUT_KEY])


# -- parameters ------------------------------------------------------------------

BONNIE_SIZE_MIB = Param("bonnie_size_mib", 512, "test size (-s), >= 2x ram", slug="{}m")
BONNIE_RAM_MIB = Param("bonnie_ram_mib", 256, "RAM it assumes (-r)", slug="r{}m")
BONNIE_FILES = Param("bonnie_files", 0, "files in 1024s (-n); 0 skips", slug="n{}")
BONNIE_CHAR = Param(
    "bonnie_char",
    "off",
    "the per-character tests (putc, getc): off (-f) or on; under emulation they time the CPU too",
    slug="chr{}",
    choices=("off", "on"),
    what="bonnie_char",
    fold=True,
    flag_choices=True,
    quiet_default=True,
)


def check(v: Values) -> None:
    size, ram, files = v["bonnie_size_mib"], v["bonnie_ram_mib"], v["bonnie_files"]
    if size <= 0 or ram < 0 or files < 0:
        raise SpecError(
            f"bonnie size {size} MiB, ram {ram} MiB, files {files}: "
            "use a positive size and non-negative ram and files"
        )


def check_disk(v: Values, disk_size: int) -> None:
    size, ram = v["bonnie_size_mib"], v["bonnie_ram_mib"]
    if size < 2 * ram:
        raise SpecError(
            f"bonnie++ test size {size} MiB is less than twice its ram {ram} MiB: "
            "bonnie++ refuses that; use a size of at least 2x ram"
        )
    if size * MIB > disk_size // 2:
        raise SpecError(
            f"bonnie++ test size {size} MiB does not fit a {format_size(disk_size)} disk: "
            "use a disk at least twice as large"
        )


WORKLOAD = WorkloadKind(
    "bonnie",
    params=(BONNIE_SIZE_MIB, BONNIE_RAM_MIB, BONNIE_FILES, BONNIE_CHAR, FS),
    told=(FS, BONNIE_SIZE_MIB, BONNIE_RAM_MIB, BONNIE_FILES, BONNIE_CHAR),
    check=check,
    check_disk=check_disk,
    # the file tests (-n, in 1024s) run at about 100 files/s under TCG
    # a prior (a boot, which it once included, taken out)
    # the per-character tests, a byte a syscall, ran at 54 KiB/s out and 236 KiB/s in under TCG
    # (bonnie++ 2.00a); a 64 MiB sample with them took 77 s, so they cost about 70 s whatever the size
    estimate_s=lambda v, disk_size: (
        25.0
        + v["bonnie_size_mib"] * 0.12
        + v["bonnie_files"] * 20.0
        + (70.0 if v["bonnie_char"] == "on" else 0.0)
    ),
    write_bytes=lambda v: v["bonnie_size_mib"] * MIB + v["bonnie_files"] * 1024 * 1024,
    metrics=METRICS,
    parse_outputs=parse_outputs,
    words="bonnie++",
    headlines=(
        ("bonnie.seq_output_block_kib_per_s", "write"),
        ("bonnie.rewrite_kib_per_s", "rewrite"),
        ("bonnie.seq_input_block_kib_per_s", "read"),
        ("bonnie.random_seeks_per_s", "seeks"),
        ("bonnie.seq_create_per_s", "create"),
        ("bonnie.random_delete_per_s", "rnd del"),
    ),
    phases=("mkfs", "mount", "bonnie", "umount", "fsck"),
    figures=(),
)
