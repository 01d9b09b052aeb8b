"""The summary a person reads first: one line per cell with the figures that matter for its
workload, in 100 columns.  Pure: records in, text out.

Cells are grouped by workload (a table each, since each workload has its own headline figures);
a group's heading names the parts of the cell ids its cells share and each row the parts that
differ (:func:`harness.units.short_names`).  Every figure is a median over the cell's ok samples;
a column has one unit, named in its header, and one precision (:func:`harness.units.column`).
fio cells take a row per job (IOPS, completion latency p50/p99).  ``show --all`` prints every
metric (:mod:`harness.report.show`).
"""

from __future__ import annotations

import fnmatch
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from harness.compare.samplestats import Stats
from harness.errors import HarnessError
from harness.record import Record
from harness.units import PLAIN, Style, column, short_names, table, visible_width
from harness.untrusted import clean_line
from harness.workloads import metric_info, registry

WIDTH = 100


@dataclass(frozen=True)
class Headline:
    """A column of the summary: the metric and its short name in the header."""

    metric: str
    label: str


# the figures that matter of a measure that is not a guest's workload (the spread is shown for the
# first); a workload's own are its registry entry's (WorkloadKind.headlines)
MEASURE_HEADLINES: dict[str, tuple[Headline, ...]] = {
    "replay": (
        Headline("replay.write_p50_ms", "write p50"),
        Headline("replay.write_p99_ms", "write p99"),
        Headline("replay.wall_s", "wall"),
    ),
}
# every cell's: the device's write latency (QEMU's histogram)
DEVICE = (Headline("dev.write_p50_ms", "dev p50"), Headline("dev.write_p99_ms", "dev p99"))
FALLBACK = (Headline("total_s", "total"),)

# the counters whose figure needs a word, said once under any table that shows them
LEGEND = {
    "host.write_amplification": (
        "write amplification = bytes the host wrote / bytes the guest wrote; under 1: zeroes cost no data"
    ),
}


def legend(metrics: Sequence[str]) -> list[str]:
    """The legend lines of the shown ``metrics`` that need one."""
    return [text for name, text in LEGEND.items() if name in metrics]


def _workload(record: Record) -> str:
    if record.cell.get("measure") == "replay" or str(record.cell_id).endswith(".replay"):
        return "replay"
    name = record.cell.workload_name
    if name == "?":  # a record without its cell's axes: its id says the workload
        parts = str(record.cell_id).split(".")
        name = parts[2].split("-")[0] if len(parts) > 2 else "?"
    return name


def _median(record: Record, metric: str) -> float | None:
    values = [v for s in record.ok if (v := s.figure(metric)) is not None]
    return Stats.of(values).median if values else None


def _unit(metric: str) -> str:
    try:
        return metric_info(metric).unit
    except HarnessError:
        return ""


def _fio_jobs(record: Record) -> list[str]:
    jobs: list[str] = []
    for sample in record.ok:
        for name in sample.metrics:
            if fnmatch.fnmatchcase(name, "fio.*.iops"):
                job = name[len("fio.") : -len(".iops")]
                if job not in jobs:
                    jobs.append(job)
    return jobs


@dataclass(frozen=True)
class _Row:
    name: str
    job: str
    n: str
    values: tuple[float | None, ...]  # one per metric of the group's columns
    spread: float | None


def _group_rows(records: Sequence[Record], names: Sequence[str], heads: Sequence[Headline]) -> list[_Row]:
    rows = []
    for record, name in zip(records, names, strict=True):
        n = f"{record.ok_samples}/{len(record.samples)}"
        first = [v for s in record.ok if (v := s.figure(heads[0].metric)) is not None] if heads else []
        spread = Stats.of(first).cv_pct if len(first) > 1 else None
        jobs = _fio_jobs(record) if _workload(record) == "fio" else []
        _, labels = short_names(jobs, sep="\0") if len(jobs) > 1 else ("", jobs)
        if not jobs:
            values = tuple(_median(record, h.metric) for h in (*heads, *DEVICE))
            rows.append(_Row(name, "", n, values, spread))
            continue
        for i, job in enumerate(jobs):
            own = tuple(_median(record, f"fio.{job}.{h.metric}") for h in heads)
            device = tuple(_median(record, h.metric) if i == 0 else None for h in DEVICE)
            figures = [v for s in record.ok if (v := s.figure(f"fio.{job}.iops")) is not None]
            cv = Stats.of(figures).cv_pct if len(figures) > 1 else None
            rows.append(_Row(name if i == 0 else "", labels[i], n if i == 0 else "", own + device, cv))
    return rows


def headlines(workload: str) -> tuple[Headline, ...]:
    """The columns of ``workload``'s table: a measure's, a registered workload's, else ``total_s``
    (a record of a workload this harness does not know)."""
    if workload in MEASURE_HEADLINES:
        return MEASURE_HEADLINES[workload]
    if workload in registry.names():
        return tuple(Headline(metric, label) for metric, label in registry.kind(workload).headlines)
    return FALLBACK


def _metric_of(head: Headline, workload: str) -> str:
    """A column's metric as :func:`harness.workloads.metric_info` knows it (fio's are per job)."""
    return f"fio.job.{head.metric}" if workload == "fio" and head not in DEVICE else head.metric


