"""The dd workload (seed 001): DD_MIB MiB in DD_CHUNK_MIB MiB chunks, then fsync.

The guest script (``images/workloads/dd.sh``) computes its figures itself
(``bytes``, ``mib_per_s``, in the common metrics) and sends no raw outputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.workloads import Metric, Parsed, expect_keys

# bytes and mib_per_s are common metrics (harness.workloads.COMMON_METRICS)
METRICS: tuple[Metric, ...] = ()


def parse_outputs(outputs: Mapping[str, str]) -> Parsed:
    expect_keys("dd", outputs, ())
    return {}, {}
