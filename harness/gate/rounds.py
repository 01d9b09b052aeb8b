"""The gate's rounds: every cell on base and head, interleaved, until clear, ``max_rounds`` or the budget.

Every round runs each cell once for base and once for head, in the order
:func:`harness.sweep.rounds.round_order` draws from the run's seed, so drift
of the host (thermal, a neighbour, the page cache) hits both sides alike.
After the first ``rounds``, only cells whose result is not yet clear
(:func:`harness.compare.needs_more_rounds`) get more; :func:`stop_before`
decides when no further round runs.

The budget holds from the first round: no sample waits past what is left of
it, and a round that would not fit does not start.  A head sample's workload
deadline follows from base's own times (:func:`head_deadline`); a head that
runs past it ends the rounds, and its cell is a regression of its own kind
(``head-timed-out``).  A cell the budget left without samples on both sides
is an error (``missing``), never "unchanged".
"""

from __future__ import annotations

import functools
import random
import statistics
import threading
import time
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.compare import (
    ComparedCell,
    Family,
    Kind,
    Settings,
    Verdict,
    flatten_cell,
    judge_family,
    needs_more_rounds,
)
from harness.gate.options import GateOptions
from harness.gate.spec import GateSpec
from harness.gate.subjects import SIDES, Subject
from harness.host import proc
from harness.record import CellInfo, Record, Sample, gate_records
from harness.sample.guest_sampler import Sampler
from harness.sample.replay.replay import Pairing
from harness.spec import Cell
from harness.sweep.rounds import round_order

if typing.TYPE_CHECKING:
    from harness.rounds.session import Session

# what one sample is guessed to take before any has run
FIRST_SAMPLE_S = 60.0
# a head sample's workload deadline: this many times base's median workload time of the cell,
# plus a floor (never above the run's --workload-timeout-s, nor past the budget)
HEAD_DEADLINE_FACTOR = 10.0
HEAD_DEADLINE_FLOOR_S = 60.0


def head_deadline(base_workload_s: Sequence[float], *, limit_s: float) -> float:
    """How long a head sample's workload may take: ``10 x`` base's median plus 60 s, at most
    ``limit_s``; ``limit_s`` while base has no time of its own for the cell."""
    if not base_workload_s:
        return limit_s
    return min(limit_s, HEAD_DEADLINE_FACTOR * statistics.median(base_workload_s) + HEAD_DEADLINE_FLOOR_S)


#: the errors of a sample that ran past its deadline: a guest's (its ready line, its workload's start
#: or its report did not come in time) and a replay's (its qemu-io was still running)
TIMEOUT_ERRORS = ("GuestTimeout", "ReplayTimeout")


def timed_out(sample: Sample) -> bool:
    """Whether ``sample`` failed because it ran past a deadline (a head throttled to a byte a second
    does not even boot; its replay never ends)."""
    return not sample.ok and sample.error_type in TIMEOUT_ERRORS


@dataclass
class GateSide:
    """One side, opened: its subject, its session, its cells by gate name and their records."""

    subject: Subject
    session: Session
    cells: dict[str, Cell]
    records: dict[str, Record] = field(default_factory=dict)
    #: how a cell's samples are taken where not as its measure says (a replay cell: base's stream)
    samplers: dict[str, Sampler] = field(default_factory=dict)
    #: samples per round of a cell where not one (cheap replay cells take several, see _play_pairs)
    per_round: dict[str, int] = field(default_factory=dict)
    #: cells whose pair of samples runs at the same moment: what both sides' samples share
    together: dict[str, Pairing] = field(default_factory=dict)


@dataclass(frozen=True)
class Clock:
    """The time a sample may take: the run's workload timeout, within what is left of the budget."""

    budget_s: float
    started: float
    workload_timeout_s: float

    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def limit_s(self) -> float:
        """A base sample's deadline now (and a head's while base has no time of its own)."""
        return min(self.workload_timeout_s, self.left_s())


@dataclass(frozen=True)
class Stop:
    """Why no further round runs; ``over_budget`` when cells stay unclear for lack of time."""

    reason: str
    over_budget: bool = False
    #: cells whose head ran past its deadline before the rounds (its recording), with that deadline
    head_timed_out: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Rounds:
    """The comparison after the last round, the settings it was judged with (the family's size
    of tests made, :class:`~harness.compare.rules.Family`), and why the rounds stopped."""

    results: list[ComparedCell]
    stopped: str
    settings: Settings


