"""Every figure of the storage policy's own cell, per workload.

The cell is ``policy.cell(workload=...)`` of the commit's ``policy.toml``:
its image and drive options, and whatever ``[drive.options]`` it adds (a
throttle shows here, and in every matrix cell).  When the policy's cell is
also a matrix cell it is run once and shown in both places.
"""

from __future__ import annotations

import os

from harness import sweep
from history import layout
from history.run import setup_cache

__all__ = ["setup_cache"]

SPEC = sweep.load_spec(layout.spec_path(os.environ))

for _group in layout.policy_groups(SPEC):
    globals()[_group.class_name] = layout.benchmark_class(_group, "policy", __name__, SPEC.params)
