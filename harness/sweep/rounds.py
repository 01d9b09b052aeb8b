"""The one round scheduler of sweeps and gates.

Samples are taken in rounds: round ``n`` brings each of its cells to ``n``
samples, once on every side (a sweep has one side, its session; a gate has
two, base and head).  A host that speeds up or slows down over a long run
then shifts every cell and every side alike, instead of the cells that
happened to run last.

With a random generator, the order of the cells and of each cell's sides is
drawn anew per round (the gate); without one, it is the order given (a
sweep, whose records are its checkpoint and whose order must be the same on
a resume).  The scheduler only orders; the caller runs each turn and decides
which cells the next round gets.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

C = TypeVar("C")
S = TypeVar("S")


@dataclass(frozen=True)
class Turn(Generic[C, S]):
    """One sample to take: ``cell`` on ``side``, bringing that side's record to ``round`` samples."""

    round: int
    cell: C
    side: S


def round_order(
    number: int, cells: Sequence[C], sides: Sequence[S], rng: random.Random | None = None
) -> list[Turn[C, S]]:
    """The turns of round ``number``: each cell once per side, the sides of a cell one after the other.

    With ``rng`` the cells are shuffled, then each cell's sides (in that order
    of draws, so a seed gives the same order every time); without, both stay
    as given.
    """
    order = list(cells)
    if rng is not None:
        rng.shuffle(order)
    turns: list[Turn[C, S]] = []
    for cell in order:
        pair = list(sides)
        if rng is not None:
            rng.shuffle(pair)
        turns.extend(Turn(number, cell, side) for side in pair)
    return turns


def rounds(
    numbers: Iterable[int],
    cells_of: Callable[[int], Sequence[C]],
    sides: Sequence[S],
    rng: random.Random | None = None,
) -> Iterator[Turn[C, S]]:
    """The turns of several rounds, ``cells_of(n)`` being the cells round ``n`` gets."""
    for number in numbers:
        yield from round_order(number, cells_of(number), sides, rng)
