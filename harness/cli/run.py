"""``diskbench run``: measure one cell, or every combination of comma-separated axis values."""

from __future__ import annotations

import argparse
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.cli.builds import add_qemu_axis, qemu_choices
from harness.cli.common import add_machine_options, choices, err, machine_from_args
from harness.cli.outputs import add_save_and_export, check_save_and_export, leave_saved_and_exported
from harness.compare.settings import Settings
from harness.errors import ExitCode, SpecError
from harness.host.workdir import hold
from harness.report import render
from harness.spec import (
    COMPAT,
    DEFAULT_CLUSTER_SIZE,
    Aio,
    Cache,
    Cell,
    Format,
    ImageSpec,
    Interface,
    expand,
    format_size,
    split_list,
)
from harness.sweep.preflight import check_numbers, check_tools
from harness.workloads import registry

if typing.TYPE_CHECKING:
    from harness.record import Record
    from harness.rounds.session import SessionOptions


def add_parser(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="measure one cell, or every combination of comma-separated axis values",
        description=(
            "Measure cells: each sample creates a fresh image, boots a guest, runs the workload "
            "and writes the record under RESULTS/records/RUN_ID/. Axis flags take comma-separated "
            "lists; every combination is run (combinations a format cannot have, such as "
            "preallocation=metadata on raw, are skipped when several formats are given)."
        ),
    )
    axes = run.add_argument_group("cell axes (comma-separated lists)")
    axes.add_argument("--format", default="qcow2", help=f"image format: {choices(Format)}")
    axes.add_argument(
        "--preallocation",
        default="off",
        help="raw: off,falloc,full,written (every byte written first); qcow2: off,metadata,falloc,full",
    )
    axes.add_argument(
        "--cluster-size",
        default=None,
        help="qcow2 cluster_size, a power of two from 512 to 2M (default: 64K)",
    )
    axes.add_argument("--lazy-refcounts", action="store_true", help="qcow2 lazy_refcounts=on")
    axes.add_argument("--compat", default=None, help="qcow2 compat: 1.1 or 0.10 (default: 1.1)")
    axes.add_argument(
        "--extended-l2",
        action="store_true",
        help="qcow2 extended_l2=on (subclusters; clusters of 16K or more)",
    )
    axes.add_argument(
        "--backing",
        action="append",
        default=None,
        metavar="CHAIN",
        help="the disk an overlay over a chain, e.g. depth=1,fill=50%%,pattern=scattered (keys: depth 1-3, "
        "fill a share or a size, pattern sequential|scattered, format, cluster_size and extended_l2 of "
        "the base); repeat the flag for several chains",
    )
    axes.add_argument(
        "--cache-state",
        default="fresh",
        help="fresh: a new image per sample; warm: a first unmeasured run on the image, then the "
        "measured one; cold: the same with the image's host page cache dropped in between",
    )
    axes.add_argument(
        "--measure",
        default="guest",
        help="guest: a real guest runs the workload; replay: the cell's request stream, recorded "
        "once from a guest, is replayed natively by qemu-io on the same block layer (no emulated CPU)",
    )
    axes.add_argument("--size", default="2G", help="virtual disk size")
    axes.add_argument("--cache", default="writeback", help=f"drive cache mode: {choices(Cache)}")
    axes.add_argument(
        "--aio", default="threads", help=f"drive aio: {choices(Aio)} (native needs a direct cache mode)"
    )
    axes.add_argument("--interface", default="virtio-blk", help=f"bus: {choices(Interface)}")
    axes.add_argument(
        "--workload",
        default="dd",
        help=f"guest workload: {','.join(registry.names())} (dd is the quick one)",
    )
    wl = run.add_argument_group("workload parameters (refused unless a chosen workload takes them)")
    for param in registry.params().values():
        wl.add_argument(
            param.flag,
            type=param.type,
            default=param.default,
            action=_GivenParam,
            choices=param.choices if param.flag_choices else None,
            help=f"{', '.join(registry.users(param))}: {param.help}",
        )
    rn = run.add_argument_group("how to run")
    rn.add_argument(
        "--repeat",
        type=int,
        default=Settings.min_samples,
        metavar="N",
        help=f"samples per cell; `diskbench compare` needs {Settings.min_samples} a side to reach a verdict",
    )
    add_qemu_axis(rn, what="several run every cell under each, side by side (runner,10.0)")
    add_machine_options(rn)
    rn.add_argument(
        "--mem-mib",
        type=int,
        default=256,
        help="guest RAM (small, so the guest page cache does not hide the disk)",
    )
    rn.add_argument("--smp", type=int, default=1, help="guest vCPUs")
    rn.add_argument("--keep-images", action="store_true", help="keep each sample's image in the work dir")
    rn.add_argument(
        "--dry-run",
        action="store_true",
        help="list the cells, the combinations left out and the estimate; run nothing",
    )
    add_save_and_export(run.add_argument_group("what the run leaves besides its records"))


