"""The gate: base vs head on one runner, interleaved, compared cell by cell.

A gate run has four parts:

1. **Subjects.**  Each side (base, head) is a revision of the tracked repository,
   checked out in a git worktree: its ``policy.toml`` and its guest recipe
   (``images/``) are what that side measures; its QEMU is either given
   (``--base-qemu``/``--head-qemu``) or built in the worktree by a configured
   build command.  The harness code that runs is this one, for both sides.
2. **Cells.**  The gate spec (``harness/data/gate.toml``) names a few cells; each
   side completes them from its own policy.  Cells are paired by their name in
   the spec, not by cell id: when a pull request changes the policy (seed 001:
   qcow2 preallocation off → metadata), the policy cell of head is another
   point of the matrix than base's, and that difference is what is measured.
3. **Rounds.**  Every round runs each cell once for base and once for head, the
   order of cells and of the two sides drawn at random per round and per cell,
   so drift of the host (thermal, a neighbour, the page cache) hits both sides
   alike.  After the first rounds, only cells whose result is not yet clear get
   more, until clear, ``max_rounds``, or the time budget.
4. **Verdicts.**  :mod:`harness.compare` does the statistics; a host canary
   (O_DIRECT writes on the work dir, before and after) turns time verdicts
   inconclusive when the host itself moved.

Output in ``OUT``: ``comparison.json`` (see ``docs/comparison.md``),
``summary.md``, and the records and logs of both sides.

The package follows those parts: :mod:`~harness.gate.spec` (the gate spec and
the settings it gives), :mod:`~harness.gate.subjects` (worktrees, policy,
recipe and QEMU per side), :mod:`~harness.gate.checks` (each side's cells
through a sweep's image, size and free-space checks before it is built),
:mod:`~harness.gate.options` (what a run was asked for, decided once),
:mod:`~harness.gate.judge` (the host's figures in place of the guest's when
the head brings another guest), :mod:`~harness.gate.rounds` (the rounds,
within the budget from the first, a head's deadline from base's times,
ordered by the scheduler sweeps use too, :mod:`harness.sweep.rounds`),
:mod:`~harness.gate.streams` (base's request stream of each replay cell, handed to both
sides' samples), :mod:`~harness.gate.canary` (the host canary) and :mod:`~harness.gate.run`
(one gate run from its sides to its outputs).
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
