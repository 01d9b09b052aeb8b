"""``diskbench sweep``: a sweep spec (TOML) or preset, resumable and shardable."""

from __future__ import annotations

import argparse
import typing
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.cli.builds import add_qemu_axis, qemu_choices
from harness.cli.common import add_machine_options, add_spec_repeat, err, machine_from_args
from harness.errors import ExitCode, HarnessError, SpecError
from harness.host.hostdisk import NATIVE, check_usable, model_dir
from harness.host.workdir import hold
from harness.record.store import sweep_records
from harness.sweep.preflight import check_numbers, check_tools

if typing.TYPE_CHECKING:
    from harness.rounds.session import SessionOptions


def add_parser(sub: Any) -> None:
    sweep = sub.add_parser(
        "sweep",
        help="run a sweep spec (TOML): every combination of its axes, resumable, shardable",
        description=(
            "Expand a sweep spec to cells, list them with the exclusions and their reasons, then run "
            "them in rounds (one sample of every cell per round). Records go to "
            "RESULTS/sweeps/NAME/CELL_ID.json and are the checkpoint: running the same sweep again "
            "skips the samples recorded on this machine and subject and runs the rest."
        ),
    )
    sweep.add_argument(
        "spec", type=Path, nargs="?", help="the sweep spec, e.g. sweeps/default.toml (or --preset NAME)"
    )
    sweep.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help="run a seed experiment (a preset: harness/data/presets/NAME.toml) instead of a spec file; 'list' lists them",
    )
    sweep.add_argument(
        "--scale",
        type=float,
        default=None,
        help="with --preset: multiply its sizes (1: the seed's own sizes; see --preset list)",
    )
    add_spec_repeat(sweep)
    sweep.add_argument(
        "--shard",
        default=None,
        metavar="K/N",
        help="run only shard K of N (1-based): N runners with K=1..N cover the sweep exactly once",
    )
    sweep.add_argument(
        "--only",
        default=None,
        metavar="PATTERN",
        help="run only cells whose id matches one of these comma-separated globs, e.g. 'qcow2-*,*.dd-*'",
    )
    sweep.add_argument(
        "--keep-failures",
        action="store_true",
        help="on a rerun, keep failed samples as they are (without it: run them again, keeping the good ones)",
    )
    sweep.add_argument(
        "--dry-run", action="store_true", help="list cells, exclusions and the estimate; run nothing"
    )
    sweep.add_argument(
        "--policy",
        type=Path,
        default=None,
        help="a storage policy (policy.toml): what the spec leaves unset comes from it, and its "
        "extra -drive options apply to every sample",
    )
    add_qemu_axis(
        sweep, what="replaces the spec's qemu axis; several run every cell under each, side by side"
    )
    add_machine_options(sweep)


def run(args: argparse.Namespace) -> int:
    from harness import presets, sweep
    from harness.rounds.session import SessionOptions
    from harness.subject.policy import load_policy

    if args.preset == "list":
        print(presets.render_list(), end="")
        return ExitCode.OK
    spec = presets.resolve_spec(args.spec, preset=args.preset, scale=args.scale)
    repeat = spec.repeat if args.repeat is None else args.repeat
    if repeat < 1:
        raise SpecError(f"--repeat {repeat}: use 1 or more")
    policy = load_policy(args.policy) if args.policy else None
    plan = sweep.expand_spec(spec, policy=policy)
    cells = sweep.select(plan.cells, only=args.only, shard=args.shard)
    # the spec's QEMU axis, unless --qemu names the builds; one build replaces the global --qemu;
    # with neither, the QEMU the policy pins ([qemu] version), as the gate and history run it
    given = bool(args.qemu_builds)
    values = args.qemu_builds if given else spec.qemu
    pinned = policy if policy is not None and not values and policy.qemu.pinned else None
    if pinned is not None:
        values = (pinned.qemu.version,)
    args.binaries, builds = qemu_choices(values, args, given=given)
    if pinned is not None:
        err(f"sweep: {pinned.source} pins QEMU {values[0]} ([qemu] version): {args.binaries.qemu}")
    options = SessionOptions(machine=machine_from_args(args), repeat=repeat)
    disks = _host_disks(args, spec)
    check_numbers(cells, options.machine, max_disk_bytes=args.max_disk_size)
    check_tools(cells)
    directory = _records_dir(args.results_dir, spec.name, disks[0])
    recorded = sweep.recorded_samples(directory, keep_failures=args.keep_failures)
    accel_guess = "kvm" if args.accel == "kvm" else "tcg"
    if builds:
        named = ", ".join(f"{b.name} ({b.binaries.qemu})" for b in builds)
        print(
            f"QEMU builds, side by side: {named}: every cell runs under each, {len(builds)}x the samples below"
        )
    if len(disks) > 1:
        print(
            f"host disks, one after the other: {', '.join(disks)}: every cell runs on each (each model "
            f"built once), {len(disks)}x the samples below"
        )
    print(
        sweep.describe_plan(
            plan,
            cells,
            repeat=repeat,
            only=args.only,
            shard=args.shard,
            recorded=recorded,
            accel=accel_guess,
            start=args.start,
        ),
        end="",
        flush=True,
    )
    if not cells:
        print(f"shard {args.shard} of this sweep has no cell: nothing to run")
        return ExitCode.OK
    if args.dry_run:
        try:
            print(sweep.check_free_space(args.work_dir, cells, qemu_img=args.binaries.qemu_img))
        except HarnessError as exc:
            print(f"disk: NOT ENOUGH: {exc.message}")
        if recorded:
            print(f"records in {directory}: resumed if of this machine and subject, else set aside")
        for path, why in sweep.corrupt_records(directory):
            print(f"record {path} cannot be read ({why}): a run sets it aside and runs its cell again")
        return ExitCode.OK
    results = []
    for disk in disks:
        machine = replace(options.machine, work_dir=model_dir(args.work_dir, disk), host_disk=disk)
        with hold(args.results_dir, args.work_dir, host_disk=disk, progress=err):
            results.append(
                _run_sweep(
                    args,
                    replace(options, machine=machine),
                    spec,
                    policy,
                    (cells, builds),
                    _records_dir(args.results_dir, spec.name, disk),
                )
            )
    return _report(results, disks)