def stop_before(
    number: int,
    pending: Sequence[str],
    *,
    max_rounds: int,
    budget_s: float,
    elapsed_s: float,
    sample_s: Sequence[float],
) -> Stop | None:
    """Whether round ``number`` (one past the first rounds) is not to run for the cells ``pending``.

    A round is run only while some cell is unclear, ``max_rounds`` is not
    reached and the round, guessed from the samples so far, fits the budget.
    """
    if not pending:
        return Stop("every cell clear")
    if number > max_rounds:
        return Stop(f"max_rounds {max_rounds} reached")
    per_round_s = len(SIDES) * len(pending) * (statistics.mean(sample_s) if sample_s else FIRST_SAMPLE_S)
    if elapsed_s + per_round_s > budget_s:
        return Stop(f"budget of {budget_s / 60:.0f} min reached", over_budget=True)
    return None


def run_rounds(
    spec: GateSpec,
    sides: Mapping[str, GateSide],
    settings: Settings,
    options: GateOptions,
    *,
    out_dir: Path,
    started: float,
    progress: Callable[[str], None],
    before: Stop | None = None,
) -> Rounds:
    """Run the first rounds of every cell, then more of the unclear ones; compare after each.

    Every round, the first ones included, starts only within the budget; a head that
    times out ends the rounds.  ``before``: why none is to run at all (the recordings of the
    replay cells' streams ended the gate)."""
    rng = random.Random(options.seed)
    names = [gc.name for gc in spec.cells]
    tally = _Tally(rounds_of=dict.fromkeys(names, 0))
    if before is not None:
        # the streams' recordings already ended the gate: the budget, or a head past its deadline
        tally.stop = before
        tally.timed_out.update(dict(before.head_timed_out))
    play = functools.partial(
        _play_round,
        table=_Table(sides=sides, rng=rng, tally=tally, out_dir=out_dir, progress=progress),
        options=options,
        started=started,
    )
    results: list[ComparedCell] = []
    round_s: list[float] = []
    number = 1
    while True:
        if number <= options.rounds:
            pending_names = names
        else:
            pending = [r.cell_id for r in results if needs_more_rounds(r)]
            pending_names = [n for n in names if _key(sides, n) in pending]
        stop = tally.stop or stop_before(
            number,
            pending_names,
            max_rounds=options.max_rounds,
            budget_s=options.budget_s,
            elapsed_s=time.monotonic() - started,
            # before any sample, the first round runs on what is left of the budget
            sample_s=tally.sample_s if tally.sample_s else [0.0],
        )
        if stop is not None:
            if stop.over_budget:
                progress(f"gate: {stop.reason}; {len(pending_names)} cell(s) stay as they are")
            family = _compare_all(spec, sides, settings, tally)
            return Rounds(results=family.cells, stopped=stop.reason, settings=family.settings)
        eta = _eta(
            elapsed_s=time.monotonic() - started,
            round_s=round_s,
            rounds_left=max(options.rounds - number + 1, 1),
            budget_s=options.budget_s,
        )
        if number <= options.rounds:
            progress(f"gate: round {number}/{options.rounds} of {len(names)} cells, base and head{eta}")
        else:
            progress(
                f"gate: round {number}/{options.max_rounds} for {len(pending_names)} cell(s) not yet clear{eta}"
            )
        t0 = time.monotonic()
        play(number, pending_names)
        round_s.append(time.monotonic() - t0)
        results = _compare_all(spec, sides, settings, tally).cells
        number += 1


def _eta(*, elapsed_s: float, round_s: Sequence[float], rounds_left: int, budget_s: float) -> str:
    """``" (4m10s in; about 3m20s to go, within the budget's 6m50s)"``: the time so far, and what
    the rounds left take at the pace of the rounds so far (never past the budget)."""

    def clock(seconds: float) -> str:
        whole = max(round(seconds), 0)
        return f"{whole // 60}m{whole % 60:02d}s"

    left = max(budget_s - elapsed_s, 0.0)
    if not round_s:
        return f" ({clock(elapsed_s)} in; {clock(left)} left of the budget)"
    to_go = min(rounds_left * statistics.mean(round_s), left)
    return f" ({clock(elapsed_s)} in; about {clock(to_go)} to go, within the budget's {clock(left)})"


