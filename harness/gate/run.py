"""A gate run: prepare both sides, open a session for each, the rounds, the canary, the outputs."""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.compare import ComparedCell, Kind, Settings, Verdict, build_comparison, render_markdown
from harness.compare.comparison import write_comparison
from harness.compare.document import Context, with_policy_reach
from harness.compare.model import Budget, Canary, Comparison, Side
from harness.compare.pointers import Pointers
from harness.errors import InfraError
from harness.files import write_text_atomic
from harness.gate.canary import host_canary, judge_canary
from harness.gate.checks import check_side, side_cells
from harness.gate.judge import Judge, decide_judge, guest_word_document, render_guest_word
from harness.gate.options import GateOptions
from harness.gate.reach import policy_reach
from harness.gate.rounds import (
    HEAD_DEADLINE_FACTOR,
    HEAD_DEADLINE_FLOOR_S,
    Clock,
    GateSide,
    Rounds,
    run_rounds,
)
from harness.gate.spec import GateSpec
from harness.gate.streams import GateStreams, prepare_streams
from harness.gate.subjects import Subject, SubjectSource, prepared_subjects, repo_toplevel, side_binaries
from harness.host import accounts
from harness.paths import qemu_cache_dir
from harness.record import Sample
from harness.sample.guest_sampler import paired_sampler
from harness.sample.pairing import Mode, Pairing, crossed_slots
from harness.subject.policy import Policy


@dataclass
class GateResult:
    out_dir: Path
    comparison: Comparison
    markdown: str
    cells: list[ComparedCell]

    @property
    def exit_code(self) -> int:
        from harness.compare.comparison import verdict_exit_code

        return verdict_exit_code(self.comparison)


def run_gate(
    *,
    repo: Path,
    sources: tuple[SubjectSource, SubjectSource],
    spec: GateSpec,
    settings: Settings,
    options: GateOptions,
    out_dir: Path,
    progress: Callable[[str], None] = lambda _m: None,
    pointers: Pointers | None = None,
) -> GateResult:
    """Prepare both sides (``sources``: base, head) of the git checkout ``repo``, run the cells
    interleaved, compare, write the outputs.

    ``options`` are decided (:meth:`GateOptions.decide`); a side that brings no QEMU of its own
    (``base.qemu``, a build) runs ``options.machine.binaries``.  ``pointers`` are the summary's
    links and command.
    """
    repo = repo_toplevel(repo)
    machine = options.machine
    started = time.monotonic()

    def vet(label: str, policy: Policy) -> None:
        # before the side is built: a pull request's policy cannot fill the runner's disk
        progress(
            check_side(
                spec,
                label,
                policy,
                work_dir=machine.work_dir,
                qemu_img=machine.binaries.qemu_img,
                max_disk_bytes=options.max_disk_bytes,
            )
        )

    with (
        prepared_subjects(
            repo,
            sources,
            default_policy=options.default_policy,
            build_command=options.build_command,
            log=progress,
            vet=vet,
        ) as subjects,
        # head's QEMU runs as a uid of its own: it cannot signal, trace or write base's while both run
        accounts.side_account() as head_uid,
    ):
        out_dir.mkdir(parents=True, exist_ok=True)
        sides = open_sides(subjects, spec, options, out_dir=out_dir, progress=progress, head_uid=head_uid)
        clock = Clock(options.budget_s, started, options.machine.workload_timeout_s)
        streams = replay_streams(spec, sides, out_dir=out_dir, progress=progress, clock=clock)
        guest_pairs(spec, sides)
        judge = decide_judge(
            settings,
            base_guest=sides["base"].session.guest.recipe_hash,
            head_guest=sides["head"].session.guest.recipe_hash,
        )
        settings = judge.settings
        for warning in judge.warnings:
            progress(f"gate: {warning}")
        canary_before = host_canary(machine.work_dir) if options.canary else []
        if canary_before:
            progress(f"gate: host canary before: {statistics.median(canary_before):.0f} MiB/s")
        played = run_rounds(
            spec,
            sides,
            settings,
            options,
            out_dir=out_dir,
            started=started,
            progress=progress,
            before=streams.stop,
        )
        results, canary = with_stream_notes(played.results, streams, sides), None
        if canary_before:
            canary_after = host_canary(machine.work_dir)
            progress(f"gate: host canary after: {statistics.median(canary_after):.0f} MiB/s")
            results, canary = judge_canary(results, canary_before, canary_after, settings)
        comparison = comparison_document(
            spec,
            sides,
            replace(played, results=results),
            judge=judge,
            options=options,
            canary=canary,
            elapsed_s=time.monotonic() - started,
            pointers=pointers,
        )
        markdown = render_markdown(comparison) + render_guest_word(comparison.guest_word)
        write_comparison(out_dir / "comparison.json", comparison)
        write_text_atomic(out_dir / "summary.md", markdown)
        return GateResult(out_dir=out_dir, comparison=comparison, markdown=markdown, cells=results)


