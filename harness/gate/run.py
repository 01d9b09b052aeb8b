"""A gate run: prepare both sides, open a session for each, the rounds, the canary, the outputs."""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.compare import CellResult, Settings, build_comparison, render_markdown
from harness.compare.pointers import Pointers
from harness.errors import InfraError
from harness.files import write_json_atomic, write_text_atomic
from harness.gate.canary import host_canary, judge_canary
from harness.gate.checks import check_side, side_cells
from harness.gate.judge import Judge, decide_judge, guest_word_document, render_guest_word
from harness.gate.options import GateOptions
from harness.gate.rounds import GateSide, Rounds, run_rounds
from harness.gate.spec import GateSpec
from harness.gate.streams import GateStreams, prepare_streams
from harness.gate.subjects import Subject, SubjectSource, prepared_subjects, repo_toplevel
from harness.sample.guest_sampler import paired_sampler
from harness.sample.pairing import Pairing
from harness.subject.binaries import ON_PATH, Binaries
from harness.subject.policy import Policy
from harness.sweep.limits import MAX_DISK_BYTES


@dataclass
class GateResult:
    out_dir: Path
    document: dict[str, Any]
    markdown: str
    cells: list[CellResult]

    @property
    def exit_code(self) -> int:
        from harness.compare.comparison import verdict_exit_code

        return verdict_exit_code(self.document)


def run_gate(
    *,
    repo: Path,
    base: SubjectSource,
    head: SubjectSource,
    spec: GateSpec,
    settings: Settings,
    out_dir: Path,
    work_dir: Path,
    accel: str = "auto",
    budget_min: float | None = None,
    rounds: int | None = None,
    max_rounds: int | None = None,
    default_policy: Path | None = None,
    build_command: str | None = None,
    seed: int | None = None,
    canary: bool = True,
    boot_timeout_s: float | None = None,
    workload_timeout_s: float = 1800.0,
    progress: Callable[[str], None] = lambda _m: None,
    start: str = "auto",
    binaries: Binaries = ON_PATH,
    max_disk_bytes: int = MAX_DISK_BYTES,
    pointers: Pointers | None = None,
) -> GateResult:
    """Prepare both sides, run the cells interleaved, compare, write the outputs.

    Values left None come from ``spec`` (see :meth:`GateOptions.decide`).  A side
    that brings no QEMU of its own (``base.qemu``, a build) runs ``binaries``.
    """
    repo = repo_toplevel(repo)
    options = GateOptions.decide(
        spec,
        rounds=rounds,
        max_rounds=max_rounds,
        budget_min=budget_min,
        seed=seed,
        default_policy=default_policy,
        build_command=build_command,
        canary=canary,
        accel=accel,
        start=start,
        boot_timeout_s=boot_timeout_s,
        workload_timeout_s=workload_timeout_s,
        max_disk_bytes=max_disk_bytes,
    )
    return gate_revisions(
        repo=repo,
        sources=(base, head),
        spec=spec,
        settings=settings,
        options=options,
        out_dir=out_dir,
        work_dir=work_dir,
        progress=progress,
        binaries=binaries,
        pointers=pointers,
    )


def gate_revisions(
    *,
    repo: Path,
    sources: tuple[SubjectSource, SubjectSource],
    spec: GateSpec,
    settings: Settings,
    options: GateOptions,
    out_dir: Path,
    work_dir: Path,
    progress: Callable[[str], None] = lambda _m: None,
    binaries: Binaries = ON_PATH,
    pointers: Pointers | None = None,
) -> GateResult:
    """The gate of ``sources`` (base, head) in the git checkout ``repo``, with ``options`` decided;
    ``binaries`` for a side that brings none; ``pointers`` for the summary's links and command."""
    # every cell x gated metric is one test of the family that shares alpha
    settings = replace(settings, comparisons=len(spec.cells) * len(settings.metrics))
    started = time.monotonic()

    def vet(label: str, policy: Policy) -> None:
        # before the side is built: a pull request's policy cannot fill the runner's disk
        progress(
            check_side(
                spec,
                label,
                policy,
                work_dir=work_dir,
                qemu_img=binaries.qemu_img,
                max_disk_bytes=options.max_disk_bytes,
            )
        )

    with prepared_subjects(
        repo,
        sources,
        default_policy=options.default_policy,
        build_command=options.build_command,
        log=progress,
        vet=vet,
    ) as subjects:
        out_dir.mkdir(parents=True, exist_ok=True)
        sides = open_sides(
            subjects, spec, options, out_dir=out_dir, work_dir=work_dir, progress=progress, binaries=binaries
        )
        streams = replay_streams(spec, sides, out_dir=out_dir, progress=progress)
        guest_pairs(spec, sides)
        judge = decide_judge(
            settings,
            base_guest=sides["base"].session.guest.recipe_hash,
            head_guest=sides["head"].session.guest.recipe_hash,
        )
        settings = replace(judge.settings, comparisons=len(spec.cells) * len(judge.settings.metrics))
        for warning in judge.warnings:
            progress(f"gate: {warning}")
        canary_before = host_canary(work_dir) if options.canary else []
        if canary_before:
            progress(f"gate: host canary before: {statistics.median(canary_before):.0f} MiB/s")
        played = run_rounds(
            spec, sides, settings, options, out_dir=out_dir, started=started, progress=progress
        )
        results, canary_doc = with_stream_notes(played.results, streams.notes, sides), None
        if canary_before:
            canary_after = host_canary(work_dir)
            progress(f"gate: host canary after: {statistics.median(canary_after):.0f} MiB/s")
            results, canary_doc = judge_canary(results, canary_before, canary_after, settings)
        document = comparison_document(
            spec,
            sides,
            results,
            settings=settings,
            options=options,
            played=played,
            canary=canary_doc,
            elapsed_s=time.monotonic() - started,
            judge=judge,
            pointers=pointers,
        )
        markdown = render_markdown(document) + render_guest_word(document.get("guest_word"))
        write_json_atomic(out_dir / "comparison.json", document)
        write_text_atomic(out_dir / "summary.md", markdown)
        return GateResult(out_dir=out_dir, document=document, markdown=markdown, cells=results)