class _GivenParam(argparse.Action):
    """Stores a workload parameter's value and notes that it was given (``args.given_params``)."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, values)
        given = getattr(namespace, "given_params", None) or ()
        namespace.given_params = (*given, self.dest)


def check_params_apply(workloads: Sequence[str], given: Sequence[str]) -> None:
    """Bad input (exit 2) for a workload parameter given that none of ``workloads`` takes, as fio
    refuses an option that does not apply; names no one knows are left to the cell's own check."""
    params = registry.params()
    known = [w for w in workloads if w in registry.names()]
    for name in dict.fromkeys(given):
        users = registry.users(params[name])
        if known and not set(users) & set(known):
            flag = params[name].flag
            raise SpecError(
                f"{flag}: no chosen workload takes it (--workload {','.join(known)}): add "
                f"--workload {users[0]} or leave {flag} out"
            )


def cells_from_args(args: argparse.Namespace) -> tuple[list[Cell], list[str]]:
    """Expand the axis flags; return cells and the combinations that were skipped.  A workload
    parameter given that no chosen workload takes is bad input."""
    axes: dict[str, list[Any]] = {
        "format": split_list(args.format),
        "preallocation": split_list(args.preallocation),
        "cache": split_list(args.cache),
        "aio": split_list(args.aio),
        "interface": split_list(args.interface),
        "workload": split_list(args.workload),
        "cache_state": split_list(args.cache_state),
        "measure": split_list(args.measure),
    }
    if args.cluster_size:
        axes["cluster_size"] = split_list(args.cluster_size)
    if args.backing:
        axes["backing"] = list(args.backing)
    for name, values in axes.items():
        if not values:
            raise SpecError(f"--{name.replace('_', '-')} is empty: give at least one value")
    check_params_apply(axes["workload"], getattr(args, "given_params", None) or ())
    fixed = {
        "size": args.size,
        "lazy_refcounts": args.lazy_refcounts,
        "compat": args.compat,
        "extended_l2": args.extended_l2,
        **{name: getattr(args, name) for name in registry.params()},
    }
    return expand(axes, skip_format_mismatch=len(axes["format"]) > 1, **fixed)


def run_argv(cells: Sequence[Cell], *, repeat: int) -> list[str]:
    """The ``diskbench run`` command that measures ``cells`` again (every combination of their
    axes' values: the cells themselves, and those of the combinations a run would not skip),
    ``repeat`` samples each: what to run to have more samples of the cells of some records."""
    argv = ["diskbench", "run"]

    def values(get: Any) -> str:
        return ",".join(dict.fromkeys(str(get(c)) for c in cells))

    axes: list[tuple[str, Any, str | None]] = [
        ("--format", lambda c: c.image.format.value, None),
        ("--preallocation", lambda c: c.image.preallocation, None),
        ("--cache-state", lambda c: c.cache_state.value, "fresh"),
        ("--measure", lambda c: c.measure.value, "guest"),
        ("--size", lambda c: format_size(c.image.size), format_size(ImageSpec.size)),
        ("--cache", lambda c: c.drive.cache.value, None),
        ("--aio", lambda c: c.drive.aio.value, "threads"),
        ("--interface", lambda c: c.drive.interface.value, None),
        ("--workload", lambda c: c.workload.name.value, None),
    ]
    for flag, get, default in axes:
        text = values(get)
        if text != default:
            argv += [flag, text]
    qcow2 = [c for c in cells if c.image.format is Format.QCOW2]
    clusters = list(dict.fromkeys(c.image.cluster_size or DEFAULT_CLUSTER_SIZE for c in qcow2))
    if clusters and clusters != [DEFAULT_CLUSTER_SIZE]:
        argv += ["--cluster-size", ",".join(format_size(size) for size in clusters)]
    if any(c.image.lazy_refcounts for c in qcow2):
        argv.append("--lazy-refcounts")
    if any(c.image.extended_l2 for c in qcow2):
        argv.append("--extended-l2")
    for chain in dict.fromkeys(c.backing.spelled() for c in cells if c.backing is not None):
        argv += ["--backing", chain]
    compat = sorted({str(c.image.compat) for c in qcow2 if c.image.compat not in (None, COMPAT[0])})
    if compat:
        argv += ["--compat", compat[0]]
    for name, param in registry.params().items():
        users = [c for c in cells if c.workload.name.value in registry.users(param)]
        given = list(dict.fromkeys(getattr(c.workload, name) for c in users))
        if given and given != [param.default]:
            argv += [param.flag, str(given[0])]
    return [*argv, "--repeat", str(repeat)]


