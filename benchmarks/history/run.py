"""The heavy part of the history suite: one real run of every cell, once per commit.

:func:`setup_cache` is shared by every benchmark class of the suite (asv
keys a setup_cache by its function, so it runs once per commit and
environment); it returns the figures of every cell, and the ``track_*``
benchmarks only look them up (:func:`history.layout.lookup`).

Before anything runs it checks, and refuses with the reason:

- the subject in the environment is the commit asv says it measures
  (``asv_subject.py install`` wrote it);
- the asv machine name carries the accelerator (``HOST-kvm``, ``HOST-tcg``:
  ``$DISKBENCH_ASV_MACHINE``, set by ``diskbench history``), and it is the
  accelerator that really works here, so a TCG point never lands in a KVM
  series.

The QEMU the commit's policy pins (``[qemu] version``) is the one its cells run, fetched
when needed (:func:`pinned_binaries`): a commit that moves the pin is measured on the new
build, and its records name it.

Records of the run (with each sample's logs) go to
``$DISKBENCH_HISTORY_RECORDS/MACHINE/COMMIT/sweeps/history/``, else under
the environment; they are the sweep's checkpoint, so an interrupted commit
resumes where it stopped.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness import sweep
from history import layout

# A large matrix takes hours under TCG; asv's default timeout is 60 s.
SETUP_TIMEOUT_S = 8 * 3600.0
SUBJECT_DIR = "diskbench-subject"


class HistoryRefused(RuntimeError):
    """The suite will not run here as asked: the message says why and what to do."""


def log(message: str) -> None:
    print(f"history: {message}", file=sys.stderr, flush=True)


def env_dir(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("ASV_ENV_DIR") or sys.prefix)


def load_subject(environ: Mapping[str, str]) -> tuple[Path, dict[str, Any]]:
    """The subject ``asv_subject.py install`` copied into the environment, checked against the commit."""
    directory = env_dir(environ) / SUBJECT_DIR
    path = directory / "subject.json"
    try:
        subject = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HistoryRefused(
            f"no subject in {directory}: the asv config's install_command must run "
            "benchmarks/asv_subject.py install (see asv.conf.json)"
        ) from None
    commit = environ.get("ASV_COMMIT")
    if commit and subject.get("commit") != commit:
        raise HistoryRefused(
            f"the subject in {directory} is of commit {subject.get('commit')}, asv measures {commit}: "
            "reinstall the environment (asv run --environment ... or remove it)"
        )
    return directory, subject


def machine_accel(environ: Mapping[str, str]) -> tuple[str, str]:
    machine = environ.get(layout.ENV_MACHINE, "").strip()
    if not machine:
        raise HistoryRefused(
            f"${layout.ENV_MACHINE} is not set: run the suite with `diskbench history`, or set it to the "
            "asv machine name (HOST-kvm or HOST-tcg) given to asv run --machine"
        )
    accel = layout.accel_of_machine(machine)
    if accel is None:
        raise HistoryRefused(
            f"asv machine {machine!r} does not end in -kvm or -tcg: results of the two accelerators "
            "must never share a series; register the machine as HOST-kvm or HOST-tcg"
        )
    return machine, accel


def moved(*names: str) -> Any:
    """The first of ``names`` that the measured commit's harness has: its modules moved into
    packages at one commit, and history measures commits from before that too."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise
    raise ImportError(f"none of {', '.join(names)} in this commit's harness")


