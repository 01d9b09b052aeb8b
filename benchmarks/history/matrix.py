"""Every figure of every cell of the history matrix: one class per workload.

The classes are made from the matrix spec (``sweeps/history.toml``, or
``$DISKBENCH_HISTORY_SPEC``): their params are the spec's axes other than
the workload (format x cache x interface by default), so asv draws one line
per combination; an excluded combination or a failed cell is a gap.
"""

from __future__ import annotations

import os

from harness import sweep
from history import layout
from history.run import setup_cache

__all__ = ["setup_cache"]

SPEC = sweep.load_spec(layout.spec_path(os.environ))

for _group in layout.matrix_groups(SPEC):
    globals()[_group.class_name] = layout.benchmark_class(_group, "matrix", __name__, SPEC.params)