@dataclass
class _Tally:
    """What the rounds so far took: the rounds each cell had, the seconds of each sample."""

    rounds_of: dict[str, int]
    sample_s: list[float] = field(default_factory=list)
    # set when no further sample is to run (the budget is spent, head timed out)
    stop: Stop | None = None
    # gate names of the cells whose head timed out, with the deadline it had
    timed_out: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Table:
    """What every turn of the rounds plays on: both sides, the run order's draw, the tally so far,
    where records go and where progress lines go."""

    sides: Mapping[str, GateSide]
    rng: random.Random
    tally: _Tally
    out_dir: Path
    progress: Callable[[str], None]


def _play_round(
    number: int, cell_names: Sequence[str], *, table: _Table, options: GateOptions, started: float
) -> None:
    sides, rng, tally, out_dir, progress = table.sides, table.rng, table.tally, table.out_dir, table.progress
    paired: set[str] = set()
    turns = round_order(number, cell_names, [sides[label] for label in SIDES], rng)
    # crossed guest pairs on CPUs of their own run at the same moment where the runner has CPUs
    # for several (harness.gate.run.guest_pairs); with one CPU pair, one after the other as ever
    at_once = len({slot for name in cell_names if (slot := _slot(sides["base"], name))}) > 1
    for turn in turns:
        if tally.stop is not None:
            return
        left_s = options.budget_s - (time.monotonic() - started)
        # a sample starts only where twice what samples took so far fits what is left
        if left_s <= 2 * (statistics.mean(tally.sample_s) if tally.sample_s else 0.0):
            tally.stop = Stop(f"budget of {options.budget_s / 60:.0f} min reached", over_budget=True)
            return
        per = turn.side.per_round.get(turn.cell, 1)
        # a cell of several samples a round, or whose pair runs together (a guest's, one a round)
        if per > 1 or turn.cell in turn.side.together:
            if turn.cell not in paired:
                clock = Clock(options.budget_s, started, options.machine.workload_timeout_s)
                batch = [turn.cell]
                if at_once and _slot(turn.side, turn.cell):
                    batch = _batch(turn.cell, [t.cell for t in turns], turn.side, paired)
                paired.update(batch)
                if len(batch) == 1:
                    _play_pairs(number, turn.cell, per, table, clock=clock)
                else:
                    _play_at_once(number, batch, table, clock=clock)
            continue
        deadline = min(options.machine.workload_timeout_s, left_s)
        if turn.side.subject.label == "head":
            deadline = head_deadline(_workload_times(sides["base"], turn.cell), limit_s=deadline)
        t0 = time.monotonic()
        _run_one(turn.side, turn.cell, number, out_dir, progress, workload_timeout_s=deadline)
        tally.sample_s.append(time.monotonic() - t0)
        tally.rounds_of[turn.cell] = number
        last = turn.side.records[turn.cell].samples[-1]
        if turn.side.subject.label == "head" and timed_out(last):
            tally.timed_out[turn.cell] = deadline
            tally.stop = Stop(f"head timed out on {turn.cell} (deadline {deadline:.0f} s)")
            progress(
                f"gate: head's guest of {turn.cell} ran past its deadline of {deadline:.0f} s: no more rounds"
            )


#: what a sample's deadline is measured against: a guest's workload as the host clocked it, a
#: replay's passes (their summed wall times)
TIMED_METRICS = ("host.workload_s", "replay.wall_s")


def _workload_times(side: GateSide, name: str) -> list[float]:
    """The workload times of ``side``'s ok samples of cell ``name``, as the host clocked them (a
    replay sample's: its passes' wall time)."""
    record = side.records.get(name)
    times = []
    for s in record.samples if record is not None else ():
        if not s.ok:
            continue
        for key in TIMED_METRICS:
            if isinstance(s.metrics.get(key), (int, float)):
                times.append(float(s.metrics[key]))
                break
    return times


def _slot(side: GateSide, name: str) -> tuple[int, int] | None:
    """The CPU pair cell ``name``'s crossed guest pairs run on (None: not a crossed guest pair)."""
    pairing = side.together.get(name)
    crossing = pairing.crossing if pairing is not None else None
    return crossing.cpus if crossing is not None else None


