"""Planning a sweep: choosing cells (--only, --shard), time and disk estimates, free space, the plan shown.

Selection and estimates are pure; measuring an image and the free space do I/O.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ImageError, InfraError, SpecError
from harness.host import confine, proc
from harness.record import Record
from harness.spec import (
    WRITTEN,
    CacheState,
    Cell,
    Format,
    split_list,
)
from harness.spec import Measure as CellMeasure
from harness.subject.binaries import Binaries
from harness.sweep.specfile import Excluded, Plan
from harness.untrusted import clean_line

PREALLOCATED = ("falloc", "full", "written")
MIB = 1024**2


# -- choosing cells: --only and --shard ----------------------------------------


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``: the second of four shards (1-based, as CI matrices count)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise SpecError(f"--shard {text!r} is not K/N: use e.g. --shard 1/4")
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise SpecError(f"--shard {text!r} is not allowed: K runs from 1 to N, and N is 1 or more")
    return k, n


def shard_cells(cells: Sequence[Cell], k: int, n: int) -> list[Cell]:
    """Shard ``k`` of ``n``: round-robin over the sorted cell ids.

    Every cell lands in exactly one shard and shard sizes differ by at most
    one, whatever order the spec lists them in; the kept cells stay in run order.
    """
    ids = sorted(c.id for c in cells)
    mine = set(ids[k - 1 :: n])
    return [c for c in cells if c.id in mine]


def filter_only(cells: Sequence[Cell], patterns: str) -> list[Cell]:
    """Cells whose id matches any of the comma-separated fnmatch globs.

    A glob that matches no cell is an error: a typo would otherwise run
    less than was asked without a word.
    """
    globs = split_list(patterns)
    if not globs:
        raise SpecError("--only is empty: give one or more globs, e.g. --only 'qcow2-*'")
    for glob in globs:
        if not any(fnmatch.fnmatchcase(c.id, glob) for c in cells):
            example = cells[0].id if cells else "-"
            raise SpecError(f"--only {glob!r} matches no cell of this sweep: ids look like {example}")
    return [c for c in cells if any(fnmatch.fnmatchcase(c.id, g) for g in globs)]


def select(cells: Sequence[Cell], *, only: str | None = None, shard: str | None = None) -> list[Cell]:
    """``--only`` first, then ``--shard``: N runners given the same ``--only`` cover it once."""
    chosen = filter_only(cells, only) if only is not None else list(cells)
    if shard is not None:
        chosen = shard_cells(chosen, *parse_shard(shard))
    return chosen


# -- estimates: time and disk -------------------------------------------------

# What a sample costs besides its workload, measured on the development host (2 cores, TCG,
# other guests running): docs/snapshot-start.md, the README's default sweep run twice with each
# start kind (10 cells x 2 repeats; wall 7:05-7:20 cold, 5:30-6:12 with snapshot start):
# - a cold boot, QEMU start to the guest's start line: 4.94 and 5.31 s (median host.boot_s of 20
#   samples per run; benchmarks/boot_time.py: 4.74 s);
# - a restore from a snapshot: 0.23 and 0.24 s (median host.boot_s, 0.15-0.60 s);
# - a snapshot build, once per snapshot key: 7.7-9.3 s for install's (it has the payload drive),
#   4.4-5.1 s for dd's; about 6.5 s on average;
# - the rest of a sample on the host (image create, QMP, teardown): wall minus boots, workload
#   totals and builds, 15-25 s over 20 samples, about 1 s a sample.
# A workload's ``estimate_s`` is its own time (``total_s``) under TCG; one that declares none is
# taken to need _TCG_WORKLOAD_S.  Under KVM no figure was measured here (KVM does not work on
# this host): everything is divided by _KVM_SPEEDUP, a guess.
_TCG_WORKLOAD_S = 55.0
COLD_BOOT_S = 5.0
RESTORE_S = 0.25
SNAPSHOT_BUILD_S = 6.5
SAMPLE_OVERHEAD_S = 1.0
_KVM_SPEEDUP = 4.0


def restores(cell: Cell, start: str) -> bool:
    """Whether ``cell``'s samples start from a snapshot under ``--start start``."""
    from harness.sample.snapshot import not_applicable

    return start != "cold" and not_applicable(cell) is None


