"""The mkfs workload (seed 003): mkfs.ext4 of the whole disk, inode tables really written.

The guest (``images/workloads/mkfs.sh``) runs ``mke2fs -E
lazy_itable_init=0,lazy_journal_init=0,nodiscard`` and sends its messages
as ``outputs.mke2fs``; it reports the disk's size as ``bytes`` itself.  From
the messages come the filesystem's geometry: how many blocks, inodes and
block groups (each group's inode table is what the slow case writes) and the
journal's size.  These describe the work, they are not speeds: informational.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.errors import ProtocolError
from harness.workloads.metrics import Metric, info
from harness.workloads.params import FS, Parsed, WorkloadKind, expect_keys

OUTPUT_KEY = "mke2fs"

METRICS: tuple[Metric, ...] = (
    info("mkfs.fs_bytes", "B", "size of the new filesystem (blocks x block size)"),
    info("mkfs.inodes", "count", "inodes of the new filesystem"),
    info("mkfs.block_groups", "count", "block groups, each with an inode table mke2fs wrote"),
    info("mkfs.journal_bytes", "B", "the ext3/ext4 journal mke2fs wrote (absent for ext2)"),
)

# "Creating filesystem with 524288 4k blocks and 131072 inodes"
_SUMMARY_RE = re.compile(r"^Creating filesystem with (\d+) (\d+)k blocks and (\d+) inodes\s*$", re.MULTILINE)
# "Writing inode tables:  0/16     done": the progress counter's total is the group count
_INODE_TABLES_RE = re.compile(r"^Writing inode tables:\s*\d+/(\d+)", re.MULTILINE)
# "Creating journal (16384 blocks): done"
_JOURNAL_RE = re.compile(r"^Creating journal \((\d+) blocks\)", re.MULTILINE)


def parse_mke2fs(text: str) -> Parsed:
    """Figures and fields from mke2fs's messages; :class:`ProtocolError` without its summary line.

    ``mkfs.block_groups`` is only there when mke2fs printed its inode-table
    progress counter; it is never derived from assumed defaults.
    """
    summary = _SUMMARY_RE.search(text)
    if summary is None:
        raise ProtocolError(
            f"mke2fs output has no 'Creating filesystem with N Kk blocks and M inodes' line: {text[:120]!r}"
        )
    blocks, block_kib, inodes = (int(g) for g in summary.groups())
    block_size = block_kib * 1024
    metrics: dict[str, float] = {
        "mkfs.fs_bytes": float(blocks * block_size),
        "mkfs.inodes": float(inodes),
    }
    tables = _INODE_TABLES_RE.search(text)
    if tables is not None:
        metrics["mkfs.block_groups"] = float(tables.group(1))
    journal = _JOURNAL_RE.search(text)
    if journal is not None:
        metrics["mkfs.journal_bytes"] = float(int(journal.group(1)) * block_size)
    fields: dict[str, Any] = {"mke2fs_summary": summary.group(0).strip(), "mke2fs_output": text}
    return metrics, fields


def parse_outputs(outputs: Mapping[str, str]) -> Parsed:
    expect_keys("mkfs", outputs, (OUTPUT_KEY,))
    return parse_mke2fs(outputs[OUTPUT_KEY])


WORKLOAD = WorkloadKind(
    "mkfs",
    params=(FS,),
    told=(FS,),
    # with every inode table written: about 1 s per GiB under TCG (5 GiB: 4-8 s)
    # a prior (a boot, which it once included, taken out)
    estimate_s=lambda v, disk_size: 10.0 + disk_size / 1024**3 * 1.5,
    write_bytes=lambda v: 0,
    metrics=METRICS,
    parse_outputs=parse_outputs,
    words="mkfs (a filesystem made)",
    headlines=(("total_s", "total"), ("phase.mkfs_s", "mkfs")),
    phases=("mkfs", "fsck"),
    figures=("bytes",),
)
