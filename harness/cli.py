"""The ``diskbench`` command.  Thin: parse, call a plain function, map errors to exit codes."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import __version__
from harness.compare_cli import add_compare_parser, cmd_compare
from harness.errors import ExitCode, HarnessError, SpecError, UsageError
from harness.history import add_history_parser, cmd_history
from harness.paths import default_results_dir, default_work_dir
from harness.report.command import add_report_parser, cmd_report
from harness.spec import PAYLOADS, Aio, Cache, Cell, Format, Interface, Workload, expand, split_list
from harness.workdir import hold


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _choices(enum: Any) -> str:
    return ",".join(m.value for m in enum)


def add_machine_options(group: Any) -> None:
    """Where and how samples run: shared by ``run`` and ``sweep``."""
    group.add_argument(
        "--accel",
        default="auto",
        choices=("auto", "kvm", "tcg"),
        help="auto: KVM if a guest really boots under it, else TCG with a warning",
    )
    group.add_argument(
        "--work-dir",
        type=Path,
        default=default_work_dir(),
        help="where disk images are created: the runner's real disk, never tmpfs",
    )
    group.add_argument(
        "--results-dir",
        type=Path,
        default=default_results_dir(),
        help="records and logs go here (a sweep's under RESULTS/sweeps/NAME/)",
    )
    group.add_argument(
        "--boot-timeout-s",
        type=float,
        default=None,
        help="deadline for the guest's ready line (default 30 under KVM, 120 under TCG)",
    )
    group.add_argument(
        "--workload-timeout-s", type=float, default=1800.0, help="deadline for the workload report"
    )
    group.add_argument(
        "--start",
        choices=("cold", "snapshot", "auto"),
        default="auto",
        help="how each sample's guest starts: boot it (cold), restore it from a snapshot taken at "
        "its ready line (snapshot), or snapshot where it applies (auto, the default)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="diskbench",
        description=(
            "Benchmark virtual-disk IO under QEMU: boot a minimal guest on a fresh disk image "
            "per sample, run a workload in it, and record guest and host figures."
        ),
        epilog="Exit codes: 0 ok, 1 regression, 2 bad usage or input, 3 infrastructure failure.",
    )
    parser.add_argument("--version", action="version", version=f"diskbench {__version__}")
    parser.add_argument(
        "--qemu",
        metavar="PATH",
        help="qemu-system-x86_64 to run guests with (default $DISKBENCH_QEMU, else the one on PATH); "
        "recorded in every record's machine info",
    )
    parser.add_argument(
        "--qemu-img",
        metavar="PATH",
        help="qemu-img to create and check images with (default $DISKBENCH_QEMU_IMG, else the one on PATH)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="measure one cell, or every combination of comma-separated axis values",
        description=(
            "Measure cells: each sample creates a fresh image, boots a guest, runs the workload "
            "and writes the record under RESULTS/records/RUN_ID/. Axis flags take comma-separated "
            "lists; every combination is run (combinations a format cannot have, such as "
            "preallocation=metadata on raw, are skipped when several formats are given)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    axes = run.add_argument_group("cell axes (comma-separated lists)")
    axes.add_argument("--format", default="qcow2", help=f"image format: {_choices(Format)}")
    axes.add_argument(
        "--preallocation",
        default="off",
        help="raw: off,falloc,full,written (every byte written first); qcow2: off,metadata,falloc,full",
    )
    axes.add_argument(
        "--cluster-size",
        default=None,
        help="qcow2 cluster_size, a power of two from 512 to 2M (default 64K)",
    )
    axes.add_argument("--lazy-refcounts", action="store_true", help="qcow2 lazy_refcounts=on")
    axes.add_argument("--compat", default=None, help="qcow2 compat: 1.1 (default) or 0.10")
    axes.add_argument(
        "--cache-state",
        default="fresh",
        help="fresh: a new image per sample; warm: a first unmeasured run on the image, then the "
        "measured one; cold: the same with the image's host page cache dropped in between",
    )
    axes.add_argument("--size", default="2G", help="virtual disk size")
    axes.add_argument("--cache", default="writeback", help=f"drive cache mode: {_choices(Cache)}")
    axes.add_argument(
        "--aio", default="threads", help=f"drive aio: {_choices(Aio)} (native needs a direct cache mode)"
    )
    axes.add_argument("--interface", default="virtio-blk", help=f"bus: {_choices(Interface)}")
    axes.add_argument("--workload", default="install", help=f"guest workload: {_choices(Workload)}")
    wl = run.add_argument_group("workload parameters")
    wl.add_argument("--payload", default="full", choices=PAYLOADS, help="install: package set to install")
    wl.add_argument("--dd-mib", type=int, default=256, help="dd: MiB to write")
    wl.add_argument("--dd-chunk-mib", type=int, default=2, help="dd: chunk size in MiB")
    wl.add_argument("--fs", default="ext4", help="dd, bonnie, mkfs: filesystem (ext4, ext2)")
    wl.add_argument("--bonnie-size-mib", type=int, default=512, help="bonnie: test size (-s), >= 2x ram")
    wl.add_argument("--bonnie-ram-mib", type=int, default=256, help="bonnie: RAM it assumes (-r)")
    wl.add_argument("--bonnie-files", type=int, default=0, help="bonnie: files in 1024s (-n); 0 skips")
    wl.add_argument(
        "--fio-target",
        default="both",
        help="fio: the raw disk, a file on ext4 made on it, or both (raw, file, both)",
    )
    wl.add_argument(
        "--fio-size-mib", type=int, default=64, help="fio: MiB of the sequential jobs (and the file)"
    )
    wl.add_argument("--fio-ios", type=int, default=2000, help="fio: 4 KiB IOs of each random job")
    wl.add_argument("--fio-fsync-ios", type=int, default=200, help="fio: writes of the fsync-per-write job")
    rn = run.add_argument_group("how to run")
    rn.add_argument("--repeat", type=int, default=3, help="samples per cell")
    add_machine_options(rn)
    rn.add_argument(
        "--mem-mib",
        type=int,
        default=256,
        help="guest RAM (small, so the guest page cache does not hide the disk)",
    )
    rn.add_argument("--smp", type=int, default=1, help="guest vCPUs")
    rn.add_argument("--keep-images", action="store_true", help="keep each sample's image in the work dir")

    guest = sub.add_parser("guest", help="build or re-pin the guest (kernel, initramfs, install payload)")
    gsub = guest.add_subparsers(dest="guest_command", metavar="ACTION")
    gbuild = gsub.add_parser(
        "build", help="build the guest from the pinned recipe in images/ (cached by its hash)"
    )
    gbuild.add_argument("--force", action="store_true", help="rebuild even if cached")
    gsub.add_parser("pin", help="re-pin every package of the recipe to the mirror's current version")

    acc = sub.add_parser("accel", help="say which accelerator works here, and why")
    acc.add_argument("--accel", default="auto", choices=("auto", "kvm", "tcg"))
    acc.add_argument("--no-cache", action="store_true", help="probe again even if a result is cached")

    show = sub.add_parser("show", help="print the table of existing records")
    show.add_argument("records", nargs="+", type=Path, help="record files or run directories")
    add_sweep_parsers(sub)
    add_report_parser(sub)
    add_compare_parser(sub)
    add_gate_parser(sub)
    add_history_parser(sub)
    return parser


def add_gate_parser(sub: Any) -> None:
    """``diskbench gate``: base vs head on this runner, interleaved."""
    from harness.compare import add_compare_options
    from harness.gate import GATE_SPEC

    gate = sub.add_parser(
        "gate",
        help="compare two revisions on this runner: interleaved rounds, a verdict per cell",
        description=(
            "Check out BASE and HEAD of the tracked repository in git worktrees (each side measures "
            "its own policy.toml, guest recipe and, if given or built, its own QEMU), run the gate "
            "spec's cells for both sides in interleaved rounds (order random per round and cell), "
            "add rounds to cells that are not yet clear until the budget is spent, and compare: "
            "a verdict per cell with the ratio of medians, its bootstrap interval and a Mann-Whitney "
            "test. Writes OUT/comparison.json and OUT/summary.md and prints the summary."
        ),
        epilog="Exit codes: 0 nothing fails, 1 regression (or changed, unless the spec says changed_fails = "
        "false), 2 bad usage, 3 infrastructure failure.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    gate.add_argument("--base", required=True, help="base revision (branch, tag or commit)")
    gate.add_argument("--head", required=True, help="head revision (branch, tag or commit)")
    gate.add_argument("--spec", type=Path, default=GATE_SPEC, help="the gate spec: cells, rounds, budget")
    gate.add_argument("--repo", type=Path, default=Path("."), help="the git repository the revisions are of")
    gate.add_argument(
        "--out", type=Path, default=None, help="output dir (default RESULTS/gate/BASE..HEAD-TIME)"
    )
    gate.add_argument(
        "--budget-min", type=float, default=None, help="time budget in minutes (default: the spec's)"
    )
    gate.add_argument(
        "--rounds", type=int, default=None, help="first rounds for every cell (default: the spec's)"
    )
    gate.add_argument("--max-rounds", type=int, default=None, help="rounds at most (default: the spec's)")
    gate.add_argument("--seed", type=int, default=None, help="seed of the run order and the bootstrap")
    gate.add_argument("--no-canary", action="store_true", help="skip the host canary (O_DIRECT writes)")
    gate.add_argument(
        "--policy",
        type=Path,
        default=None,
        help="policy for a side whose checkout has no policy.toml (default: this repository's)",
    )
    q = gate.add_argument_group("QEMU of each side (default: the one on PATH for both)")
    q.add_argument("--base-qemu", help="qemu-system-x86_64 of base")
    q.add_argument("--head-qemu", help="qemu-system-x86_64 of head")
    q.add_argument("--base-qemu-img", help="qemu-img of base")
    q.add_argument("--head-qemu-img", help="qemu-img of head")
    q.add_argument(
        "--build-command",
        help="build QEMU in each side's checkout with this command (e.g. a QEMU tree: "
        "\"sh -c './configure --target-list=x86_64-softmmu && make -C build qemu-system-x86_64 qemu-img'\")",
    )
    add_compare_options(gate)
    # unset means "the spec's": see settings_for
    gate.set_defaults(min_effect=None)
    add_machine_options(gate)


def add_sweep_parsers(sub: Any) -> None:
    """``diskbench sweep`` and ``diskbench merge``."""
    sweep = sub.add_parser(
        "sweep",
        help="run a sweep spec (TOML): every combination of its axes, resumable, shardable",
        description=(
            "Expand a sweep spec to cells, list them with the exclusions and their reasons, then run "
            "them in rounds (one sample of every cell per round). Records go to "
            "RESULTS/sweeps/NAME/CELL_ID.json and are the checkpoint: running the same sweep again "
            "skips the samples recorded on this machine and subject and runs the rest."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sweep.add_argument(
        "spec", type=Path, nargs="?", help="the sweep spec, e.g. sweeps/default.toml (or --preset NAME)"
    )
    sweep.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help="run a seed experiment (sweeps/presets/NAME.toml) instead of a spec file; 'list' lists them",
    )
    sweep.add_argument(
        "--scale",
        type=float,
        default=None,
        help="with --preset: multiply its sizes (1: the seed's own sizes; see --preset list)",
    )
    sweep.add_argument(
        "--repeat", type=int, default=None, help="samples per cell (default: the spec's repeat)"
    )
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
        help="on a rerun, keep failed samples as they are (default: run them again, keeping the good ones)",
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
    add_machine_options(sweep)

    merge = sub.add_parser(
        "merge",
        help="join the record dirs of a sharded sweep into one",
        description=(
            "Copy the records (and their logs) of several shard dirs into one dir. Records of "
            "different accel, QEMU version, CPU, guest or policy are refused unless --allow-mixed, "
            "which keeps each identity in its own subdirectory. A cell found twice keeps the record "
            "with more ok samples."
        ),
    )
    merge.add_argument(
        "dirs", nargs="+", type=Path, help="record dirs, e.g. RESULTS/sweeps/NAME of each shard"
    )
    merge.add_argument(
        "--out", type=Path, required=True, help="a new or empty directory for the merged records"
    )
    merge.add_argument(
        "--allow-mixed",
        action="store_true",
        help="merge records of different machine identities anyway, each identity in its own subdir",
    )


def cells_from_args(args: argparse.Namespace) -> tuple[list[Cell], list[str]]:
    """Expand the axis flags; return cells and the combinations that were skipped."""
    axes: dict[str, list[Any]] = {
        "format": split_list(args.format),
        "preallocation": split_list(args.preallocation),
        "cache": split_list(args.cache),
        "aio": split_list(args.aio),
        "interface": split_list(args.interface),
        "workload": split_list(args.workload),
        "cache_state": split_list(args.cache_state),
    }
    if args.cluster_size:
        axes["cluster_size"] = split_list(args.cluster_size)
    for name, values in axes.items():
        if not values:
            raise SpecError(f"--{name.replace('_', '-')} is empty: give at least one value")
    fixed = {
        "size": args.size,
        "lazy_refcounts": args.lazy_refcounts,
        "payload": args.payload,
        "dd_mib": args.dd_mib,
        "dd_chunk_mib": args.dd_chunk_mib,
        "fs": args.fs,
        "compat": args.compat,
        "bonnie_size_mib": args.bonnie_size_mib,
        "bonnie_ram_mib": args.bonnie_ram_mib,
        "bonnie_files": args.bonnie_files,
        "fio_target": args.fio_target,
        "fio_size_mib": args.fio_size_mib,
        "fio_ios": args.fio_ios,
        "fio_fsync_ios": args.fio_fsync_ios,
    }
    return expand(axes, skip_format_mismatch=len(axes["format"]) > 1, **fixed)


def cmd_run(args: argparse.Namespace) -> int:

    if args.repeat < 1:
        raise SpecError(f"--repeat {args.repeat}: use 1 or more")
    cells, skipped = cells_from_args(args)
    check_numbers(args, cells)
    check_tools(cells)
    from harness.sweep import check_free_space

    check_free_space(args.work_dir, cells)  # too little is exit 3 before any image exists
    for note in skipped:
        _err(f"skipped: {note}")
    with hold(args.results_dir, args.work_dir):
        return _run_cells(args, cells)


def _run_cells(args: argparse.Namespace, cells: Any) -> int:
    from harness.session import run_cells

    result = run_cells(
        cells,
        repeat=args.repeat,
        accel=args.accel,
        work_dir=args.work_dir,
        results_dir=args.results_dir,
        boot_timeout_s=args.boot_timeout_s,
        workload_timeout_s=args.workload_timeout_s,
        mem_mib=args.mem_mib,
        smp=args.smp,
        keep_images=args.keep_images,
        start=args.start,
        progress=_err,
    )
    print(result.table, end="")
    print(f"records: {result.run_dir}")
    if result.failed_samples:
        _err(
            f"diskbench: {result.failed_samples} of {result.total_samples} samples failed; "
            "their reasons and console logs are in the table above"
        )
        return ExitCode.INFRA
    return ExitCode.OK


def check_numbers(args: argparse.Namespace, cells: Sequence[Cell]) -> None:
    """Every numeric flag and image size, before anything is created (see :mod:`harness.limits`)."""
    from harness import limits

    if hasattr(args, "mem_mib"):
        limits.check_guest(mem_mib=args.mem_mib, smp=args.smp)
    limits.check_deadline("--boot-timeout-s", args.boot_timeout_s)
    limits.check_deadline("--workload-timeout-s", args.workload_timeout_s, none_ok=False)
    limits.check_images(cells, args.work_dir)


def check_tools(cells: Sequence[Cell], recipe_dir: Path | None = None) -> None:
    """fio cells need fio on the guest's tools drive: a recipe without it is bad input, said
    before anything is built or booted (a gate's head guest is checked per sample instead)."""
    if not any(c.workload.name is Workload.FIO for c in cells):
        return
    from harness.guest import load_recipe
    from harness.paths import IMAGES_DIR

    recipe = load_recipe(recipe_dir or IMAGES_DIR, require_lock=False)
    if not any(Path(f).name == "fio" for f in recipe.tools_files):
        raise SpecError(
            "the fio workload needs fio on the guest's tools drive, and images/recipe.toml's "
            '[tools] files list none: add "/usr/bin/fio" there and pin its packages in '
            "[tools.packages] (`diskbench guest pin`), or run another workload"
        )


def cmd_guest(args: argparse.Namespace) -> int:
    from harness.guest import build_guest, pin_recipe

    if args.guest_command == "build":
        art = build_guest(log=_err, force=args.force)
        print(f"guest {art.recipe_hash}: kernel {art.kernel}, initrd {art.initrd}")
        for name, path in sorted(art.payloads.items()):
            print(f"payload {name}: {path}")
        return ExitCode.OK
    if args.guest_command == "pin":
        pin_recipe(log=_err)
        return ExitCode.OK
    raise SpecError("diskbench guest: give an action: build or pin")


def cmd_accel(args: argparse.Namespace) -> int:
    from harness.accel import choose_accel
    from harness.guest import build_guest

    art = build_guest(log=_err)
    choice = choose_accel(args.accel, art.kernel, art.initrd, warn=_err, use_cache=not args.no_cache)
    print(f"accel: {choice.accel} ({choice.reason})")
    return ExitCode.OK


def cmd_show(args: argparse.Namespace) -> int:
    from harness.records import load_record
    from harness.report import render

    paths: list[Path] = []
    for path in args.records:
        paths.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    print(render([load_record(p) for p in paths]), end="")
    return ExitCode.OK


def cmd_sweep(args: argparse.Namespace) -> int:
    from harness import presets, sweep
    from harness.policy import load_policy

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
    check_numbers(args, cells)
    check_tools(cells)
    directory = sweep.sweep_dir(args.results_dir, spec.name)
    recorded = {
        cid: sum(1 for s in rec["samples"] if args.keep_failures or s.get("status") == "ok")
        for cid, (_p, rec) in sweep.scan_records(directory).items()
    }
    accel_guess = "kvm" if args.accel == "kvm" else "tcg"
    print(
        sweep.describe_plan(
            plan, cells, repeat=repeat, only=args.only, shard=args.shard, recorded=recorded, accel=accel_guess
        ),
        end="",
        flush=True,
    )
    if not cells:
        print(f"shard {args.shard} of this sweep has no cell: nothing to run")
        return ExitCode.OK
    if args.dry_run:
        try:
            print(sweep.check_free_space(args.work_dir, cells))
        except HarnessError as exc:
            print(f"disk: NOT ENOUGH: {exc.message}")
        if recorded:
            print(f"records in {directory}: resumed if of this machine and subject, else set aside")
        return ExitCode.OK
    with hold(args.results_dir, args.work_dir):
        return _run_sweep(args, spec, policy, cells, directory, repeat)


def _run_sweep(
    args: argparse.Namespace, spec: Any, policy: Any, cells: Any, directory: Path, repeat: int
) -> int:
    from harness import presets, sweep
    from harness.progress import Progress
    from harness.report import render
    from harness.session import open_session

    _err(sweep.check_free_space(args.work_dir, cells))
    progress = Progress()
    session = open_session(
        caches={c.drive.cache for c in cells},
        repeat=repeat,
        accel=args.accel,
        work_dir=args.work_dir,
        results_dir=args.results_dir,
        boot_timeout_s=args.boot_timeout_s,
        workload_timeout_s=args.workload_timeout_s,
        start=args.start,
        progress=progress.note,
        run_id=f"sweep-{spec.name}",
        policy=policy,
    )
    for note in presets.record_probes(spec, directory, session.opts.work_dir):
        progress.note(note)
    cells, unsupported = sweep.drop_unsupported(cells, session.opts.work_dir)
    for cell_id, reason in unsupported:
        progress.note(f"excluded on this host: {cell_id}: {reason}")
    result = sweep.run_sweep(
        spec.name,
        cells,
        session,
        results_dir=args.results_dir,
        repeat=repeat,
        progress=progress,
        retry_failures=not args.keep_failures,
    )
    if result.records:
        print(render(result.records), end="")
    print(f"records: {result.directory} ({result.ran_samples} samples run, {result.skipped_samples} resumed)")
    if result.failed_samples:
        _err(
            f"diskbench: {result.failed_samples} of {result.total_samples} samples failed in "
            f"{len(result.failed_cells)} cell(s): {', '.join(result.failed_cells)}; "
            "their reasons and console logs are in the table above"
        )
        return ExitCode.INFRA
    return ExitCode.OK


def cmd_gate(args: argparse.Namespace) -> int:
    import datetime as dt

    from harness.compare import settings_from_args
    from harness.gate import SubjectSource, load_gate_spec, run_gate, settings_for

    spec = load_gate_spec(args.spec)
    check_numbers(args, [])
    for flag, value in (("--rounds", args.rounds), ("--max-rounds", args.max_rounds)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value}: use 1 or more")
    if args.budget_min is not None and args.budget_min <= 0:
        raise UsageError(f"--budget-min {args.budget_min}: use a positive number of minutes")
    given = settings_from_args(args)
    settings = settings_for(
        spec, given, metrics_given=args.metric is not None, min_effect_given=args.min_effect is not None
    )
    sources = []
    for label in ("base", "head"):
        qemu, qemu_img = getattr(args, f"{label}_qemu"), getattr(args, f"{label}_qemu_img")
        for flag, value in ((f"--{label}-qemu", qemu), (f"--{label}-qemu-img", qemu_img)):
            if value and not (Path(value).is_file() and os.access(value, os.X_OK)):
                raise UsageError(f"{flag} {value}: not an executable file: pass the path of a built binary")
        sources.append(
            SubjectSource(
                label=label,
                rev=getattr(args, label),
                qemu=str(Path(qemu).resolve()) if qemu else None,
                qemu_img=str(Path(qemu_img).resolve()) if qemu_img else None,
            )
        )
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in f"{args.base}..{args.head}")
    out = args.out or args.results_dir / "gate" / f"{safe}-{stamp}"
    result = run_gate(
        repo=args.repo,
        base=sources[0],
        head=sources[1],
        spec=spec,
        settings=settings,
        out_dir=out,
        work_dir=args.work_dir,
        accel=args.accel,
        budget_min=args.budget_min,
        rounds=args.rounds,
        max_rounds=args.max_rounds,
        default_policy=args.policy,
        build_command=args.build_command,
        seed=args.seed,
        canary=not args.no_canary,
        boot_timeout_s=args.boot_timeout_s,
        workload_timeout_s=args.workload_timeout_s,
        start=args.start,
        progress=_err,
    )
    print(result.markdown, end="")
    print(f"comparison: {result.out_dir / 'comparison.json'}")
    return result.exit_code