def open_sides(
    subjects: Sequence[Subject],
    spec: GateSpec,
    options: GateOptions,
    *,
    out_dir: Path,
    progress: Callable[[str], None],
    head_uid: int | None = None,
) -> dict[str, GateSide]:
    """Each side's cells under its own policy, and a session on its guest and QEMU
    (its own binaries, else ``options.machine``'s), its records under ``out_dir``; head's
    binaries run as ``head_uid`` (:func:`harness.host.accounts.side_account`), base's as the
    QEMU account.

    Both sides must get the same accelerator: a gate never compares kvm with tcg.
    """
    from harness.rounds.session import SessionOptions, open_session

    # every side's QEMU first: a pin no suite offers is bad input before any guest starts
    qemu_cache = options.qemu_cache or qemu_cache_dir()
    runner = options.machine.binaries
    side_qemu = {s.label: side_binaries(s, runner, qemu_cache, progress) for s in subjects}
    if "head" in side_qemu:
        side_qemu["head"] = replace(side_qemu["head"], runs_as=head_uid)
    sides: dict[str, GateSide] = {}
    for subject in subjects:
        cells = side_cells(spec, subject.label, subject.policy)
        machine = replace(options.machine, results_dir=out_dir, binaries=side_qemu[subject.label])
        session = open_session(
            {c.drive.cache for c in cells.values()},
            SessionOptions(machine=machine, repeat=1),
            progress=progress,
            policy=subject.policy,
            recipe_dir=subject.recipe_dir,
            run_id=subject.label,
        )
        session.subject = session.subject.with_values(rev=subject.rev, commit=subject.commit)
        sides[subject.label] = GateSide(subject=subject, session=session, cells=cells)
    if sides["base"].session.opts.accel != sides["head"].session.opts.accel:
        raise InfraError("base and head got different accelerators: run the gate with --accel kvm or tcg")
    return sides


def replay_streams(
    spec: GateSpec,
    sides: Mapping[str, GateSide],
    *,
    out_dir: Path,
    progress: Callable[[str], None],
    clock: Clock | None = None,
) -> GateStreams:
    """Base's stream of every replay cell, handed to both sides' samples, ``replay_samples`` a round;
    the recordings within ``clock``'s budget."""
    names = spec.replay_cells
    streams = prepare_streams(
        sides,
        names,
        passes=spec.replay_passes,
        log_root=out_dir / "logs" / "streams",
        progress=progress,
        together=spec.replay_together,
        pairing=spec.replay_pairing,
        clock=clock,
    )
    for side in sides.values():
        side.samplers.update(streams.samplers)
        side.together.update(streams.together)
        side.per_round.update(dict.fromkeys(names, spec.replay_samples))
    return streams


def guest_pairs(
    spec: GateSpec, sides: Mapping[str, GateSide], slots: Sequence[tuple[int, int]] | None = None
) -> None:
    """The guest cells whose pair of samples runs together: one :class:`Pairing` each, shared by
    both sides' samplers (their workloads started at the same moment, each guest on a CPU of its
    own swapped with the other's, or both on one CPU: ``spec.guest_pairing``).  Crossed pairs take
    the CPU pairs of ``slots`` (:func:`~harness.sample.pairing.crossed_slots`, at most
    ``spec.guest_pairs_at_once``) in turn: where there are several, pairs on different CPUs run at
    the same moment (:func:`harness.gate.rounds.run_rounds`)."""
    if slots is None:
        slots = crossed_slots()
    if spec.guest_pairs_at_once is not None:
        slots = slots[: spec.guest_pairs_at_once]
    for k, name in enumerate(spec.guest_pairs):
        if spec.guest_pairing is Mode.CROSSED and slots:
            pairing = Pairing(mode=spec.guest_pairing, cross=slots[k % len(slots)])
        else:
            pairing = Pairing(mode=spec.guest_pairing)
        for side in sides.values():
            side.samplers[name] = paired_sampler(pairing)
            side.together[name] = pairing
            if spec.guest_samples > 1:
                side.per_round[name] = spec.guest_samples