def render_group(workload: str, records: Sequence[Record], *, style: Style = PLAIN) -> list[str]:
    """One workload's table: its heading, then a row per cell (a row per job for fio)."""
    common, names = short_names([str(r.cell_id) for r in records])
    heads = headlines(workload)
    rows = _group_rows(records, names, heads)
    columns = [*heads, *DEVICE]
    formats = [
        column([v for r in rows if (v := r.values[i]) is not None], _unit(_metric_of(h, workload)))
        for i, h in enumerate(columns)
    ]
    fio = workload == "fio"
    header = ["cell", *(["job"] if fio else []), "n"]
    units = ["", *([""] if fio else []), "ok/all"]
    for i, (head, fmt) in enumerate(zip(columns, formats, strict=True)):
        header.append(head.label)
        units.append(fmt.unit)
        if i == 0:
            header.append("±")
            units.append("%")
    body = [units]
    for row in rows:
        cells = [clean_line(row.name), *([row.job] if fio else []), row.n]
        for i, fmt in enumerate(formats):
            cells.append(fmt(row.values[i]))
            if i == 0:
                cells.append("-" if row.spread is None else f"{row.spread:.1f}")
        body.append(cells)
    first = 2 if fio else 1
    # a column no cell has a figure for says nothing; the last columns go where the table is too wide
    keep = [i for i in range(len(header)) if i <= first or any(row[i] != "-" for row in body[1:])]
    header, body = [header[i] for i in keep], [[row[i] for i in keep] for row in body]
    while True:
        lines = table([style(h, "bold") for h in header], body, numeric=set(range(first, len(header))))
        if max(visible_width(line) for line in lines) <= WIDTH or len(header) <= first + 2:
            break
        header, body = header[:-1], [row[:-1] for row in body]
    plural = "s" if len(records) != 1 else ""
    title = f"{workload}: {len(records)} cell{plural}" + (f" ({clean_line(common)})" if common else "")
    return [style(_fit(title), "bold"), *(_fit(line) for line in lines)]


def _fit(line: str) -> str:
    """A line cut at :data:`WIDTH` columns (a cell name can be longer than any terminal)."""
    return line if visible_width(line) <= WIDTH else line[: WIDTH - 1] + "…"


# a first sample this far from the others' median (either way, on logs) is named as an outlier
FIRST_SAMPLE_FACTOR = 1.5


def first_sample_warnings(records: Sequence[Record], *, style: Style = PLAIN) -> list[str]:
    """A line per cell whose first sample differs from the rest (hyperfine warns the same way):
    its headline figure more than :data:`FIRST_SAMPLE_FACTOR` times off the others' median, with
    what to do (more repeats, a warm-up)."""
    lines = []
    for record in records:
        workload = _workload(record)
        heads = headlines(workload)
        metric = heads[0].metric if heads and workload != "fio" else "total_s"
        values = [(s.index, v) for s in record.ok if (v := s.figure(metric)) is not None]
        if len(values) < 2:
            continue
        values.sort(key=lambda pair: pair[0] if pair[0] is not None else 0)
        first, rest = values[0][1], [v for _i, v in values[1:]]
        others = Stats.of(rest).median
        if first <= 0 or others <= 0 or max(first / others, others / first) < FIRST_SAMPLE_FACTOR:
            continue
        unit = _unit(metric)
        spread = Stats.of([v for _i, v in values]).cv_pct
        text = (
            f"warning: {clean_line(str(record.cell_id))}: its first sample's {metric} ({first:.4g} {unit}) "
            f"is {max(first / others, others / first):.1f}x off "
            + ("the other sample " if len(rest) == 1 else f"the median of the other {len(rest)} ")
            + f"({others:.4g} {unit}; ±{spread:.0f}% over all): a cold start or an outlier. Run more "
            "repeats (--repeat) to outvote it, or warm the cell up first (--cache-state warm runs the "
            "workload once unmeasured)"
        )
        wrapped = textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_long_words=False)
        lines += [style(line, "yellow") for line in wrapped]
    return lines


def failures(records: Sequence[Record], *, style: Style = PLAIN) -> list[str]:
    """A line per failed sample: which cell, and why."""
    lines = []
    for record in records:
        for sample in record.failed:
            reason = clean_line(str("?" if sample.reason is None else sample.reason))
            lines.append(style(f"{record.cell_id} sample {sample.index}: FAILED: {reason}", "red"))
            lines.append(f"  console: {clean_line(str(sample.logs.get('console', '-')))}")
    return lines


def render_summary(records: Sequence[Record], *, style: Style = PLAIN) -> str:
    """The summary: a table per workload (in the order the records come), the failed samples,
    and the headline medians' words: what the figures are."""
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(_workload(record), []).append(record)
    lines: list[str] = []
    for workload, members in groups.items():
        lines += [*render_group(workload, members, style=style), ""]
    lines += failures(records, style=style)
    warned = first_sample_warnings(records, style=style)
    lines += [*warned, *([""] if warned else [])]
    lines += [
        "medians of the ok samples; ±: the spread of the first figure (coefficient of variation);",
        "dev p50/p99: write latency at the guest's disk (QEMU's histogram); every metric: --all",
    ]
    return "\n".join(lines) + "\n"
