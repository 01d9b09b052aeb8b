"""``diskbench history``: the asv history suite over commits, and its pages."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli import history_changes as changes_parser
from harness.cli.common import add_spec_repeat, binaries_environ, err
from harness.errors import ExitCode
from harness.history.asvrun import NATIVE, HistoryOptions, run_history
from harness.host.hostdisk import check_usable, names
from harness.paths import REPO_ROOT, default_work_dir


def add_parser(sub: Any) -> None:
    """``diskbench history``."""
    history = sub.add_parser(
        "history",
        help="run the asv history suite over commits, publish the pages (kvm and tcg apart)",
        description=(
            "Measure every figure of every cell of the history matrix (sweeps/history.toml) and "
            "of the storage policy's own cells at each commit with asv, then publish the pages. "
            "The asv machine is named HOST-kvm or HOST-tcg after the accelerator that works here, "
            "so the two never share a series. asv's output goes to RESULTS/logs/history-*.log."
        ),
    )
    which = history.add_mutually_exclusive_group()
    which.add_argument(
        "--commits",
        type=int,
        default=None,
        metavar="N",
        help="the last N commits of the config's branch (default: 1)",
    )
    which.add_argument("--range", default=None, metavar="A..B", help="the commits after A up to B")
    history.add_argument(
        "--machine", default=None, help="asv machine name, ending in -kvm or -tcg (default: HOSTNAME-ACCEL)"
    )
    history.add_argument("--publish-only", action="store_true", help="run nothing: publish the pages again")
    history.add_argument(
        "--html-dir", type=Path, default=None, help="where the pages go (default: the config's)"
    )
    history.add_argument(
        "--config",
        type=Path,
        default=REPO_ROOT / "asv.conf.json",
        help="asv config: this repository's asv.conf.json, or benchmarks/qemu/asv.conf.json "
        "(a QEMU repository)",
    )
    history.add_argument(
        "--repo", type=Path, default=None, help="a local checkout of the repository the config tracks"
    )
    history.add_argument(
        "--work-dir",
        type=Path,
        default=default_work_dir(),
        help="where the guests' disk images are created ($DISKBENCH_WORK_DIR changes it)",
    )
    history.add_argument(
        "--spec",
        type=Path,
        default=None,
        help="the history matrix (default: sweeps/history.toml; sweeps/history-small.toml is one dd "
        "cell, about a minute a commit under TCG)",
    )
    add_spec_repeat(history)
    history.add_argument(
        "--host-disk",
        default=NATIVE,
        metavar="NAME",
        help="put the work dir on a host disk model for the run (root only; docs/host-disks.md): "
        f"{', '.join(names())}; its series go to the asv machine HOST-NAME-ACCEL",
    )
    sub_history = history.add_subparsers(dest="history_command", metavar="{changes}")
    changes_parser.add_parser(sub_history)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "history_command", None) == "changes":
        return changes_parser.run(args)
    if not args.publish_only:
        check_usable(args.host_disk)
    result = run_history(
        HistoryOptions(
            config=args.config,
            binaries=args.binaries,
            commits=args.commits,
            range_=args.range,
            machine=args.machine,
            publish_only=args.publish_only,
            html_dir=args.html_dir,
            repo=args.repo,
            work_dir=args.work_dir,
            spec=args.spec,
            repeat=args.repeat,
            suite_environ=binaries_environ(args.binaries),
            host_disk=args.host_disk,
        ),
        log=err,
    )
    if result.commits:
        print(f"measured {len(result.commits)} commit(s) on asv machine {result.machine}")
    for commit, cells in result.failed.items():
        print(f"failed cells at {commit[:12]} (records under results/history/): {', '.join(cells)}")
    print(f"regressions flagged by asv: {result.regressions}")
    print(f"pages: {result.index}")
    print(f"asv log: {result.log}")
    return ExitCode.OK