def _batch(first: str, order: Sequence[str], side: GateSide, paired: set[str]) -> list[str]:
    """``first`` and the crossed guest pairs after it in the round's ``order`` that run at the same
    moment: one a CPU pair, none played yet this round."""
    batch, taken = [first], {_slot(side, first)}
    for name in dict.fromkeys(order):
        slot = _slot(side, name)
        if name in paired or name in batch or slot is None or slot in taken:
            continue
        batch.append(name)
        taken.add(slot)
    return batch


def _play_at_once(number: int, names: Sequence[str], table: _Table, *, clock: Clock) -> None:
    """Round ``number`` of the crossed guest pairs ``names`` at the same moment, each in a thread
    of its own on its own CPU pair (:func:`_play_pairs`).  Each draws its pairs' order from a
    generator seeded from the round's in turn, so that a seed gives the same orders however the
    threads interleave."""
    tables = {name: replace(table, rng=random.Random(table.rng.randrange(2**32))) for name in names}
    per = {name: table.sides["base"].per_round.get(name, 1) for name in names}
    _all_at_once(
        [
            (
                f"{name}-pairs",
                functools.partial(_play_pairs, number, name, per[name], tables[name], clock=clock),
            )
            for name in names
        ]
    )


def _all_at_once(jobs: Sequence[tuple[str, Callable[[], None]]]) -> None:
    """Each job in a thread of its own (named), all waited for; what the first that failed raised
    is raised again in the calling thread (the gate's own)."""
    raised: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread below
            raised.append(exc)

    threads = [threading.Thread(target=run, args=(job,), name=name) for name, job in jobs]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM reaches this thread only: end what the jobs started (their QEMU and
        # qemu-io), again while they run (a job may start one after the first sweep), so that each
        # job's own cleanup runs and the threads end before the gate does
        deadline = time.monotonic() + 60
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            proc.end_children()
            for thread in threads:
                thread.join(timeout=0.2)
        raise
    if raised:
        raise raised[0]


def _play_pairs(number: int, name: str, per: int, table: _Table, *, clock: Clock) -> None:
    """Round ``number`` of a cell taking ``per`` samples a round: ``per`` pairs of base and head,
    each pair's order drawn, so that sample i of both sides are taken next to each other; where
    the cell's pairs run together, both samples of a pair at the same moment.

    As for a guest cell, head's samples have the deadline :func:`head_deadline` gives from base's
    own times of the cell; a head that runs past it ends the rounds (``head-timed-out``).  A pair
    starts only where twice what the pairs so far took fits what is left of the budget."""
    sides, rng, tally, out_dir, progress = table.sides, table.rng, table.tally, table.out_dir, table.progress
    spent = dict.fromkeys(SIDES, 0.0)
    pairing = sides["base"].together.get(name)
    deadlines = dict.fromkeys(SIDES, 0.0)

    def one(label: str, index: int) -> None:
        t0 = time.monotonic()
        try:
            _run_one(sides[label], name, index, out_dir, progress, workload_timeout_s=deadlines[label])
        finally:
            # a side that is done (or failed early) never keeps its partner waiting
            if pairing is not None:
                pairing.abort()
            spent[label] += time.monotonic() - t0

    started = time.monotonic()
    done = 0
    for k in range(1, per + 1):
        index = (number - 1) * per + k
        pair = list(SIDES)
        rng.shuffle(pair)
        pair_s = (time.monotonic() - started) / done if done else 0.0
        if clock.left_s() <= 2 * pair_s:
            tally.stop = Stop(f"budget of {clock.budget_s / 60:.0f} min reached", over_budget=True)
            break
        deadlines["base"] = clock.limit_s()
        deadlines["head"] = head_deadline(_workload_times(sides["base"], name), limit_s=clock.limit_s())
        if pairing is None:
            for label in pair:
                one(label, index)
        else:
            pairing.reset()
            _all_at_once([(f"{name}-{label}", functools.partial(one, label, index)) for label in pair])
        done = k
        if timed_out(sides["head"].records[name].samples[-1]):
            tally.timed_out[name] = deadlines["head"]
            tally.stop = Stop(f"head timed out on {name} (deadline {deadlines['head']:.0f} s)")
            progress(
                f"gate: head's sample of {name} ran past its deadline of {deadlines['head']:.0f} s: no more rounds"
            )
            break
    # one entry per side and round, as a cell of one sample a round: the budget's guess stays per turn
    tally.sample_s.extend(spent.values())
    tally.rounds_of[name] = (number - 1) * per + done


def _key(sides: Mapping[str, GateSide], name: str) -> str:
    """The id a gate cell goes by in the comparison: head's cell id."""
    return sides["head"].cells[name].id


def _run_one(
    side: GateSide,
    name: str,
    number: int,
    out_dir: Path,
    progress: Callable[[str], None],
    *,
    workload_timeout_s: float,
) -> None:
    """Bring ``side``'s record of cell ``name`` to ``number`` samples, the workload within
    ``workload_timeout_s``."""
    cell = side.cells[name]
    # the side's binaries travel in its session's options, and so do this sample's deadlines: its
    # boot within the workload's deadline too, which is within the budget
    opts = side.session.opts
    session = replace(
        side.session,
        opts=replace(
            opts,
            workload_timeout_s=workload_timeout_s,
            boot_timeout_s=min(opts.boot_timeout_s, workload_timeout_s),
        ),
    )
    _, record = session.run_cell(
        cell,
        where=gate_records(out_dir, side.subject.label),
        existing=side.records.get(name),
        progress=progress,
        label=f"[{side.subject.label}] ",
        of=number,
        upto=number,
        sampler=side.samplers.get(name),
    )
    side.records[name] = record


def _compare_all(spec: GateSpec, sides: Mapping[str, GateSide], settings: Settings, tally: _Tally) -> Family:
    """Every cell of the spec compared: by the statistics where both sides have records, a
    regression where head timed out, an error where a side has none (the budget ran out)."""
    groups = []
    names = []
    own: dict[str, ComparedCell] = {}
    for gc in spec.cells:
        base_rec = sides["base"].records.get(gc.name)
        head_rec = sides["head"].records.get(gc.name)
        head_cell = sides["head"].cells[gc.name]
        # the gate's name of the cell, and base's id where the sides' ids differ, beside its axes
        axes = {**head_cell.as_dict(), "gate_name": gc.name}
        if base_rec is not None and base_rec.cell.id != head_cell.id:
            axes["base_id"] = base_rec.cell.id
        cell = CellInfo(axes)
        if gc.name in tally.timed_out:
            own[gc.name] = _timed_out_result(cell, base_rec, head_rec, tally.timed_out[gc.name])
        elif base_rec is None or head_rec is None:
            missing = " and ".join(
                label for label, rec in (("base", base_rec), ("head", head_rec)) if rec is None
            )
            own[gc.name] = ComparedCell(
                cell_id=head_cell.id,
                cell=flatten_cell(cell),
                verdict=Verdict.ERROR,
                kind=Kind.MISSING,
                reason=f"no sample of {missing}: the gate's budget ran out first",
            )
        else:
            groups.append((cell, base_rec.samples, head_rec.samples))
            names.append(gc.name)
    # every cell x gated metric (and counter, when changed fails) is one test of the family
    family = judge_family(groups, settings=settings)
    compared = dict(zip(names, family.cells, strict=True))
    results = []
    for gc in spec.cells:
        result = own.get(gc.name) or compared[gc.name]
        results.append(replace(result, rounds=tally.rounds_of[gc.name]))
    return Family(results, family.settings)


def _timed_out_result(
    cell: CellInfo, base: Record | None, head: Record | None, deadline_s: float
) -> ComparedCell:
    base_samples = list(base.samples) if base is not None else []
    head_samples = list(head.samples) if head is not None else []
    return ComparedCell(
        cell_id=str(cell.id),
        # flat axes, as compare_cell writes every other cell: the document's shape, the short name
        cell=flatten_cell(cell),
        verdict=Verdict.REGRESSION,
        kind=Kind.HEAD_TIMED_OUT,
        reason=(
            f"head's {'replay' if cell.get('measure') == 'replay' else 'guest'} ran past its deadline of "
            f"{deadline_s:.0f} s ({HEAD_DEADLINE_FACTOR:g} x base's median workload time + "
            f"{HEAD_DEADLINE_FLOOR_S:g} s, within the budget)"
        ),
        base_ok=sum(1 for s in base_samples if s.ok),
        base_failed=sum(1 for s in base_samples if not s.ok),
        head_ok=sum(1 for s in head_samples if s.ok),
        head_failed=sum(1 for s in head_samples if not s.ok),
    )
