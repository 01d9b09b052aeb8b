"""The install workload: partition, mkfs.ext4, unpack a Debian package set with dpkg.

The guest script (``images/workloads/install.sh``) counts ``files``,
``bytes`` and ``packages`` itself (common, informational metrics) and sends
no raw outputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.workloads.metrics import Metric
from harness.workloads.params import MIB, Param, Parsed, WorkloadKind, expect_keys

# files, bytes and packages are common metrics (harness.workloads.metrics.COMMON_METRICS)
METRICS: tuple[Metric, ...] = ()

# The payload is a drive of its own (the runner attaches it), so the guest is told nothing.
PAYLOADS = ("small", "full")
PAYLOAD = Param(
    "payload", "full", "package set to install", choices=PAYLOADS, what="payload", flag_choices=True
)

# The workload's seconds under TCG on two cores: small's total_s was 25.3-30.5 s (median of each
# run of the default sweep, docs/snapshot-start.md); full's: three samples of one cell took
# 3.1 min with snapshot start, about 60 s a sample with its restore and the host's part.
_TCG_SAMPLE_S = {"small": 28.0, "full": 58.0}
# What an install writes, roughly twice the payload image measured today.
_WRITE_BYTES = {"small": 160 * MIB, "full": 320 * MIB}


def parse_outputs(outputs: Mapping[str, str]) -> Parsed:
    expect_keys("install", outputs, ())
    return {}, {}


WORKLOAD = WorkloadKind(
    "install",
    params=(PAYLOAD,),
    estimate_s=lambda v, disk_size: _TCG_SAMPLE_S[v["payload"]],
    write_bytes=lambda v: _WRITE_BYTES[v["payload"]],
    metrics=METRICS,
    parse_outputs=parse_outputs,
    words="install (Debian packages unpacked)",
    headlines=(("total_s", "total"), ("phase.unpack_s", "unpack")),
    phases=("partition", "mkfs", "mount", "extract", "unpack", "sync", "umount", "fsck"),
    figures=("files", "bytes", "packages"),
)
