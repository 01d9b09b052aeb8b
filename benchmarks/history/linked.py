"""Every figure of the linked-image cells: the policy's overlay over a populated base.

The cells are :func:`history.layout.linked_cell` of the commit's ``policy.toml``, one per chain
of :data:`history.layout.LINKED_CHAINS` (the class's ``backing`` parameter): a change of the
copy-on-write path (the policy's ``[overlay]``, QEMU's qcow2 driver) shows in their
``host.write_amplification`` and fio's random-write latencies.  A commit whose harness has no
backing chains has none (a gap).
"""

from __future__ import annotations

import os

from harness import sweep
from history import layout
from history.run import setup_cache

__all__ = ["setup_cache"]

SPEC = sweep.load_spec(layout.spec_path(os.environ))

for _group in layout.linked_groups(SPEC):
    globals()[_group.class_name] = layout.benchmark_class(_group, "linked", __name__, SPEC.params)