def _records_dir(results_dir: Path, name: str, disk: str) -> Path:
    """Where a sweep's records on ``disk`` go: the sweep's directory, or its model's below it."""
    where = sweep_records(results_dir, name)
    return where.directory if disk == NATIVE else where.disk(disk).directory


def _host_disks(args: argparse.Namespace, spec: Any) -> tuple[str, ...]:
    """The disks the sweep runs on, in order: ``--host-disk`` where it names a model, else the
    spec's ``host_disk`` axis, else the native disk; each checked usable (exit 2 where not)."""
    disks = (args.host_disk,) if args.host_disk != NATIVE or not spec.host_disk else tuple(spec.host_disk)
    for disk in disks:
        check_usable(disk, what="host_disk" if spec.host_disk and disk != args.host_disk else "--host-disk")
    return disks


def _report(results: list[Any], disks: tuple[str, ...]) -> int:
    """Each disk's records in a table of its own (``diskbench report`` puts the disks side by
    side), then what ran and what failed."""
    from harness.report import render

    for disk, result in zip(disks, results, strict=True):
        if result.records:
            if len(disks) > 1:
                print(f"host disk {disk}:")
            print(render(result.records), end="")
    if len(disks) > 1:
        print(f"the disks side by side: diskbench report {results[0].directory}")
    code = ExitCode.OK
    for result in results:
        print(
            f"records: {result.directory} ({result.ran_samples} samples run, {result.skipped_samples} resumed)"
        )
        if result.failed_samples:
            err(
                f"diskbench: {result.failed_samples} of {result.total_samples} samples failed in "
                f"{len(result.failed_cells)} cell(s): {', '.join(result.failed_cells)}; "
                "their reasons and console logs are in the table above"
            )
            code = ExitCode.INFRA
    return code


def _run_sweep(
    args: argparse.Namespace,
    options: SessionOptions,
    spec: Any,
    policy: Any,
    planned: tuple[Any, Any],
    directory: Path,
) -> Any:
    """One disk's run of the sweep (``options.machine`` names it and its work dir); its result."""
    from harness import presets, sweep
    from harness.progress import Progress
    from harness.rounds.session import build_sessions, open_session
    from harness.sample.capabilities import record_probes

    cells, builds = planned
    err(sweep.check_free_space(options.machine.work_dir, cells, qemu_img=args.binaries.qemu_img))
    progress = Progress()
    caches = {c.drive.cache for c in cells}
    sessions = (
        build_sessions(
            caches, options, builds, progress=progress.note, run_id=f"sweep-{spec.name}", policy=policy
        )
        if builds
        else []
    )
    session = (
        sessions[0][1]
        if sessions
        else open_session(caches, options, progress=progress.note, run_id=f"sweep-{spec.name}", policy=policy)
    )
    for note in record_probes(presets.probes_of(spec), directory, session.opts.work_dir, args.binaries):
        progress.note(note)
    cells, unsupported = sweep.drop_unsupported(cells, session.opts.work_dir, args.binaries)
    for cell_id, reason in unsupported:
        progress.note(f"excluded on this host: {cell_id}: {reason}")
    result = sweep.run_sweep(
        spec.name,
        cells,
        session,
        results_dir=args.results_dir,
        repeat=options.repeat,
        progress=progress,
        retry_failures=not args.keep_failures,
        builds=sessions,
    )
    return result
