"""``diskbench kvmcheck``: what this machine has, whether KVM works, and a gate on it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import err
from harness.errors import ExitCode, UsageError

DEFAULT_OUT = Path("kvm-check")
DEFAULT_WORK_DIR = Path("/var/tmp/diskbench-kvm-check")


def add_parser(sub: Any) -> None:
    check = sub.add_parser(
        "kvmcheck",
        help="say what this machine has, whether a guest boots under KVM, and run an A/A gate",
        description=(
            "Say what this machine has (CPUs, memory, /dev/kvm, the QEMU), boot a guest under TCG and "
            "under KVM (timed; the exact error where one does not boot), then: where KVM works, one dd "
            "and one install sample under KVM beside the same under TCG, an A/A gate of the default "
            "spec with as many crossed pairs at once as the CPUs give, and the booth-2010 preset at a "
            "small scale; where it does not, the A/A gate under TCG. Within one deadline (7 min; "
            "--quick 4). Writes OUT/kvm-check.json and OUT/kvm-check.txt and prints the text. "
            "scripts/kvm-check.sh runs it, in the bundle too (docs/kvm.md)."
        ),
        epilog="Exit codes: 0 the check ran through (KVM or not), 2 bad usage, 3 no guest boots or the gate failed.",
    )
    check.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help="where kvm-check.json and kvm-check.txt go",
    )
    check.add_argument(
        "--work-dir",
        type=Path,
        default=DEFAULT_WORK_DIR,
        help="where disk images are created: a real disk, never tmpfs",
    )
    check.add_argument(
        "--quick", action="store_true", help="a tiny check: a small gate of two dd cells, 5 rounds"
    )
    check.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="the whole check's deadline (default: 420, --quick 240)",
    )


def run(args: argparse.Namespace) -> int:
    from harness.bundle.check import CheckOptions, run_check

    if args.deadline_s is not None and not 60 <= args.deadline_s <= 3600:
        raise UsageError(f"--deadline-s {args.deadline_s:g}: use 60 to 3600 seconds")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: not a directory")
    opts = CheckOptions(
        out_dir=args.out,
        work_dir=args.work_dir,
        binaries=args.binaries,
        quick=args.quick,
        deadline_s=args.deadline_s,
    )
    doc = run_check(opts, progress=err)
    print((args.out / "kvm-check.txt").read_text(), end="")
    print(f"json: {args.out / 'kvm-check.json'}")
    return ExitCode.OK if doc["ok"] else ExitCode.INFRA