def with_stream_notes(
    results: Sequence[ComparedCell], streams: GateStreams, sides: Mapping[str, GateSide]
) -> list[ComparedCell]:
    """``results`` with the structural change of each replay cell whose head records another stream;
    a cell whose head recording ran past its cap is ``changed`` with that reason (a regression stays
    one), one whose head recording ran past its deadline ``head-timed-out``."""
    head = sides["head"].cells
    by_id = {head[name].id: note for name, note in streams.notes.items()}
    over = {head[name].id: why for name, why in streams.over_cap.items()}
    late = {head[name].id: deadline for name, deadline in streams.timed_out.items()}
    out = []
    for r in results:
        if r.cell_id in by_id:
            r = replace(r, note="; ".join(n for n in (r.note, by_id[r.cell_id]) if n))
        if r.cell_id in late:
            r = replace(
                r,
                verdict=Verdict.REGRESSION,
                kind=Kind.HEAD_TIMED_OUT,
                reason=(
                    f"head's recording of its stream ran past its deadline of {late[r.cell_id]:.0f} s "
                    f"({HEAD_DEADLINE_FACTOR:g} x base's + {HEAD_DEADLINE_FLOOR_S:g} s, within the budget)"
                ),
            )
        elif r.cell_id in over:
            if r.verdict is not Verdict.REGRESSION:
                r = replace(r, verdict=Verdict.CHANGED, kind=Kind.COUNTER, reason=over[r.cell_id])
            r = replace(r, note="; ".join(n for n in (r.note, over[r.cell_id]) if n))
        out.append(r)
    return out


def comparison_document(
    spec: GateSpec,
    sides: Mapping[str, GateSide],
    played: Rounds,
    *,
    judge: Judge,
    options: GateOptions,
    canary: Canary | None,
    elapsed_s: float,
    pointers: Pointers | None = None,
) -> Comparison:
    """The comparison of a gate: the verdicts (``played.results``, decided by ``played.settings``),
    both sides, the canary and the budget used; with guests that differ, the guest's own word
    (``guest_word``) and a warning that says so."""
    settings, results = played.settings, played.results
    comparison = build_comparison(
        results,
        settings=settings,
        base=_describe(sides["base"]),
        head=_describe(sides["head"]),
        machine=sides["head"].session.machine,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        context=Context(
            warnings=judge.warnings,
            pointers=_with_seed(pointers, options.seed),
            canary=canary,
            budget=Budget(
                budget_min=options.budget_s / 60,
                used_min=round(elapsed_s / 60, 2),
                rounds=options.rounds,
                max_rounds=options.max_rounds,
                stopped=played.stopped,
                seed=options.seed,
                spec=spec.source,
                accel=sides["base"].session.opts.accel,
            ),
        ),
    )
    pairs = [
        (
            gc.name,
            _samples(sides["base"], gc.name),
            _samples(sides["head"], gc.name),
        )
        for gc in spec.cells
    ]
    comparison = replace(comparison, guest_word=guest_word_document(judge, pairs))
    reach = policy_reach(spec, sides["base"].subject.policy, sides["head"].subject.policy)
    return with_policy_reach(comparison, results, reach)


def _with_seed(pointers: Pointers | None, seed: int) -> Pointers | None:
    """The command line with the run's seed (drawn when none was given): the same order and
    bootstrap again."""
    if pointers is None or not pointers.reproduce or "--seed" in pointers.reproduce:
        return pointers
    return replace(pointers, reproduce=(*pointers.reproduce, "--seed", str(seed)))


def _samples(side: GateSide, name: str) -> tuple[Sample, ...]:
    record = side.records.get(name)
    return record.samples if record is not None else ()


def _describe(side: GateSide) -> Side:
    return replace(side.subject.describe(), subject=side.session.subject, machine=side.session.machine)