def open_sides(
    subjects: Sequence[Subject],
    spec: GateSpec,
    options: GateOptions,
    *,
    out_dir: Path,
    work_dir: Path,
    progress: Callable[[str], None],
    binaries: Binaries = ON_PATH,
) -> dict[str, GateSide]:
    """Each side's cells under its own policy, and a session on its guest and QEMU
    (its own binaries, else ``binaries``).

    Both sides must get the same accelerator: a gate never compares kvm with tcg.
    """
    from harness.rounds.session import open_session

    sides: dict[str, GateSide] = {}
    for subject in subjects:
        cells = side_cells(spec, subject.label, subject.policy)
        session = open_session(
            caches={c.drive.cache for c in cells.values()},
            repeat=1,
            accel=options.accel,
            work_dir=work_dir,
            results_dir=out_dir,
            boot_timeout_s=options.boot_timeout_s,
            workload_timeout_s=options.workload_timeout_s,
            start=options.start,
            progress=progress,
            policy=subject.policy,
            recipe_dir=subject.recipe_dir,
            run_id=subject.label,
            binaries=subject.binaries(binaries),
        )
        session.subject["rev"] = subject.rev
        session.subject["commit"] = subject.commit
        sides[subject.label] = GateSide(subject=subject, session=session, cells=cells)
    if sides["base"].session.opts.accel != sides["head"].session.opts.accel:
        raise InfraError("base and head got different accelerators: run the gate with --accel kvm or tcg")
    return sides


def replay_streams(
    spec: GateSpec, sides: Mapping[str, GateSide], *, out_dir: Path, progress: Callable[[str], None]
) -> GateStreams:
    """Base's stream of every replay cell, handed to both sides' samples, ``replay_samples`` a round."""
    names = spec.replay_cells
    streams = prepare_streams(
        sides,
        names,
        passes=spec.replay_passes,
        log_root=out_dir / "logs" / "streams",
        progress=progress,
        together=spec.replay_together,
    )
    for side in sides.values():
        side.samplers.update(streams.samplers)
        side.together.update(streams.together)
        side.per_round.update(dict.fromkeys(names, spec.replay_samples))
    return streams


def guest_pairs(spec: GateSpec, sides: Mapping[str, GateSide]) -> None:
    """The guest cells whose pair of samples runs together: one :class:`Pairing` each, shared by
    both sides' samplers (both guests on one CPU, their workloads started at the same moment)."""
    for name in spec.guest_pairs:
        pairing = Pairing()
        for side in sides.values():
            side.samplers[name] = paired_sampler(pairing)
            side.together[name] = pairing
            if spec.guest_samples > 1:
                side.per_round[name] = spec.guest_samples


def with_stream_notes(
    results: Sequence[CellResult], notes: Mapping[str, str], sides: Mapping[str, GateSide]
) -> list[CellResult]:
    """``results`` with the structural change of each replay cell whose head records another stream."""
    by_id = {sides["head"].cells[name].id: note for name, note in notes.items()}
    return [
        replace(r, note="; ".join(n for n in (r.note, by_id[r.cell_id]) if n)) if r.cell_id in by_id else r
        for r in results
    ]


def comparison_document(
    spec: GateSpec,
    sides: Mapping[str, GateSide],
    results: Sequence[CellResult],
    *,
    settings: Settings,
    options: GateOptions,
    played: Rounds,
    canary: dict[str, Any] | None,
    elapsed_s: float,
    judge: Judge | None = None,
    pointers: Pointers | None = None,
) -> dict[str, Any]:
    """``comparison.json`` of a gate: the verdicts, both sides, the canary and the budget used;
    with guests that differ, the guest's own word (``guest_word``) and a warning that says so."""
    judge = judge or Judge(settings=settings)
    document = build_comparison(
        results,
        settings=settings,
        base=_describe(sides["base"]),
        head=_describe(sides["head"]),
        machine=sides["head"].session.machine,
        canary=canary,
        budget={
            "budget_min": options.budget_s / 60,
            "used_min": round(elapsed_s / 60, 2),
            "rounds": options.rounds,
            "max_rounds": options.max_rounds,
            "stopped": played.stopped,
            "seed": options.seed,
            "spec": spec.source,
            "accel": sides["base"].session.opts.accel,
        },
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        warnings=judge.warnings,
        pointers=_with_seed(pointers, options.seed),
    )
    pairs = [
        (
            gc.name,
            sides["base"].records.get(gc.name, {}).get("samples", []),
            sides["head"].records.get(gc.name, {}).get("samples", []),
        )
        for gc in spec.cells
    ]
    word = guest_word_document(judge, pairs)
    if word is not None:
        document["guest_word"] = word
    return document


def _with_seed(pointers: Pointers | None, seed: int) -> Pointers | None:
    """The command line with the run's seed (drawn when none was given): the same order and
    bootstrap again."""
    if pointers is None or not pointers.reproduce or "--seed" in pointers.reproduce:
        return pointers
    return replace(pointers, reproduce=(*pointers.reproduce, "--seed", str(seed)))


def _describe(side: GateSide) -> dict[str, Any]:
    return {**side.subject.describe(), "subject": side.session.subject, "machine": side.session.machine}
