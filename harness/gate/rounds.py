"""The gate's rounds: every cell on base and head, interleaved, until clear, ``max_rounds`` or the budget.

Every round runs each cell once for base and once for head, in the order
:func:`harness.sweep.rounds.round_order` draws from the run's seed, so drift
of the host (thermal, a neighbour, the page cache) hits both sides alike.
After the first ``rounds``, only cells whose result is not yet clear
(:func:`harness.compare.needs_more_rounds`) get more; :func:`stop_before`
decides when no further round runs.
"""

from __future__ import annotations

import functools
import random
import statistics
import time
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.compare import CellResult, Settings, compare_family, needs_more_rounds
from harness.gate.options import GateOptions
from harness.gate.spec import GateSpec
from harness.gate.subjects import SIDES, Subject
from harness.runner import Sampler
from harness.spec import Cell
from harness.sweep.rounds import round_order

if typing.TYPE_CHECKING:
    from harness.session import Session

# what one sample is guessed to take before any has run
FIRST_SAMPLE_S = 60.0


@dataclass
class GateSide:
    """One side, opened: its subject, its session, its cells by gate name and their records."""

    subject: Subject
    session: Session
    cells: dict[str, Cell]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: how a cell's samples are taken where not as its measure says (a replay cell: base's stream)
    samplers: dict[str, Sampler] = field(default_factory=dict)
    #: samples per round of a cell where not one (cheap replay cells take several, see _play_pairs)
    per_round: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Stop:
    """Why no further round runs; ``over_budget`` when cells stay unclear for lack of time."""

    reason: str
    over_budget: bool = False


@dataclass(frozen=True)
class Rounds:
    """The comparison after the last round, and why the rounds stopped."""

    results: list[CellResult]
    stopped: str


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
) -> Rounds:
    """Run the first rounds of every cell, then more of the unclear ones; compare after each."""
    rng = random.Random(options.seed)
    names = [gc.name for gc in spec.cells]
    tally = _Tally(rounds_of=dict.fromkeys(names, 0))
    play = functools.partial(
        _play_round, sides=sides, rng=rng, tally=tally, out_dir=out_dir, progress=progress
    )
    for number in range(1, options.rounds + 1):
        progress(f"gate: round {number}/{options.rounds} of {len(names)} cells, base and head")
        play(number, names)
    results = _compare_all(spec, sides, settings, tally.rounds_of)
    number = options.rounds + 1
    while True:
        pending = [r.cell_id for r in results if needs_more_rounds(r)]
        pending_names = [n for n in names if _key(sides, n) in pending]
        stop = stop_before(
            number,
            pending_names,
            max_rounds=options.max_rounds,
            budget_s=options.budget_s,
            elapsed_s=time.monotonic() - started,
            sample_s=tally.sample_s,
        )
        if stop is not None:
            if stop.over_budget:
                progress(f"gate: {stop.reason}; {len(pending_names)} cell(s) stay as they are")
            return Rounds(results=results, stopped=stop.reason)
        progress(f"gate: round {number}/{options.max_rounds} for {len(pending_names)} cell(s) not yet clear")
        play(number, pending_names)
        results = _compare_all(spec, sides, settings, tally.rounds_of)
        number += 1


@dataclass
class _Tally:
    """What the rounds so far took: the rounds each cell had, the seconds of each sample."""

    rounds_of: dict[str, int]
    sample_s: list[float] = field(default_factory=list)


def _play_round(
    number: int,
    cell_names: Sequence[str],
    *,
    sides: Mapping[str, GateSide],
    rng: random.Random,
    tally: _Tally,
    out_dir: Path,
    progress: Callable[[str], None],
) -> None:
    paired: set[str] = set()
    for turn in round_order(number, cell_names, [sides[label] for label in SIDES], rng):
        per = turn.side.per_round.get(turn.cell, 1)
        if per > 1:
            if turn.cell not in paired:
                paired.add(turn.cell)
                _play_pairs(number, turn.cell, per, sides, rng, tally, out_dir, progress)
            continue
        t0 = time.monotonic()
        _run_one(turn.side, turn.cell, number, out_dir, progress)
        tally.sample_s.append(time.monotonic() - t0)
        tally.rounds_of[turn.cell] = number


def _play_pairs(
    number: int,
    name: str,
    per: int,
    sides: Mapping[str, GateSide],
    rng: random.Random,
    tally: _Tally,
    out_dir: Path,
    progress: Callable[[str], None],
) -> None:
    """Round ``number`` of a cell taking ``per`` samples a round: ``per`` pairs of base and head,
    each pair's order drawn, so that sample i of both sides are taken next to each other."""
    spent = dict.fromkeys(SIDES, 0.0)
    for k in range(1, per + 1):
        pair = list(SIDES)
        rng.shuffle(pair)
        for label in pair:
            t0 = time.monotonic()
            _run_one(sides[label], name, (number - 1) * per + k, out_dir, progress)
            spent[label] += time.monotonic() - t0
    # one entry per side and round, as a cell of one sample a round: the budget's guess stays per turn
    tally.sample_s.extend(spent.values())
    tally.rounds_of[name] = number * per


def _key(sides: Mapping[str, GateSide], name: str) -> str:
    """The id a gate cell goes by in the comparison: head's cell id."""
    return sides["head"].cells[name].id


def _run_one(side: GateSide, name: str, number: int, out_dir: Path, progress: Callable[[str], None]) -> None:
    """Bring ``side``'s record of cell ``name`` to ``number`` samples."""
    cell = side.cells[name]
    path = out_dir / "records" / side.subject.label / f"{cell.id}.json"
    # the side's binaries travel in its session's options
    _, record = side.session.run_cell(
        cell,
        path=path,
        existing=side.records.get(name),
        log_root=out_dir / "logs" / side.subject.label / cell.id,
        progress=progress,
        label=f"[{side.subject.label}] ",
        of=number,
        upto=number,
        sampler=side.samplers.get(name),
    )
    side.records[name] = record


def _compare_all(
    spec: GateSpec, sides: Mapping[str, GateSide], settings: Settings, rounds_of: Mapping[str, int]
) -> list[CellResult]:
    groups = []
    names = []
    for gc in spec.cells:
        base_rec = sides["base"].records.get(gc.name)
        head_rec = sides["head"].records.get(gc.name)
        if base_rec is None or head_rec is None:
            continue
        cell = dict(head_rec["cell"])
        base_id = base_rec["cell"]["id"]
        cell["gate_name"] = gc.name
        if base_id != cell["id"]:
            cell["base_id"] = base_id
        groups.append((cell, base_rec["samples"], head_rec["samples"]))
        names.append(gc.name)
    # every cell x gated metric (and counter, when changed fails) is one test of the family
    results = compare_family(groups, settings=settings)
    return [replace(r, rounds=rounds_of[name]) for r, name in zip(results, names, strict=True)]