def snapshot_key_guess(cell: Cell) -> tuple[str, ...]:
    """What tells two cells' snapshots apart, as far as planning can know it without QEMU: the
    workload's drives, the disk's device and size, whether the guest sees a write cache."""
    from harness.sample.snapshot import NO_WRITE_CACHE

    return (
        cell.workload.kind.name,
        cell.drive.interface.value,
        str(cell.image.size),
        str(cell.drive.cache in NO_WRITE_CACHE),
    )


def estimate_create_s(cell: Cell) -> float:
    """A prior for creating the image, on the host (the same under KVM and TCG).

    Preallocated qcow2 metadata costs per cluster (measured: about 100 s for
    1 GiB of 512-byte clusters on two cores), full preallocation and the raw
    ``written`` image write every byte, LUKS derives its key for about 2 s.
    """
    image = cell.image
    secs = 0.0
    if image.format is Format.QCOW2 and image.preallocation != "off":
        secs += image.size / (image.cluster_size or 65536) * 45e-6
    if image.preallocation in ("full", WRITTEN):
        secs += image.size / 1024**3
    if image.encrypted:
        secs += 2.5
    return secs


def estimate_workload_s(cell: Cell) -> float:
    """The workload's own prior under TCG (what the workload declares), before any sample ran."""
    estimate = cell.workload.kind.estimate_s
    return _TCG_WORKLOAD_S if estimate is None else estimate(cell.workload.params(), cell.image.size)


def estimate_sample_s(cell: Cell, *, accel: str = "tcg", start: str = "auto") -> float:
    """A prior for one sample's wall time, before any sample was measured: its workload, its
    start (a boot, or a restore where snapshot start applies), the host's part and its image's
    creation; a snapshot's build, once per key, is :func:`estimate_builds_s`'s."""
    secs = estimate_workload_s(cell)
    if cell.cache_state is not CacheState.FRESH:
        secs *= 2  # the unmeasured first run on the same image
    secs += (RESTORE_S if restores(cell, start) else COLD_BOOT_S) + SAMPLE_OVERHEAD_S
    return (secs / _KVM_SPEEDUP if accel == "kvm" else secs) + estimate_create_s(cell)


# a sample's wall time as its record tells it: the start, the guest's own time, the host's part
_SAMPLE_PARTS = ("host.boot_s", "total_s", "host.overhead_s")


@dataclass(frozen=True)
class Recorded:
    """Sample wall times measured before (``host.boot_s + total_s + host.overhead_s`` of ok
    samples): the median per cell id, and per workload (its name and parameters, what it
    measures and its cache state) for cells not measured yet."""

    by_cell: Mapping[str, float]
    by_workload: Mapping[str, float]

    def sample_s(self, cell: Cell) -> float | None:
        """A measured sample time of ``cell``, or of a cell with its workload; None if none."""
        found = self.by_cell.get(cell.id)
        return found if found is not None else self.by_workload.get(_workload_key(cell.as_dict()))


def _workload_key(cell: Mapping[str, object]) -> str:
    keys = ("workload", "measure", "cache_state")
    return json.dumps({k: cell.get(k) for k in keys}, sort_keys=True, default=str)


def recorded_sample_s(records: Iterable[Record], *, accel: str) -> Recorded:
    """The sample times ``records`` measured under ``accel`` (see :class:`Recorded`)."""
    import statistics

    by_cell: dict[str, list[float]] = {}
    by_workload: dict[str, list[float]] = {}
    for record in records:
        if record.accel != accel:
            continue
        for sample in record.samples:
            parts = [sample.figure(name) for name in _SAMPLE_PARTS]
            if not sample.ok or any(p is None or p < 0 for p in parts):
                continue
            seconds = sum(p for p in parts if p is not None)
            by_cell.setdefault(record.cell_id, []).append(seconds)
            by_workload.setdefault(_workload_key(record.cell.data), []).append(seconds)
    return Recorded(
        by_cell={k: statistics.median(v) for k, v in by_cell.items()},
        by_workload={k: statistics.median(v) for k, v in by_workload.items()},
    )


def estimate_builds_s(cells: Iterable[Cell], *, accel: str = "tcg", start: str = "auto") -> tuple[int, float]:
    """The snapshots ``cells`` would build (an empty snapshot cache) and their time."""
    keys = {snapshot_key_guess(c) for c in cells if restores(c, start)}
    secs = len(keys) * SNAPSHOT_BUILD_S
    return len(keys), secs / _KVM_SPEEDUP if accel == "kvm" else secs