def run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise SpecError(f"--repeat {args.repeat}: use 1 or more")
    cells, skipped = cells_from_args(args)
    # --qemu of run: one build replaces the global one, several are an axis
    args.binaries, builds = qemu_choices(args.qemu_builds, args, given=True)
    options = options_from_args(args)
    check_numbers(
        cells, options.machine, max_disk_bytes=args.max_disk_size, mem_mib=options.mem_mib, smp=options.smp
    )
    check_tools(cells)
    check_save_and_export(args)
    from harness.sweep import check_free_space

    if args.dry_run:
        if builds:
            named = ", ".join(f"{b.name} ({b.binaries.qemu})" for b in builds)
            print(
                f"QEMU builds, side by side: {named}: every cell runs under each, {len(builds)}x the samples below"
            )
        print(_plan(args, cells, skipped), end="")
        return ExitCode.OK
    check_free_space(
        args.work_dir, cells, qemu_img=args.binaries.qemu_img
    )  # too little is exit 3 before any image exists
    # the combinations a format cannot have (metadata on raw) are left out without a word: a
    # list of formats asks for the combinations each can have (--dry-run lists them)
    with hold(args.results_dir, args.work_dir, host_disk=args.host_disk, progress=err):
        return _run_cells(options, cells, builds, args)


def _plan(args: argparse.Namespace, cells: Sequence[Cell], skipped: Sequence[str]) -> str:
    """What ``--dry-run`` prints: the cells, the combinations left out, the estimate, the disk."""
    from collections import Counter

    from harness.errors import HarnessError
    from harness.sweep import check_free_space
    from harness.sweep.planning import (
        estimate_builds_s,
        estimate_sample_s,
        format_duration,
        recorded_sample_s,
    )

    accel = "tcg" if args.accel == "auto" else args.accel
    lines = [f"run: {len(cells)} cell{'s' if len(cells) != 1 else ''} x {args.repeat} samples"]
    lines += [f"  run   {cell.id}" for cell in cells]
    for note, count in Counter(skipped).items():
        lines.append(f"  left out ({count} combination{'s' if count != 1 else ''}): {note}")
    recorded = recorded_sample_s(_recent_records(args.results_dir), accel=accel)
    measured = [recorded.sample_s(c) for c in cells]
    seconds = sum(
        args.repeat * (estimate_sample_s(c, accel=accel, start=args.start) if m is None else m)
        for c, m in zip(cells, measured, strict=True)
    )
    builds, build_s = estimate_builds_s(cells, accel=accel, start=args.start)
    known = sum(m is not None for m in measured)
    notes = [f"{known} of {len(cells)} cells timed by recorded samples"] if known else []
    if builds:
        notes.append(f"{builds} snapshot build{'s' if builds != 1 else ''} included, none if cached")
    lines.append(
        f"estimate: {len(cells) * args.repeat} samples, about {format_duration(seconds + build_s)} under "
        f"{accel.upper()} with --start {args.start}" + (f" ({'; '.join(notes)})" if notes else "")
    )
    try:
        lines.append(check_free_space(args.work_dir, cells, qemu_img=args.binaries.qemu_img))
    except HarnessError as exc:
        lines.append(f"disk: NOT ENOUGH: {exc.message}")
    return "\n".join(lines) + "\n"


#: how many of the newest runs an estimate reads its sample times from
RECENT_RUNS = 20


def _recent_records(results_dir: Path) -> list[Record]:
    """The records of the newest runs under ``results_dir``; one that cannot be read is left out
    (a plan only estimates from them)."""
    from harness.errors import HarnessError
    from harness.record import runs, scan_records

    found: list[Record] = []
    for directory in runs(results_dir)[-RECENT_RUNS:]:
        try:
            found += scan_records(directory).values()
        except HarnessError:
            continue
    return found


def options_from_args(args: argparse.Namespace) -> SessionOptions:
    """What every sample of the run runs with: the machine options, ``--repeat`` and the guest's size."""
    from harness.rounds.session import SessionOptions

    return SessionOptions(
        machine=machine_from_args(args),
        repeat=args.repeat,
        mem_mib=args.mem_mib,
        smp=args.smp,
        keep_images=args.keep_images,
    )


def _run_cells(options: SessionOptions, cells: Any, builds: Any, args: argparse.Namespace) -> int:
    from harness.rounds.session import run_cells

    result = run_cells(cells, options, progress=err, builds=builds)
    print(render(result.records), end="")
    print(f"records: {result.run_dir}")
    leave_saved_and_exported(args, result.records, result.run_dir)
    if result.failed_samples:
        err(
            f"diskbench: {result.failed_samples} of {result.total_samples} samples failed; "
            "their reasons and console logs are in the table above"
        )
        return ExitCode.INFRA
    return ExitCode.OK
