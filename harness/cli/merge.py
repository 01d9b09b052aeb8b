"""``diskbench merge``: join the record dirs of a sharded sweep into one."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import err
from harness.errors import ExitCode


def add_parser(sub: Any) -> None:
    merge = sub.add_parser(
        "merge",
        help="join the record dirs of a sharded sweep into one",
        description=(
            "Copy the records (and their logs) of several shard dirs into one dir. Records of "
            "different accel, QEMU version, CPU, guest or policy are refused unless --allow-mixed, "
            "which keeps each identity in its own subdirectory. A cell found twice keeps the record "
            "with more ok samples."
        ),
    )
    merge.add_argument(
        "dirs", nargs="+", type=Path, help="record dirs, e.g. RESULTS/sweeps/NAME of each shard"
    )
    merge.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="a new or empty directory for the merged records",
    )
    merge.add_argument(
        "--allow-mixed",
        action="store_true",
        help="merge records of different machine identities anyway, each identity in its own subdir",
    )


def run(args: argparse.Namespace) -> int:
    from harness.sweep.merge import merge_dirs

    result = merge_dirs(args.dirs, args.out, allow_mixed=args.allow_mixed, log=err)
    for slug, count in sorted(result.groups.items()):
        where = result.out_dir / slug if result.mixed else result.out_dir
        print(f"{count} records -> {where}")
    if result.mixed:
        err(
            "merge: WARNING: the output holds MIXED identities, one subdirectory each: never compare across them"
        )
    return ExitCode.OK
