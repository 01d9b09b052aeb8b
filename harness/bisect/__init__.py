"""Bisection: the first commit between a good and a bad revision that is measured like the bad one.

``diskbench bisect --good REV --bad REV`` walks the first-parent line from
good to bad of the tracked repository (this one, or a QEMU tree built by
``--build-command``), as ``git bisect`` does, for the cells of a gate spec.
The ends are compared once; every step is the gate's comparison of the step
commit with the good end and with the bad end (interleaved, adaptive rounds,
the minimum effect, "unchanged" by equivalence), and
:mod:`~harness.bisect.classify` says good, bad or unclear from the two.  A
commit that does not build or boot, or that is unclear, is skipped.  The
state is written after every step (:mod:`~harness.bisect.state`): a stopped
bisection goes on where it stopped.

The package: :mod:`~harness.bisect.search` (the window and the next commit,
pure), :mod:`~harness.bisect.classify` (a step's outcome, pure),
:mod:`~harness.bisect.state` (``OUT/bisect.json``), :mod:`~harness.bisect.report`
(the text), :mod:`~harness.bisect.builds` (each commit's QEMU built once with
``--build-command``) and :mod:`~harness.bisect.run` (the driver, on
:func:`harness.gate.run_gate`).  ``docs/bisect.md`` says it for users.
"""

from harness.bisect.classify import CellVerdict, Classified, classify, classify_cell, separating
from harness.bisect.run import BisectResult, commit_range, run_bisect
from harness.bisect.search import Found, Outcome, Window, next_commit, result, window
from harness.bisect.state import STATE_FILE, BisectState, Step, load_state, resume, save_state

__all__ = [
    "STATE_FILE",
    "BisectResult",
    "BisectState",
    "CellVerdict",
    "Classified",
    "Found",
    "Outcome",
    "Step",
    "Window",
    "classify",
    "classify_cell",
    "commit_range",
    "load_state",
    "next_commit",
    "result",
    "resume",
    "run_bisect",
    "save_state",
    "separating",
    "window",
]