def cmd_merge(args: argparse.Namespace) -> int:
    from harness.merge import merge_dirs

    result = merge_dirs(args.dirs, args.out, allow_mixed=args.allow_mixed, log=_err)
    for slug, count in sorted(result.groups.items()):
        where = result.out_dir / slug if result.mixed else result.out_dir
        print(f"{count} records -> {where}")
    if result.mixed:
        _err(
            "merge: WARNING: the output holds MIXED identities, one subdirectory each: never compare across them"
        )
    return ExitCode.OK


def use_binaries(*, qemu: str | None, qemu_img: str | None) -> None:
    """``--qemu``/``--qemu-img``: the environment is how every part of the harness finds them."""
    for value, name in ((qemu, "DISKBENCH_QEMU"), (qemu_img, "DISKBENCH_QEMU_IMG")):
        if value:
            path = Path(value).expanduser().resolve()
            if not path.is_file() or not os.access(path, os.X_OK):
                raise SystemExit(
                    _usage_exit(f"--{name[10:].lower().replace('_', '-')} {value}: not an executable file")
                )
            os.environ[name] = str(path)


def _usage_exit(message: str) -> int:
    _err(f"diskbench: error: {message}: pass the path of a built binary")
    return ExitCode.USAGE


def _terminate(signum: int, _frame: object) -> None:
    # SIGTERM (a CI job cancelled, a runner stopping) takes the same path as
    # Ctrl-C, so every QEMU is shut down and the record of the sample in
    # flight is written before the harness exits.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    parser = build_parser()
    args = parser.parse_args(argv)
    use_binaries(qemu=args.qemu, qemu_img=args.qemu_img)
    handlers = {
        "run": cmd_run,
        "guest": cmd_guest,
        "accel": cmd_accel,
        "show": cmd_show,
        "sweep": cmd_sweep,
        "merge": cmd_merge,
        "compare": cmd_compare,
        "report": cmd_report,
        "gate": cmd_gate,
        "history": cmd_history,
    }
    if args.command not in handlers:
        parser.print_help()
        return ExitCode.USAGE
    try:
        return handlers[args.command](args)
    except HarnessError as exc:
        _err(f"diskbench: error: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        _err("diskbench: interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - no traceback reaches a user: one line and a log
        from harness.crash import report_crash

        return report_crash(exc, list(sys.argv[1:] if argv is None else argv))
