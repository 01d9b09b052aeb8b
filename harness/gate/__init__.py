"""The gate: base vs head on one runner, interleaved, compared cell by cell.

1. **Subjects.**  Each side is a revision checked out in a git worktree: its ``policy.toml`` and
   guest recipe (``images/``) are what it measures; its QEMU is given (``--base-qemu``,
   ``--head-qemu``) or built there by a configured build command.  This harness runs both sides.
2. **Cells.**  The gate spec (``harness/data/gate.toml``) names a few cells, each side completes
   them from its own policy; cells pair by their name in the spec, not by cell id, so a changed
   policy cell is measured against base's.
3. **Rounds.**  Every round runs each cell once per side, the order drawn at random per round
   and cell, so the host's drift hits both sides alike; cells still unclear get more rounds,
   until clear, ``max_rounds`` or the time budget.
4. **Verdicts.**  :mod:`harness.compare` does the statistics; a host canary (O_DIRECT writes on
   the work dir, before and after) turns time verdicts inconclusive when the host itself moved.

Output in ``OUT``: ``comparison.json`` (docs/comparison.md), ``summary.md``, the records and logs
of both sides.  Modules: :mod:`~harness.gate.spec`, :mod:`~harness.gate.subjects`,
:mod:`~harness.gate.checks` (each side's cells checked before it is built),
:mod:`~harness.gate.options`, :mod:`~harness.gate.judge` (the host's figures where head brings
another guest), :mod:`~harness.gate.rounds` (within the budget, head's deadline from base's
times), :mod:`~harness.gate.streams` (base's request stream of each replay cell),
:mod:`~harness.gate.canary` and :mod:`~harness.gate.run` (one gate from its sides to its outputs).
"""

from harness.gate.canary import CANARY_CHUNK, CANARY_MIB, canary_once, host_canary, judge_canary
from harness.gate.options import GateAsked, GateOptions
from harness.gate.rounds import GateSide, Rounds, Stop, run_rounds, stop_before
from harness.gate.run import GateResult, comparison_document, open_sides, run_gate
from harness.gate.spec import (
    GATE_SPEC,
    SPEC_KEYS,
    SPEC_KEYS_TABLES,
    GateCell,
    GateSpec,
    load_gate_spec,
    parse_gate_spec,
    settings_for,
)
from harness.gate.subjects import (
    SIDES,
    Subject,
    SubjectSource,
    git,
    prepare_subject,
    prepared_subjects,
    remove_worktree,
    repo_toplevel,
    resolve_rev,
)

__all__ = [
    "CANARY_CHUNK",
    "CANARY_MIB",
    "GATE_SPEC",
    "SIDES",
    "SPEC_KEYS",
    "SPEC_KEYS_TABLES",
    "GateAsked",
    "GateCell",
    "GateOptions",
    "GateResult",
    "GateSide",
    "GateSpec",
    "Rounds",
    "Stop",
    "Subject",
    "SubjectSource",
    "canary_once",
    "comparison_document",
    "git",
    "host_canary",
    "judge_canary",
    "load_gate_spec",
    "open_sides",
    "parse_gate_spec",
    "prepare_subject",
    "prepared_subjects",
    "remove_worktree",
    "repo_toplevel",
    "resolve_rev",
    "run_gate",
    "run_rounds",
    "settings_for",
    "stop_before",
]