def workload_write_bytes(cell: Cell) -> int:
    """Bytes the guest writes to the disk at most: its data plus the filesystem's own."""
    fs_overhead = min(cell.image.size // 16, 256 * MIB)
    written = cell.workload.kind.write_bytes
    data = 0 if written is None else written(cell.workload.params())
    return data + fs_overhead


@dataclass(frozen=True)
class Measure:
    """``qemu-img measure`` of a cell's image."""

    required: int
    fully_allocated: int


def image_need_bytes(cell: Cell, measure: Measure) -> int:
    """Host bytes an image of ``cell`` can take by the end of a sample.

    Preallocated images take their full size at once.  Sparse ones take what
    qemu-img measure says (qcow2 metadata) plus what the workload writes, never
    more than fully allocated.  For raw, measure reports the virtual size as
    "required"; a sparse raw file only holds what is written.
    """
    if cell.image.preallocation in PREALLOCATED:
        return measure.fully_allocated
    base = measure.required if cell.image.format is Format.QCOW2 else 0
    return min(base + workload_write_bytes(cell), measure.fully_allocated)


#: What a LUKS header adds to a qcow2 image: QEMU 7.2 measures exactly 2 MiB more for the
#: default LUKS parameters at any size and preallocation; twice that as a margin.
LUKS_HEADER_BYTES = 4 * MIB


def recording_need_bytes(cell: Cell) -> int:
    """Host bytes a replay cell's recording takes beside its image: its write log and trace, at their
    caps (:func:`harness.sample.replay.record.recording_caps`); none for a guest cell."""
    if cell.measure is not CellMeasure.REPLAY:
        return 0
    from harness.sample.replay.record import recording_caps

    return recording_caps(cell.image.size).total_bytes


def measure_image(cell: Cell, *, qemu_img: str) -> Measure:
    """``qemu-img measure`` for the image ``cell`` would create.

    An encrypted image is measured without its encryption plus :data:`LUKS_HEADER_BYTES`:
    measuring LUKS makes qemu-img time its key derivation first, and on a busy host that timing
    fails ("Unable to get accurate CPU usage") one time in five or more.
    """
    options = [o for o in cell.image.create_options() if not o.startswith("encrypt.")]
    argv = [
        qemu_img,
        "measure",
        "--output=json",
        "-O",
        cell.image.format.value,
        "-o",
        ",".join(options),
        "--size",
        str(cell.image.size),
    ]
    # qemu-img of a pull request's build, or not: never as root (harness.host.confine)
    result = proc.run(argv, timeout_s=60, error_cls=ImageError, confined=confine.as_account())
    extra = LUKS_HEADER_BYTES if cell.image.encrypted else 0
    try:
        data = json.loads(result.stdout)
        return Measure(
            required=int(data["required"]) + extra, fully_allocated=int(data["fully-allocated"]) + extra
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ImageError(f"qemu-img measure printed no figures: {result.stdout[:200]!r}", argv=argv) from exc


def free_bytes(path: Path) -> int:
    """Free bytes for an unprivileged writer where ``path`` is (or would be created)."""
    probe = path.resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def largest_image(cells: Iterable[Cell], measure: Callable[[Cell], Measure]) -> tuple[Cell, int]:
    """The cell whose image can take the most host space (``measure`` says what each takes), and that figure."""
    cache: dict[tuple[str, ...], Measure] = {}
    best: tuple[Cell, int] | None = None
    for cell in cells:
        key = (cell.image.format.value, *cell.image.create_options(), str(cell.image.size))
        if key not in cache:
            cache[key] = measure(cell)
        need = image_need_bytes(cell, cache[key]) + recording_need_bytes(cell)
        if best is None or need > best[1]:
            best = (cell, need)
    if best is None:
        raise SpecError("no cell selected: nothing to measure")
    return best


def check_free_space(work_dir: Path, cells: Sequence[Cell], *, qemu_img: str) -> str:
    """Refuse to start when the work dir cannot hold the largest image (``qemu_img`` measures it);
    say the figures.

    One sample's image exists at a time (each is removed after its sample),
    so the largest one is what must fit.
    """
    cell, need = largest_image(cells, lambda c: measure_image(c, qemu_img=qemu_img))
    free = free_bytes(work_dir)
    what = f"the largest image ({cell.id}) needs up to {_gib(need)}"
    if free < need:
        raise InfraError(
            f"work dir {work_dir} has {_gib(free)} free, {what}: "
            "free some space or pass --work-dir on a larger disk"
        )
    return f"disk: {what}; work dir has {_gib(free)} free"


def _gib(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB"


def drop_unsupported(
    cells: Sequence[Cell], work_dir: Path, binaries: Binaries
) -> tuple[list[Cell], list[tuple[str, str]]]:
    """Leave out cells ``binaries`` cannot run here (io_uring, native aio, encryption), with the reason.

    Probed once per aio/cache pair without a guest, so a host whose QEMU
    lacks io_uring excludes those cells instead of failing each sample.
    """
    from harness.sample.capabilities import unsupported_reason

    kept: list[Cell] = []
    dropped: list[tuple[str, str]] = []
    for cell in cells:
        reason = unsupported_reason(cell, work_dir, binaries)
        if reason:
            dropped.append((cell.id, reason))
        else:
            kept.append(cell)
    return kept, dropped


# -- what is shown before a run ----------------------------------------------------


def describe_plan(
    plan: Plan,
    cells: Sequence[Cell],
    *,
    repeat: int,
    only: str | None = None,
    shard: str | None = None,
    recorded: Mapping[str, int] | None = None,
    accel: str = "tcg",
    start: str = "auto",
) -> str:
    """The cells that will run, the exclusions with their reasons, and a time estimate."""
    spec = plan.spec
    lines = [
        f"sweep {spec.name} ({spec.source}): {_plural(len(plan.cells), 'cell')} x {_plural(repeat, 'repeat')}"
    ]
    if spec.description:
        lines.append(f"  {clean_line(spec.description)}")  # a pull request's text: one line, no escapes
    chosen = []
    if only is not None:
        chosen.append(f"--only {only}")
    if shard is not None:
        chosen.append(f"--shard {shard}")
    if chosen:
        lines.append(f"selected {len(cells)} of {len(plan.cells)} cells by {' '.join(chosen)}")
    recorded = recorded or {}
    todo = 0
    seconds = 0.0
    for cell in cells:
        have = min(recorded.get(cell.id, 0), repeat)
        todo += repeat - have
        seconds += (repeat - have) * estimate_sample_s(cell, accel=accel, start=start)
        state = f"  ({have}/{repeat} recorded)" if have else ""
        lines.append(f"  run   {cell.id}{state}")
    by_reason: dict[str, list[Excluded]] = {}
    for ex in plan.excluded:
        by_reason.setdefault(ex.reason, []).append(ex)
    for reason, items in by_reason.items():
        lines.append(f"  excluded {_common_label(items)}: {reason}")
    held: dict[tuple[str, str, str, str], int] = {}
    for _, h in plan.held:
        key = (h.setting, h.keeps, h.axis, h.why)
        held[key] = held.get(key, 0) + 1
    for (setting, keeps, axis, why), count in held.items():
        lines.append(f"  keeps {keeps}, not the policy's {setting}, in the {axis} cells ({count}): {why}")
    todo_cells = [c for c in cells if min(recorded.get(c.id, 0), repeat) < repeat]
    builds, build_s = estimate_builds_s(todo_cells, accel=accel, start=start)
    seconds += build_s
    builds_text = f"{_plural(builds, 'snapshot build')} included, none if cached; " if builds else ""
    lines.append(
        f"estimate: {_plural(todo, 'sample')}, about {format_duration(seconds)} under {accel.upper()} "
        f"with --start {start} ({builds_text}from typical figures; the progress line corrects it as "
        "samples finish)"
    )
    return "\n".join(lines) + "\n"


def _common_label(items: Sequence[Excluded]) -> str:
    """What the excluded combinations of one reason share: ``format=raw preallocation=off (8 cells)``."""
    first = items[0].values
    common = {k: v for k, v in first.items() if all(ex.values.get(k) == v for ex in items)}
    label = " ".join(f"{k}={v}" for k, v in common.items()) or "combinations"
    return label if len(items) == 1 else f"{label} ({len(items)} cells)"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
