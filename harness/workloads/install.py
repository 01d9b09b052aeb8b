"""The install workload: partition, mkfs.ext4, unpack a Debian package set with dpkg.

The guest script (``images/workloads/install.sh``) counts ``files``,
``bytes`` and ``packages`` itself (common, informational metrics) and sends
no raw outputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.workloads import Metric, Parsed, expect_keys

# files, bytes and packages are common metrics (harness.workloads.COMMON_METRICS)
METRICS: tuple[Metric, ...] = ()


def parse_outputs(outputs: Mapping[str, str]) -> Parsed:
    expect_keys("install", outputs, ())
    return {}, {}