def setup_cache() -> dict[str, Any]:
    """Run every cell of the history matrix, the policy's cells and the linked images; return their
    figures."""
    from harness.guest import build_guest
    from harness.progress import Progress
    from harness.report import render

    open_session = moved("harness.rounds.session", "harness.session").open_session
    choose_accel = moved("harness.sample.accel", "harness.accel").choose_accel

    environ = dict(os.environ)
    machine, wanted = machine_accel(environ)
    subject_dir, subject = load_subject(environ)
    commit = str(subject.get("commit") or environ.get("ASV_COMMIT") or "unknown")
    for key, variable in (("qemu", "DISKBENCH_QEMU"), ("qemu_img", "DISKBENCH_QEMU_IMG")):
        if subject.get(key):
            # a commit's harness from before binaries were values reads them from here
            os.environ[variable] = str(subject[key])
            log(f"{variable}={subject[key]}")
    spec = sweep.load_spec(layout.spec_path(environ))
    repeat = layout.repeat_of(spec, environ)
    policy = load_policy(subject_dir, subject)
    binaries = pinned_binaries(policy, subject, binaries_args(os.environ))
    recipe = subject_dir / subject["recipe"] if subject.get("recipe") else None
    guest = build_guest(recipe_dir=recipe, log=log) if recipe else build_guest(log=log)
    qemu = {"qemu": binaries["binaries"].qemu} if binaries else {}
    choice = choose_accel("auto", guest.kernel, guest.initrd, warn=log, **qemu)
    if choice.accel != wanted:
        raise HistoryRefused(
            f"asv machine {machine!r} says {wanted}, but this host runs guests under {choice.accel} "
            f"({choice.reason}): use the machine name {machine.rsplit('-', 1)[0]}-{choice.accel}"
        )

    plan = sweep.expand_spec(spec, policy=policy) if policy is not None else sweep.expand_spec(spec)
    index: dict[str, dict[str, dict[tuple[str, ...], str | None]]] = {
        "matrix": {},
        "policy": {},
        "linked": {},
    }
    cells: dict[str, Any] = {}
    for group in layout.matrix_groups(spec):
        slot = index["matrix"].setdefault(group.workload, {})
        for key, values in group.combinations():
            cell = layout.matrix_cell(spec, policy, group.workload, values)
            slot[key] = cell.id if cell is not None else None
            if cell is not None:
                cells.setdefault(cell.id, cell)
    for group in layout.policy_groups(spec):
        slot = index["policy"].setdefault(group.workload, {})
        for key, values in group.combinations():
            cell = layout.policy_cell(spec, policy, group.workload, values)
            slot[key] = cell.id
            cells.setdefault(cell.id, cell)
    for group in layout.linked_groups(spec):
        slot = index["linked"].setdefault(group.workload, {})
        for key, values in group.combinations():
            linked = layout.linked_cell(spec, policy, group.workload, values)
            slot[key] = linked.id if linked is not None else None
            if linked is not None:
                cells.setdefault(linked.id, linked)
    log(
        f"commit {commit[:12]} on {machine}: {len(plan.cells)} matrix cells of {spec.source} and the "
        f"policy's and the linked images' cells: {len(cells)} distinct cells x {repeat} repeats"
    )

    records_root = Path(environ.get(layout.ENV_RECORDS) or env_dir(environ) / "diskbench-records")
    results_dir = records_root / machine / commit
    work_dir = Path(environ.get("DISKBENCH_WORK_DIR") or env_dir(environ) / "diskbench-work")
    progress = Progress(bar=False)
    caches = {c.drive.cache for c in cells.values()}
    extra: dict[str, Any] = {"policy": policy} if policy is not None else {}
    try:
        from harness.rounds.session import MachineOptions, SessionOptions
    except ImportError:
        # a commit's harness from before options were values takes them as keywords
        session = open_session(
            caches=caches,
            repeat=repeat,
            accel=choice.accel,
            work_dir=work_dir,
            results_dir=results_dir,
            progress=progress.note,
            run_id="history",
            guest=guest,
            **binaries,
            **extra,
        )
    else:
        # the host disk model `diskbench history --host-disk` put the work dir on: the records say it
        disk = environ.get("DISKBENCH_HOST_DISK", "").strip()
        on_model = {"host_disk": disk} if disk and "host_disk" in MachineOptions.__dataclass_fields__ else {}
        where = MachineOptions(
            binaries=binaries["binaries"],
            work_dir=work_dir,
            results_dir=results_dir,
            accel=choice.accel,
            start="cold",
            **on_model,
        )
        session = open_session(
            caches,
            SessionOptions(where, repeat=repeat),
            progress=progress.note,
            run_id="history",
            guest=guest,
            **extra,
        )
    to_run, unsupported = sweep.drop_unsupported(list(cells.values()), session.opts.work_dir, **binaries)
    for cell_id, reason in unsupported:
        log(f"not run on this host (a gap in the graphs): {cell_id}: {reason}")
    result = sweep.run_sweep(
        "history", to_run, session, results_dir=results_dir, repeat=repeat, progress=progress
    )
    if result.records:
        print(render(result.records), file=sys.stderr, end="", flush=True)
    figures: dict[str, dict[str, float]] = {}
    for record in result.records:
        workload = record.cell.workload_name
        figures[record.cell_id] = layout.cell_figures(record, layout.workload_figures(workload, spec.params))
    if result.failed_cells:
        log(
            f"failed cells (gaps in the graphs): {', '.join(result.failed_cells)}; records in {result.directory}"
        )
    log(f"records: {result.directory}")
    return {
        "machine": machine,
        "accel": choice.accel,
        "commit": commit,
        "records": str(result.directory),
        "cells": figures,
        **index,
    }


setup_cache.timeout = SETUP_TIMEOUT_S  # type: ignore[attr-defined]


def binaries_args(environ: Mapping[str, str]) -> dict[str, Any]:
    """``{"binaries": Binaries(...)}`` from the environment, for a commit's harness that takes them as a
    value; ``{}`` for one from before, which reads the environment itself."""
    try:
        Binaries = moved("harness.subject.binaries", "harness.binaries").Binaries
    except ImportError:
        return {}
    # the names on PATH when no variable names others, spelled here: harnesses of different
    # commits call that default differently (or not at all)
    return {
        "binaries": Binaries(
            qemu=environ.get("DISKBENCH_QEMU") or "qemu-system-x86_64",
            qemu_img=environ.get("DISKBENCH_QEMU_IMG") or "qemu-img",
        )
    }


def pinned_binaries(policy: Any, subject: Mapping[str, Any], binaries: dict[str, Any]) -> dict[str, Any]:
    """The QEMU build the commit's policy pins (``[qemu] version``), fetched into the QEMU cache
    when needed, as the gate runs a side's pin; else ``binaries`` (the runner's, or the QEMU
    config's build of the commit, which is what that history measures)."""
    pin = getattr(policy, "qemu", None)
    if subject.get("qemu") or not binaries or pin is None or not pin.pinned:
        return binaries
    from harness.debian.qemu import QemuCache
    from harness.paths import qemu_cache_dir

    build = QemuCache(qemu_cache_dir()).get(pin.version)
    build.check()
    log(f"the commit's policy pins QEMU {pin.version}: {build.describe()}")
    return {"binaries": build.binaries()}


def load_policy(subject_dir: Path, subject: Mapping[str, Any]) -> Any:
    """The commit's policy, or None for a commit from before ``policy.toml``."""
    if not subject.get("policy"):
        return None
    try:
        harness_load_policy = moved("harness.subject.policy", "harness.policy").load_policy
    except ImportError:
        log("this commit's harness has no storage policy: its cells use the harness's defaults")
        return None
    return harness_load_policy(subject_dir / str(subject["policy"]))
