"""The round scheduler that sweeps and gates share."""

from __future__ import annotations

import random

from harness.sweep.rounds import Turn, round_order, rounds


def _drawn(seed: int) -> list[tuple[int, str, str]]:
    """Three rounds of a gate: cells a, b, c, then only b and c, on base and head."""
    turns = rounds(
        (1, 2, 3), lambda n: ["a", "b", "c"] if n < 3 else ["b", "c"], ["base", "head"], random.Random(seed)
    )
    return [(t.round, t.cell, t.side) for t in turns]


def test_a_seed_draws_the_gates_order_of_cells_and_sides() -> None:
    # the order gates of seed 7 have always drawn: cells shuffled, then each cell's sides
    assert _drawn(7) == [
        (1, "c", "base"), (1, "c", "head"), (1, "a", "head"), (1, "a", "base"),
        (1, "b", "head"), (1, "b", "base"),
        (2, "b", "base"), (2, "b", "head"), (2, "a", "head"), (2, "a", "base"),
        (2, "c", "head"), (2, "c", "base"),
        (3, "c", "head"), (3, "c", "base"), (3, "b", "base"), (3, "b", "head"),
    ]  # fmt: skip
    assert _drawn(7) == _drawn(7) != _drawn(8)


def test_without_a_generator_a_round_keeps_the_given_order() -> None:
    assert round_order(2, ["x", "y"], ["s"]) == [Turn(2, "x", "s"), Turn(2, "y", "s")]
    turns = list(rounds(range(1, 4), lambda n: ["x", "y"] if n == 1 else ["y"], ["s"]))
    assert [(t.round, t.cell) for t in turns] == [(1, "x"), (1, "y"), (2, "y"), (3, "y")]
    assert round_order(1, [], ["s"], random.Random(1)) == []
